"""HTTP routes: thin wrappers that parse, delegate to the engine off the event loop, and serialise."""

from __future__ import annotations

import asyncio
import os
import time
import zlib
from typing import Any, TypeVar

from fastapi import APIRouter, Depends, Request, Response
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ValidationError

from hybridrag.http.deps import EngineDep, IndexDep, LanguageDep, rate_limit, require_api_key
from hybridrag.http.metrics import CONTENT_TYPE
from hybridrag.http.problems import Problem, ProblemError, echo, field_error
from hybridrag.pipeline.batch import merge_results
from hybridrag.pipeline.engine import InvalidSearch, NotReady
from hybridrag.schemas.base import SCHEMA_VERSION
from hybridrag.schemas.batch import BatchError, BatchOutcome, BatchSearchRequest, BatchSearchResult
from hybridrag.schemas.errors import translate_errors
from hybridrag.schemas.search import SearchRequest, SearchResult

M = TypeVar("M", bound=BaseModel)

_ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"model": Problem, "content": {"application/problem+json": {}}}
    for status in (400, 401, 413, 415, 422, 503)
}
_SEARCH_BODY = {
    "requestBody": {
        "required": True,
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/SearchRequest"}}},
    }
}

health = APIRouter(tags=["health"])
# The key is checked before the rate limit, so callers without a valid key cannot use up a key's budget.
api = APIRouter(dependencies=[Depends(require_api_key), Depends(rate_limit)], tags=["search"])


@health.get("/livez", summary="Liveness: the process answers")
async def livez() -> dict[str, str]:
    return {"status": "ok"}


@health.get(
    "/readyz", summary="Readiness: index and models loaded (503 with per-component status until then)"
)
async def readyz(engine: EngineDep) -> JSONResponse:
    components = {
        name: {"ready": c.ready, "detail": c.detail, "required": c.required}
        for name, c in engine.components.items()
    }
    body = {
        "status": "ready" if engine.ready else "not-ready",
        "components": components,
        "indexVersion": engine.index.version_name if engine.components["index"].ready else None,
        # Strategies this index cannot serve, and why (semantic without an embedding model, a graph-less build).
        "unavailable": dict(engine.index.unavailable) if engine.components["index"].ready else {},
        "schemaVersion": SCHEMA_VERSION,
        # Which worker process answered: with `serve --workers N` each has its own engine and version.
        "pid": os.getpid(),
    }
    return JSONResponse(body, status_code=200 if engine.ready else 503)


@health.get("/metrics", summary="Prometheus metrics", include_in_schema=False)
async def metrics(request: Request, engine: EngineDep) -> Response:
    registry = getattr(request.app.state, "metrics", None)
    if registry is None:
        raise ProblemError(404, "metrics are disabled (HYBRIDRAG_METRICS_ENABLED=false)")
    index = engine.current_index
    if index is not None:
        registry.set_index(index.version_name, len(index.documents), len(index.chunks))
    return Response(registry.render(), media_type=CONTENT_TYPE)


def _observe(request: Request, result: SearchResult) -> None:
    registry = getattr(request.app.state, "metrics", None)
    if registry is not None:
        registry.observe_search(result)


async def read_json_body(request: Request, limit: int) -> bytes:
    """The raw body, refusing the wrong media type, oversized bodies and invalid UTF-8 with clear errors."""
    # A body without a Content-Type is refused too: the media type is the caller's claim, never our guess.
    ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if ctype != "application/json" and not ctype.endswith("+json"):
        raise ProblemError(415, errors=[field_error(request, "body", "unsupported_media_type")])
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise ProblemError(413, errors=[field_error(request, "body", "body_too_large", {"limit": limit})])
    chunks = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise ProblemError(413, errors=[field_error(request, "body", "body_too_large", {"limit": limit})])
        chunks.append(chunk)
    body = decode_content(request, b"".join(chunks), limit)
    try:
        body.decode("utf-8")
    except UnicodeDecodeError:
        raise ProblemError(400, errors=[field_error(request, "body", "invalid_utf8")]) from None
    return body


def decode_content(request: Request, body: bytes, limit: int) -> bytes:
    """The body after its `Content-Encoding`: none, or gzip (HTTP clients compress large batch bodies).

    Decompression stops past `limit` bytes, so a small bomb is a 413 like any oversized body; another encoding
    is a 415 naming it; a damaged gzip stream is a 400.
    """
    encodings = [
        e.strip().lower() for e in request.headers.get("content-encoding", "").split(",") if e.strip()
    ]
    encodings = [e for e in encodings if e != "identity"]
    if not encodings:
        return body
    if encodings not in (["gzip"], ["x-gzip"]):
        shown = ", ".join(encodings)[:40]
        raise ProblemError(
            415, errors=[field_error(request, "body", "unsupported_content_encoding", {"encoding": shown})]
        )
    inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        out = inflater.decompress(body, limit + 1)
        complete = inflater.eof and not inflater.unconsumed_tail and not inflater.unused_data
    except zlib.error:
        raise ProblemError(400, errors=[field_error(request, "body", "invalid_gzip")]) from None
    if len(out) > limit:
        raise ProblemError(413, errors=[field_error(request, "body", "body_too_large", {"limit": limit})])
    if not complete:
        raise ProblemError(400, errors=[field_error(request, "body", "invalid_gzip")])
    return out


def parse_body(body: bytes, lang: LanguageDep, model: type[M]) -> M:
    """Validate `body` against `model`; run it off the event loop (a large body takes a while)."""
    try:
        return model.model_validate_json(body)
    except ValidationError as exc:
        errors = translate_errors(exc, lang)
        status = 400 if any(e.code in ("json_invalid", "json_type") for e in errors) else 422
        raise ProblemError(status, errors=errors, error_count=exc.error_count()) from None


