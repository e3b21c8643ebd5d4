"""Errors as RFC 9457 problem details (`application/problem+json`), one shape for every 4xx/5xx.

{"type": "/problems/validation-error", "title": "...", "status": 422, "detail": "...",
 "instance": "/v1/search", "requestId": "...", "errors": [{"path": "options.limit", "message": "...",
 "code": "greater_than_equal"}]}
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field
from starlette.exceptions import HTTPException as StarletteHTTPException

from hybridrag.pipeline.errors import InvalidSearch, NotReady, SearchError
from hybridrag.schemas.errors import MAX_REPORTED_ERRORS, ErrorDetail, message_for, pick_language

log = logging.getLogger("hybridrag.http")
PROBLEM_JSON = "application/problem+json"

_TITLES = {
    400: ("リクエストが不正です", "Bad request"),
    401: ("認証が必要です", "Authentication required"),
    403: ("アクセスが拒否されました", "Forbidden"),
    404: ("見つかりません", "Not found"),
    405: ("許可されていないメソッドです", "Method not allowed"),
    413: ("リクエストが大きすぎます", "Request body too large"),
    415: ("サポートされていないメディアタイプです", "Unsupported media type"),
    422: ("入力値が正しくありません", "Validation error"),
    429: ("リクエストが多すぎます", "Too many requests"),
    500: ("内部エラーが発生しました", "Internal server error"),
    503: ("サービスの準備ができていません", "Service not ready"),
}
_TYPES = {
    400: "bad-request",
    401: "unauthorized",
    403: "forbidden",
    404: "not-found",
    413: "body-too-large",
    415: "unsupported-media-type",
    422: "validation-error",
    429: "too-many-requests",
    503: "not-ready",
}


#: Longest piece of the request (a path, an id) echoed in an error body: the body stays bounded whatever
#: the request was (a 100,000-character id is not sent back twice).
MAX_ECHO_CHARS = 80


def echo(value: str, limit: int = MAX_ECHO_CHARS) -> str:
    """`value` quoted for an error message, cut to `limit` characters (saying how long it was)."""
    if len(value) <= limit:
        return repr(value)
    return f"{value[:limit]!r}… ({len(value)} characters)"


def bounded_path(path: str, limit: int = 200) -> str:
    """The request path as `instance`, cut to `limit` characters."""
    return path if len(path) <= limit else path[:limit] + "…"


class Problem(BaseModel):
    """The error body of every endpoint."""

    type: str
    title: str
    status: int
    detail: str | None = None
    instance: str | None = None
    request_id: str | None = Field(None, alias="requestId")
    errors: list[ErrorDetail] = Field(default_factory=list)
    error_count: int | None = Field(
        None,
        alias="errorCount",
        description="How many field errors the request had; `errors` lists the first 20 of them.",
    )

    model_config = {"populate_by_name": True, "serialize_by_alias": True}


class ProblemError(Exception):
    """Raise anywhere in a request to answer with a problem document."""

    def __init__(
        self,
        status: int,
        detail: str | None = None,
        errors: list[ErrorDetail] | None = None,
        headers: dict[str, str] | None = None,
        error_count: int | None = None,
    ) -> None:
        super().__init__(detail or str(status))
        self.status, self.detail, self.errors, self.headers = status, detail, errors or [], headers
        self.error_count = error_count  # None: problem_response counts `errors`


def problem_response(
    request: Request,
    status: int,
    detail: str | None = None,
    errors: list[ErrorDetail] | None = None,
    headers: dict[str, str] | None = None,
    error_count: int | None = None,
) -> JSONResponse:
    lang = pick_language(request.headers.get("accept-language"))
    ja, en = _TITLES.get(status, ("エラー", "Error"))
    body = Problem(
        type=f"/problems/{_TYPES.get(status, str(status))}",
        title=ja if lang == "ja" else en,
        status=status,
        detail=detail,
        instance=bounded_path(request.url.path),
        requestId=getattr(request.state, "request_id", None),
        errors=errors or [],
        errorCount=error_count if error_count is not None else (len(errors) if errors else None),
    )
    return JSONResponse(
        body.model_dump(mode="json", by_alias=True),
        status_code=status,
        media_type=PROBLEM_JSON,
        headers=headers,
    )


def field_error(request: Request, path: str, code: str, ctx: dict[str, Any] | None = None) -> ErrorDetail:
    lang = pick_language(request.headers.get("accept-language"))
    return ErrorDetail(path=path, message=message_for(code, lang, ctx), code=code)


#: The pipeline's errors as problem documents: status, and the headers they carry.
PIPELINE_PROBLEMS: dict[type[SearchError], tuple[int, dict[str, str]]] = {
    NotReady: (503, {"Retry-After": "5"}),
    InvalidSearch: (422, {}),
}


def pipeline_problem(request: Request, exc: SearchError) -> ProblemError:
    """A pipeline error as the problem the API answers with (`PIPELINE_PROBLEMS`)."""
    status, headers = next((v for kind, v in PIPELINE_PROBLEMS.items() if isinstance(exc, kind)), (500, {}))
    if isinstance(exc, InvalidSearch):
        return ProblemError(status, errors=[field_error(request, exc.path, exc.code, exc.ctx)])
    if isinstance(exc, NotReady):
        return ProblemError(status, f"index not loaded: {exc}", headers=headers)
    return ProblemError(status, str(exc), headers=headers)


def install_handlers(app: FastAPI) -> None:
    @app.exception_handler(SearchError)
    async def _pipeline(request: Request, exc: SearchError) -> JSONResponse:
        problem = pipeline_problem(request, exc)
        return problem_response(
            request, problem.status, problem.detail, problem.errors, problem.headers, problem.error_count
        )

    @app.exception_handler(ProblemError)
    async def _problem(request: Request, exc: ProblemError) -> JSONResponse:
        return problem_response(request, exc.status, exc.detail, exc.errors, exc.headers, exc.error_count)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        detail = exc.detail if isinstance(exc.detail, str) else None
        return problem_response(request, exc.status_code, detail, headers=getattr(exc, "headers", None))

    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, exc: RequestValidationError) -> JSONResponse:
        lang = pick_language(request.headers.get("accept-language"))
        errors = []
        for err in exc.errors()[:MAX_REPORTED_ERRORS]:
            loc = [str(p) for p in err.get("loc", ()) if p not in ("body", "path", "query")]
            code = str(err.get("type", "value_error"))
            errors.append(
                ErrorDetail(path=".".join(loc), message=message_for(code, lang, err.get("ctx")), code=code)
            )
        return problem_response(request, 422, errors=errors, error_count=len(exc.errors()))

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error on %s", request.url.path)
        return problem_response(
            request, 500, "an unexpected error occurred; see the server log for this request id"
        )
