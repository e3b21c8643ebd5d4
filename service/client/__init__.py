"""Python client for the hybridrag service: sync and async, one shared core, nothing heavy imported.

    from hybridrag.client import HybridRagClient
    with HybridRagClient() as rag:                       # HYBRIDRAG_URL, HYBRIDRAG_API_KEY from the env
        result = rag.search("Who founded Sony?", limit=5)
        for item in result.results: print(item.score, item.content.text[:80])

Timeouts default to 15 s (the deep-research provider's budget). Connection errors and 5xx answers are retried
with exponential backoff; 4xx answers are not (they would fail again). Errors carry the status code, the
request id and the problem document's field errors.

Every invalid request raises `HybridRagValidationError`, whether the client found the problem before
sending (requests are validated with the contract's own schemas) or the service did: the same `errors` list
of {path, message, code}, in the language the client asked for (Japanese by default, as the service).
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote

import httpx
from pydantic import BaseModel, ValidationError

from hybridrag.schemas.batch import BatchMerge, BatchSearchRequest, BatchSearchResult
from hybridrag.schemas.documents import (
    AddDocumentsRequest,
    ChunkDetail,
    DocumentDetail,
    DocumentIn,
    DocumentList,
    WriteTask,
)
from hybridrag.schemas.errors import Language, pick_language, translate_errors
from hybridrag.schemas.search import SearchRequest, SearchResult

M = TypeVar("M", bound=BaseModel)

Query = str | SearchRequest | Mapping[str, Any]
DocumentLike = DocumentIn | Mapping[str, Any]
FileLike = str | os.PathLike[str] | tuple[str, bytes]
FINAL = ("succeeded", "failed")

DEFAULT_URL = "http://127.0.0.1:8000"
DEFAULT_TIMEOUT = 15.0


class HybridRagError(Exception):
    """A failed call: `status_code` is None when the service could not be reached at all."""

    def __init__(
        self,
        message: str,
        status_code: int | None = None,
        request_id: str | None = None,
        problem: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.request_id = request_id
        self.problem = dict(problem or {})

    @property
    def errors(self) -> list[dict[str, Any]]:
        return list(self.problem.get("errors", []))


class HybridRagValidationError(HybridRagError):
    """An invalid request (4xx): `errors` names the fields. `source` says who found the problem: "client"
    (before sending; `status_code` is then the 422 the service would have answered) or "service"."""

    @property
    def source(self) -> str:
        return str(self.problem.get("source", "service"))


_TITLES = {"ja": "入力値が正しくありません", "en": "Validation error"}


def validated(model: type[M], data: Any, language: str | None, prefix: tuple[str | int, ...] = ()) -> M:
    """`model.model_validate(data)`, raising the service's own error for an invalid request: a
    `HybridRagValidationError` whose problem document has the shape and messages a 422 from the service has."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        lang: Language = pick_language(language)
        errors = [e.model_dump() for e in translate_errors(exc, lang, prefix)]
        problem = {
            "type": "/problems/validation-error",
            "title": _TITLES[lang],
            "status": 422,
            "errors": errors,
            "errorCount": exc.error_count(),
            "source": "client",
        }
        message = "422 " + _TITLES[lang] + ": " + "; ".join(f"{e['path']}: {e['message']}" for e in errors)
        raise HybridRagValidationError(message, 422, None, problem) from None


class HybridRagUnavailable(HybridRagError):
    """The service could not answer (connection failure, timeout, 5xx) after the retries."""


