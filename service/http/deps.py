"""FastAPI dependencies: the engine from app.state, the caller's language, the optional API key.

They are `async def` although none of them awaits: FastAPI runs a plain `def` dependency in its thread
pool, and four hand-offs per search cost milliseconds under load. Each does only dictionary and header
work, never blocking I/O or heavy CPU, so running it on the event loop is safe.
"""

from __future__ import annotations

import secrets
from typing import Annotated

from fastapi import Depends, Request

from hybridrag.http.problems import ProblemError
from hybridrag.http.ratelimit import caller_key, retry_after
from hybridrag.pipeline.engine import NotReady, SearchEngine
from hybridrag.pipeline.loaded_index import LoadedIndex
from hybridrag.schemas.errors import Language, pick_language


async def get_engine(request: Request) -> SearchEngine:
    engine: SearchEngine = request.app.state.engine
    return engine


async def get_language(request: Request) -> Language:
    return pick_language(request.headers.get("accept-language"))


def presented_key(request: Request) -> str:
    """The key the caller sent: `Authorization: Bearer <key>`, else `X-API-Key`; "" when none."""
    auth = request.headers.get("authorization", "")
    return auth[7:].strip() if auth.lower().startswith("bearer ") else request.headers.get("x-api-key", "")


async def require_api_key(request: Request, engine: Annotated[SearchEngine, Depends(get_engine)]) -> None:
    """When an API key is configured, accept `Authorization: Bearer <key>` or `X-API-Key: <key>`."""
    key = engine.settings.api_key
    if key is None:
        return
    given = presented_key(request)
    if not given or not secrets.compare_digest(given.encode(), key.get_secret_value().encode()):
        raise ProblemError(401, "a valid API key is required", headers={"WWW-Authenticate": "Bearer"})


async def rate_limit(request: Request) -> None:
    """Refuse a caller over its rate with 429 and Retry-After (when a limit is configured)."""
    limiter = getattr(request.app.state, "limiter", None)
    if limiter is None:
        return
    caller = caller_key(presented_key(request), request.client.host if request.client else None)
    wait = limiter.acquire(caller)
    if wait > 0:
        metrics = getattr(request.app.state, "metrics", None)
        if metrics is not None:
            metrics.rate_limited.inc()
        raise ProblemError(429, "rate limit exceeded", headers={"Retry-After": retry_after(wait)})


async def get_index(engine: Annotated[SearchEngine, Depends(get_engine)]) -> LoadedIndex:
    """The index version being served, pinned for the whole request; 503 (retry later) before one is loaded."""
    try:
        return engine.index
    except NotReady as exc:
        raise ProblemError(503, f"index not loaded: {exc}", headers={"Retry-After": "5"}) from None


EngineDep = Annotated[SearchEngine, Depends(get_engine)]
IndexDep = Annotated[LoadedIndex, Depends(get_index)]
LanguageDep = Annotated[Language, Depends(get_language)]