@api.post(
    "/v1/search",
    summary="Hybrid search (keyword, semantic, graph) fused with weighted RRF",
    response_model=SearchResult,
    responses=_ERRORS,
    openapi_extra=_SEARCH_BODY,
)
async def search(request: Request, engine: EngineDep, lang: LanguageDep) -> Response:
    body = await read_json_body(request, engine.settings.max_body_bytes)
    search_request = await run_in_threadpool(parse_body, body, lang, SearchRequest)
    try:
        result = await run_in_threadpool(engine.search, search_request, request.state.request_id)
    except NotReady as exc:
        raise ProblemError(503, f"index not loaded: {exc}", headers={"Retry-After": "5"}) from None
    except InvalidSearch as exc:
        raise ProblemError(422, errors=[field_error(request, exc.path, exc.code, exc.ctx)]) from None
    _observe(request, result)
    return Response(result.model_dump_json(by_alias=True), media_type="application/json")


api.add_api_route(
    "/search",
    search,
    methods=["POST"],
    summary="Alias of POST /v1/search",
    response_model=SearchResult,
    responses=_ERRORS,
    openapi_extra=_SEARCH_BODY,
)


@api.post(
    "/v1/search/batch",
    summary="Several searches at once (sub-queries run concurrently), plus an optional merged MMR list",
    response_model=BatchSearchResult,
    responses=_ERRORS,
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/BatchSearchRequest"}}},
        }
    },
)
async def search_batch(request: Request, engine: EngineDep, index: IndexDep, lang: LanguageDep) -> Response:
    """Every sub-query is answered from `index`, one version, even if `current` switches meanwhile."""
    started = time.perf_counter()
    body = await read_json_body(request, engine.settings.max_body_bytes)
    batch = await run_in_threadpool(parse_body, body, lang, BatchSearchRequest)
    rid = request.state.request_id

    # Every sub-query that will need a query vector gets it from one encoder call.
    wanted = [i for i, q in enumerate(batch.queries) if engine.needs_vector(q)]
    vectors: dict[int, Any] = {}
    if wanted:
        encoded = await run_in_threadpool(engine.embed_queries, [batch.queries[i].text for i in wanted])
        vectors = dict(zip(wanted, encoded, strict=True))

    async def one(i: int, query: SearchRequest) -> BatchOutcome:
        try:
            result = await run_in_threadpool(
                engine.search, query, f"{rid}.{i}" if rid else None, index, vectors.get(i)
            )
        except InvalidSearch as exc:
            error = field_error(request, f"queries[{i}].{exc.path}", exc.code, exc.ctx)
            return BatchOutcome(index=i, error=BatchError(status=422, detail=error.message, errors=[error]))
        _observe(request, result)
        return BatchOutcome(index=i, result=result)

    outcomes = await asyncio.gather(*(one(i, q) for i, q in enumerate(batch.queries)))
    merged = None
    if batch.merge is not None and batch.merge.enabled:
        merged = await run_in_threadpool(merge_results, index, [o.result for o in outcomes], batch.merge)
    answer = BatchSearchResult(
        results=list(outcomes),
        merged=merged,
        processing_time=round((time.perf_counter() - started) * 1000, 3),
        index_version=index.version_name,
        request_id=rid,
        schema_version=SCHEMA_VERSION,
    )
    return Response(answer.model_dump_json(by_alias=True), media_type="application/json")


@api.get("/v1/documents/{doc_id}", summary="A document's full text and metadata", responses=_ERRORS)
async def get_document(doc_id: str, engine: EngineDep, index: IndexDep) -> dict[str, Any]:
    doc = index.documents.get(doc_id)
    if doc is None:
        raise ProblemError(404, f"no document with id {echo(doc_id)}")
    chunk_ids = index.chunks.of_doc(doc_id)
    return {
        "id": doc.doc_id,
        "fileId": doc.file_id,
        "title": doc.title,
        "text": doc.text,
        "url": doc.url or f"{engine.settings.base_url}/v1/documents/{doc.doc_id}",
        "sourceUrl": doc.url,
        "date": doc.date,
        "language": doc.language,
        "metadata": doc.metadata,
        "chunks": [
            {"id": c.chunk_id, "position": c.position, "start": c.start, "end": c.end, "pages": c.pages}
            for c in chunk_ids
        ],
        "indexVersion": index.version_name,
    }


@api.get(
    "/v1/chunks/{chunk_id}",
    summary="A chunk's text, offsets in its document and neighbours",
    responses=_ERRORS,
)
async def get_chunk(chunk_id: str, engine: EngineDep, index: IndexDep) -> dict[str, Any]:
    chunk = index.chunks.get(chunk_id)
    if chunk is None:
        raise ProblemError(404, f"no chunk with id {echo(chunk_id)}")
    doc = index.documents[chunk.doc_id]
    siblings = index.chunks.of_doc(chunk.doc_id)
    at = next(i for i, c in enumerate(siblings) if c.chunk_id == chunk_id)
    return {
        "id": chunk.chunk_id,
        "docId": doc.doc_id,
        "fileId": chunk.file_id,
        "title": doc.title,
        "text": chunk.text,
        "position": chunk.position,
        "start": chunk.start,
        "end": chunk.end,
        "language": chunk.language,
        "pages": chunk.pages,
        "previousId": siblings[at - 1].chunk_id if at > 0 else None,
        "nextId": siblings[at + 1].chunk_id if at + 1 < len(siblings) else None,
        "url": doc.url or f"{engine.settings.base_url}/v1/documents/{doc.doc_id}",
        "documentUrl": f"{engine.settings.base_url}/v1/documents/{doc.doc_id}",
        "indexVersion": index.version_name,
    }
