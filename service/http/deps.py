"""FastAPI dependencies: the engine and the HTTP settings from app.state, the caller's language, the API keys.

They are `async def` although none of them awaits: FastAPI runs a plain `def` dependency in its thread
pool, and four hand-offs per search cost milliseconds under load. Each does only dictionary and header
work, never blocking I/O or heavy CPU, so running it on the event loop is safe.
"""

from __future__ import annotations

import secrets
from typing import Annotated

from fastapi import Depends, Request
from pydantic import SecretStr

from hybridrag.http.problems import ProblemError
from hybridrag.http.ratelimit import caller_key, retry_after
from hybridrag.pipeline.engine import SearchEngine
from hybridrag.pipeline.loaded_index import LoadedIndex
from hybridrag.pipeline.settings import HttpSettings
from hybridrag.schemas.errors import Language, pick_language


async def get_engine(request: Request) -> SearchEngine:
    engine: SearchEngine = request.app.state.engine
    return engine


async def get_http(request: Request) -> HttpSettings:
    http: HttpSettings = request.app.state.http
    return http


async def get_language(request: Request) -> Language:
    return pick_language(request.headers.get("accept-language"))


def presented_key(request: Request) -> str:
    """The key the caller sent: `Authorization: Bearer <key>`, else `X-API-Key`; "" when none."""
    auth = request.headers.get("authorization", "")
    return auth[7:].strip() if auth.lower().startswith("bearer ") else request.headers.get("x-api-key", "")


def _matches(given: str, key: SecretStr | None) -> bool:
    return (
        key is not None
        and bool(given)
        and secrets.compare_digest(given.encode(), key.get_secret_value().encode())
    )


async def require_api_key(request: Request, http: Annotated[HttpSettings, Depends(get_http)]) -> None:
    """When an API key is configured, accept `Authorization: Bearer <key>` or `X-API-Key: <key>` (the write
    key may search too)."""
    key = http.api_key
    if key is None:
        return
    given = presented_key(request)
    if not (_matches(given, key) or _matches(given, http.write_api_key)):
        raise ProblemError(401, "a valid API key is required", headers={"WWW-Authenticate": "Bearer"})


async def require_write_key(request: Request, http: Annotated[HttpSettings, Depends(get_http)]) -> None:
    """Writes need the write key: 403 when none is configured (writes are off) or the key may only search,
    401 when no valid key was sent."""
    if http.write_api_key is None:
        raise ProblemError(
            403,
            "writes are disabled on this service: set HYBRIDRAG_WRITE_API_KEY to enable the documents API",
        )
    given = presented_key(request)
    if _matches(given, http.write_api_key):
        return
    if _matches(given, http.api_key):
        raise ProblemError(403, "this key may search but not write: use the write key")
    raise ProblemError(401, "a valid write key is required", headers={"WWW-Authenticate": "Bearer"})


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
    return engine.index  # NotReady (a pipeline error) is a 503 problem (`http.problems`)


EngineDep = Annotated[SearchEngine, Depends(get_engine)]
IndexDep = Annotated[LoadedIndex, Depends(get_index)]
HttpDep = Annotated[HttpSettings, Depends(get_http)]
LanguageDep = Annotated[Language, Depends(get_language)]