class _Core:
    """What both clients share: configuration, request building, response parsing, the retry rule."""

    def __init__(
        self,
        base_url: str | None,
        api_key: str | None,
        timeout: float,
        retries: int,
        backoff: float,
        language: str | None = None,
    ) -> None:
        self.base_url = (base_url or os.environ.get("HYBRIDRAG_URL") or DEFAULT_URL).rstrip("/")
        self.language = language
        self.api_key = api_key if api_key is not None else os.environ.get("HYBRIDRAG_API_KEY")
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff

    def lang(self, language: str | None) -> str | None:
        """The language of one call: its own, else the client's."""
        return language or self.language

    def headers(self, language: str | None) -> dict[str, str]:
        language = self.lang(language)
        headers = {"Accept": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        if language:
            headers["Accept-Language"] = language
        return headers

    @staticmethod
    def request_dict(text: str | SearchRequest, options: Mapping[str, Any]) -> dict[str, Any]:
        """The wire form of one search, not yet validated: the contract's top-level fields beside `text`,
        every other option under `options`."""
        if isinstance(text, SearchRequest):
            return text.to_wire(exclude_unset=True)
        top = ("type", "embedding", "filters", "rrfConfig", "rerankConfig")
        request: dict[str, Any] = {"text": text, **{k: v for k, v in options.items() if k in top}}
        opts = {k: v for k, v in options.items() if k not in request}
        if opts:
            request["options"] = opts
        return request

    def body(
        self, text: str | SearchRequest, options: Mapping[str, Any], language: str | None = None
    ) -> dict[str, Any]:
        # Validated here so a mistake is reported before any network round trip, as the service would.
        request = self.request_dict(text, options)
        return validated(SearchRequest, request, self.lang(language)).to_wire(exclude_unset=True)

    def batch_body(
        self,
        queries: Sequence[Query],
        merge: BatchMerge | Mapping[str, Any] | bool | None,
        options: Mapping[str, Any],
        language: str | None = None,
    ) -> dict[str, Any]:
        """Each query is a string (with the shared `options`), a SearchRequest or a wire-format dict. The
        whole batch is validated at once, so every bad sub-query is reported (`queries[i]....`) as the
        service reports them."""
        wire = [dict(q) if isinstance(q, Mapping) else self.request_dict(q, options) for q in queries]
        body: dict[str, Any] = {"queries": wire}
        if merge is True:
            body["merge"] = {}
        elif isinstance(merge, BatchMerge):
            body["merge"] = merge.to_wire(exclude_unset=True)
        elif isinstance(merge, Mapping):
            body["merge"] = dict(merge)
        return validated(BatchSearchRequest, body, self.lang(language)).to_wire(exclude_unset=True)

    def documents_body(
        self, documents: Sequence[DocumentLike], language: str | None = None
    ) -> dict[str, Any]:
        wire = [d.to_wire(exclude_unset=True) if isinstance(d, DocumentIn) else dict(d) for d in documents]
        request = validated(AddDocumentsRequest, {"documents": wire}, self.lang(language))
        return request.to_wire(exclude_unset=True)

    @staticmethod
    def files(paths: Sequence[FileLike]) -> list[tuple[str, tuple[str, bytes]]]:
        out = []
        for item in paths:
            if isinstance(item, tuple):
                name, data = item
            else:
                path = Path(item)
                name, data = path.name, path.read_bytes()
            out.append(("files", (name, data)))
        return out

    def accept(self, response: httpx.Response | None) -> bool:
        """True when `response` is final (raising for a 4xx); False when the call should be retried."""
        if response is None or response.status_code >= 500:
            return False
        self.raise_for(response)
        return True

    def give_up(self, path: str, response: httpx.Response | None, last: Exception | None) -> HybridRagError:
        """The error to raise once every attempt has failed."""
        if response is not None:
            try:
                self.raise_for(response)
            except HybridRagError as exc:
                return exc
        return HybridRagUnavailable(f"{self.base_url}{path} unreachable: {last}")

    def delay(self, attempt: int) -> float:
        return float(self.backoff * (2**attempt))

    @staticmethod
    def raise_for(response: httpx.Response) -> None:
        if response.status_code < 400:
            return
        try:
            problem = response.json()
        except ValueError:
            problem = {"detail": response.text[:500]}
        rid = response.headers.get("x-request-id") or problem.get("requestId")
        message = f"{response.status_code} {problem.get('title', '')}".strip()
        if problem.get("errors"):
            message += ": " + "; ".join(f"{e.get('path')}: {e.get('message')}" for e in problem["errors"])
        elif problem.get("detail"):
            message += f": {problem['detail']}"
        cls = HybridRagValidationError if response.status_code < 500 else HybridRagUnavailable
        raise cls(message, response.status_code, rid, problem)


class HybridRagClient:
    """Blocking client."""

    def __init__(
        self,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        retries: int = 2,
        backoff: float = 0.25,
        transport: httpx.BaseTransport | None = None,
        language: str | None = None,
    ) -> None:
        """`language` ("ja" or "en"): the language of error messages, the client's and the service's."""
        self._core = _Core(base_url, api_key, timeout, retries, backoff, language)
        self._http = httpx.Client(base_url=self._core.base_url, timeout=timeout, transport=transport)

    def __enter__(self) -> HybridRagClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def _call(self, method: str, path: str, language: str | None = None, **kwargs: Any) -> httpx.Response:
        last: Exception | None = None
        for attempt in range(self._core.retries + 1):
            response = None
            try:
                response = self._http.request(method, path, headers=self._core.headers(language), **kwargs)
            except httpx.TransportError as exc:
                last = exc
            if response is not None and self._core.accept(response):
                return response
            if attempt < self._core.retries:
                time.sleep(self._core.delay(attempt))
        raise self._core.give_up(path, response, last) from last

    def search(self, text: str | SearchRequest, language: str | None = None, **options: Any) -> SearchResult:
        """Search; options are the contract's (limit=5, strategies=[...], filters={...}, type=...)."""
        body = self._core.body(text, options, language)
        return SearchResult.model_validate_json(self._call("POST", "/v1/search", language, json=body).content)

    def search_batch(
        self,
        queries: Sequence[Query],
        merge: BatchMerge | Mapping[str, Any] | bool | None = None,
        language: str | None = None,
        **options: Any,
    ) -> BatchSearchResult:
        """Several searches in one call (run concurrently by the service); `merge=True` adds an MMR list."""
        body = self._core.batch_body(queries, merge, options, language)
        response = self._call("POST", "/v1/search/batch", language, json=body)
        return BatchSearchResult.model_validate_json(response.content)

    def document(self, doc_id: str) -> DocumentDetail:
        """A document's full text and metadata, with its chunks' offsets."""
        response = self._call("GET", f"/v1/documents/{quote(doc_id, safe='')}")
        return DocumentDetail.model_validate_json(response.content)

    def chunk(self, chunk_id: str) -> ChunkDetail:
        """A chunk's text, its offsets in its document and its neighbours' ids."""
        response = self._call("GET", f"/v1/chunks/{quote(chunk_id, safe='')}")
        return ChunkDetail.model_validate_json(response.content)

    def ready(self) -> bool:
        try:
            return self._http.get("/readyz").status_code == 200
        except httpx.TransportError:
            return False

    # -- the documents API (writes need the service's write key as `api_key`)
    def add_documents(self, documents: Sequence[DocumentLike], language: str | None = None) -> WriteTask:
        """Queue documents ({"id"?, "title", "text", "url"?, "date"?, "metadata"?}); returns the task (202)."""
        body = self._core.documents_body(documents, language)
        return WriteTask.model_validate_json(self._call("POST", "/v1/documents", language, json=body).content)

    def add_files(self, files: Sequence[FileLike]) -> WriteTask:
        """Queue files (paths, or (name, bytes)): PDF, DOCX, HTML, Markdown, text, JSON lines."""
        response = self._call("POST", "/v1/documents", files=self._core.files(files))
        return WriteTask.model_validate_json(response.content)

    def delete_document(self, doc_id: str) -> WriteTask:
        response = self._call("DELETE", f"/v1/documents/{quote(doc_id, safe='')}")
        return WriteTask.model_validate_json(response.content)

    def task(self, task_id: str) -> WriteTask:
        return WriteTask.model_validate_json(
            self._call("GET", f"/v1/tasks/{quote(task_id, safe='')}").content
        )

    def wait(self, task: WriteTask | str, timeout: float = 120.0, interval: float = 0.2) -> WriteTask:
        """Poll a task until it succeeded or failed (returned either way); HybridRagError after `timeout`."""
        task_id = task if isinstance(task, str) else task.task_id
        deadline = time.monotonic() + timeout
        while True:
            current = self.task(task_id)
            if current.status in FINAL:
                return current
            if time.monotonic() > deadline:
                raise HybridRagError(f"task {task_id} still {current.status} after {timeout} s")
            time.sleep(interval)

    def list_documents(self, offset: int = 0, limit: int = 100) -> DocumentList:
        response = self._call("GET", "/v1/documents", params={"offset": offset, "limit": limit})
        return DocumentList.model_validate_json(response.content)


class AsyncHybridRagClient:
    """asyncio client with the same behaviour."""

    def __init__(
        self,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        retries: int = 2,
        backoff: float = 0.25,
        transport: httpx.AsyncBaseTransport | None = None,
        language: str | None = None,
    ) -> None:
        self._core = _Core(base_url, api_key, timeout, retries, backoff, language)
        self._http = httpx.AsyncClient(base_url=self._core.base_url, timeout=timeout, transport=transport)

    async def __aenter__(self) -> AsyncHybridRagClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def _call(
        self, method: str, path: str, language: str | None = None, **kwargs: Any
    ) -> httpx.Response:
        last: Exception | None = None
        for attempt in range(self._core.retries + 1):
            response = None
            try:
                response = await self._http.request(
                    method, path, headers=self._core.headers(language), **kwargs
                )
            except httpx.TransportError as exc:
                last = exc
            if response is not None and self._core.accept(response):
                return response
            if attempt < self._core.retries:
                await asyncio.sleep(self._core.delay(attempt))
        raise self._core.give_up(path, response, last) from last

    async def search(
        self, text: str | SearchRequest, language: str | None = None, **options: Any
    ) -> SearchResult:
        body = self._core.body(text, options, language)
        response = await self._call("POST", "/v1/search", language, json=body)
        return SearchResult.model_validate_json(response.content)

    async def search_batch(
        self,
        queries: Sequence[Query],
        merge: BatchMerge | Mapping[str, Any] | bool | None = None,
        language: str | None = None,
        **options: Any,
    ) -> BatchSearchResult:
        body = self._core.batch_body(queries, merge, options, language)
        response = await self._call("POST", "/v1/search/batch", language, json=body)
        return BatchSearchResult.model_validate_json(response.content)

    async def document(self, doc_id: str) -> DocumentDetail:
        response = await self._call("GET", f"/v1/documents/{quote(doc_id, safe='')}")
        return DocumentDetail.model_validate_json(response.content)

    async def chunk(self, chunk_id: str) -> ChunkDetail:
        response = await self._call("GET", f"/v1/chunks/{quote(chunk_id, safe='')}")
        return ChunkDetail.model_validate_json(response.content)

    async def ready(self) -> bool:
        try:
            return (await self._http.get("/readyz")).status_code == 200
        except httpx.TransportError:
            return False

    async def add_documents(
        self, documents: Sequence[DocumentLike], language: str | None = None
    ) -> WriteTask:
        body = self._core.documents_body(documents, language)
        response = await self._call("POST", "/v1/documents", language, json=body)
        return WriteTask.model_validate_json(response.content)

    async def add_files(self, files: Sequence[FileLike]) -> WriteTask:
        response = await self._call("POST", "/v1/documents", files=self._core.files(files))
        return WriteTask.model_validate_json(response.content)

    async def delete_document(self, doc_id: str) -> WriteTask:
        response = await self._call("DELETE", f"/v1/documents/{quote(doc_id, safe='')}")
        return WriteTask.model_validate_json(response.content)

    async def task(self, task_id: str) -> WriteTask:
        response = await self._call("GET", f"/v1/tasks/{quote(task_id, safe='')}")
        return WriteTask.model_validate_json(response.content)

    async def wait(self, task: WriteTask | str, timeout: float = 120.0, interval: float = 0.2) -> WriteTask:
        task_id = task if isinstance(task, str) else task.task_id
        deadline = time.monotonic() + timeout
        while True:
            current = await self.task(task_id)
            if current.status in FINAL:
                return current
            if time.monotonic() > deadline:
                raise HybridRagError(f"task {task_id} still {current.status} after {timeout} s")
            await asyncio.sleep(interval)

    async def list_documents(self, offset: int = 0, limit: int = 100) -> DocumentList:
        response = await self._call("GET", "/v1/documents", params={"offset": offset, "limit": limit})
        return DocumentList.model_validate_json(response.content)
