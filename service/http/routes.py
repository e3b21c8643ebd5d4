"""HTTP routes: thin wrappers that parse, delegate to the engine off the event loop, and serialise."""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any

from fastapi import APIRouter, Depends, Request, Response
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse

from hybridrag.http.bodies import parse_body, read_json_body
from hybridrag.http.deps import EngineDep, HttpDep, IndexDep, LanguageDep, rate_limit, require_api_key
from hybridrag.http.metrics import CONTENT_TYPE
from hybridrag.http.problems import Problem, ProblemError, field_error
from hybridrag.pipeline.engine import SearchEngine
from hybridrag.pipeline.errors import InvalidSearch
from hybridrag.pipeline.merge import merge_results
from hybridrag.schemas.base import SCHEMA_VERSION
from hybridrag.schemas.batch import BatchError, BatchOutcome, BatchSearchRequest, BatchSearchResult
from hybridrag.schemas.errors import Language
from hybridrag.schemas.search import SearchRequest, SearchResult

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
        # How far writes are ahead of the graph (they join it at the next merge): builtFor, chunksAhead,
        # chunksLinked, chunksGone.
        "graph": engine.index.graph_freshness() if engine.components["index"].ready else None,
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


def _parsed_and_searched(
    engine: SearchEngine, body: bytes, lang: Language, request_id: str | None
) -> SearchResult:
    """The body validated and searched in one trip off the event loop: each trip is a hand-off to a worker
    thread and back (a search's share of the HTTP layer, benchmarks/docs/scale.md, "Ten million")."""
    return engine.search(parse_body(body, lang, SearchRequest), request_id)


def _observe(request: Request, result: SearchResult) -> None:
    registry = getattr(request.app.state, "metrics", None)
    if registry is not None:
        registry.observe_search(result)


@api.post(
    "/v1/search",
    summary="Hybrid search (keyword, semantic, graph) fused with weighted RRF",
    response_model=SearchResult,
    responses=_ERRORS,
    openapi_extra=_SEARCH_BODY,
)
async def search(request: Request, engine: EngineDep, http: HttpDep, lang: LanguageDep) -> Response:
    body = await read_json_body(request, http.max_body_bytes)
    # The pipeline's errors (not ready, invalid for this index) become problems in `http.problems`.
    result = await run_in_threadpool(_parsed_and_searched, engine, body, lang, request.state.request_id)
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
async def search_batch(
    request: Request, engine: EngineDep, index: IndexDep, http: HttpDep, lang: LanguageDep
) -> Response:
    """Every sub-query is answered from `index`, one version, even if `current` switches meanwhile."""
    started = time.perf_counter()
    body = await read_json_body(request, http.max_body_bytes)
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
