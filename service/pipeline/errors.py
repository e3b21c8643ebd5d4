"""The search pipeline's errors: one base, so the HTTP layer maps them to problem documents in one table
(`http.problems.PIPELINE_PROBLEMS`) instead of catching each kind in each route."""

from __future__ import annotations

from typing import Any


class SearchError(Exception):
    """An error the pipeline reports to its caller (never a bug: those are other exceptions)."""


class NotReady(SearchError, RuntimeError):
    """The index or a model the request needs is not loaded yet (retry later)."""


class InvalidSearch(SearchError, ValueError):
    """A request that is valid against the schema but not against this index (e.g. embedding dimension):
    `path` names the field, `code` the message (`schemas.errors`), `ctx` fills it in."""

    def __init__(self, path: str, code: str, ctx: dict[str, Any]) -> None:
        super().__init__(f"{path}: {code}")
        self.path, self.code, self.ctx = path, code, ctx
