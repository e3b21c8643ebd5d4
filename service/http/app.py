"""The FastAPI application: engine on app.state, loaded in the background so /livez answers at once."""

from __future__ import annotations

import logging
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI
from fastapi.middleware.cors import CORSMiddleware
from fastapi.openapi.utils import get_openapi

from hybridrag.http import documents
from hybridrag.http.metrics import Metrics
from hybridrag.http.observability import MetricsMiddleware, RequestIdMiddleware, configure_logging
from hybridrag.http.problems import install_handlers
from hybridrag.http.ratelimit import RateLimiter
from hybridrag.http.routes import api, health
from hybridrag.http.ui import mount_ui
from hybridrag.pipeline.engine import SearchEngine
from hybridrag.pipeline.settings import Settings
from hybridrag.schemas.base import SCHEMA_VERSION
from hybridrag.schemas.openapi import contract_components
from hybridrag.writes.writer import writer_for

log = logging.getLogger("hybridrag.app")


def create_app(
    settings: Settings | None = None, engine: SearchEngine | None = None, wait: bool = False
) -> FastAPI:
    """Build the app. `wait=True` loads the engine before serving (tests); otherwise it loads in the background."""
    settings = settings or Settings()
    engine = engine or SearchEngine(settings)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        app.state.engine = engine

        def start() -> None:
            engine.start()
            if settings.index.reload_interval_s > 0:
                engine.watch(settings.index.reload_interval_s)
            if settings.write_api_key is not None:
                app.state.writer.start()

        if wait:
            start()
        else:
            threading.Thread(target=start, name="engine-start", daemon=True).start()
        yield
        app.state.writer.close()
        engine.close()

    app = FastAPI(
        title="hybridrag",
        version=SCHEMA_VERSION,
        summary="Hybrid RAG search: BM25 + vector + knowledge-graph retrieval, fused and explained.",
        lifespan=lifespan,
        # Starlette's slash redirect builds its Location from the request's Host header (an open redirect
        # behind a proxy that passes Host on); a path with a stray slash is a 404 problem like any other.
        redirect_slashes=False,
    )
    http = settings.http
    app.state.http = http
    app.state.engine = engine
    app.state.writer = writer_for(settings.writer, settings.index, engine)
    app.state.metrics = Metrics() if http.metrics_enabled else None
    app.state.limiter = (
        RateLimiter(http.rate_limit_per_s, http.rate_limit_burst) if http.rate_limit_per_s else None
    )
    if app.state.metrics is not None:
        app.add_middleware(MetricsMiddleware, metrics=app.state.metrics)
    if http.cors_origins:
        # Off unless origins are configured: a browser page elsewhere should not call us by default.
        app.add_middleware(
            CORSMiddleware,
            allow_origins=list(http.cors_origins),
            allow_methods=["GET", "POST"],
            allow_headers=["Authorization", "Content-Type", "X-API-Key", "X-Request-ID", "Accept-Language"],
            expose_headers=["X-Request-ID", "Retry-After"],
        )
    app.add_middleware(RequestIdMiddleware)
    install_handlers(app)
    app.include_router(health)
    app.include_router(api)
    app.include_router(documents.reads)
    app.include_router(documents.writes)
    mount_ui(app)

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = get_openapi(title=app.title, version=app.version, summary=app.summary, routes=app.routes)
            components = schema.setdefault("components", {}).setdefault("schemas", {})
            for name, body in contract_components(extra=True).items():
                components.setdefault(name, body)
            schema["info"]["x-schema-version"] = SCHEMA_VERSION
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
    return app


def app_from_env() -> FastAPI:
    """Factory for `uvicorn --factory hybridrag.http.app:app_from_env`."""
    settings = Settings()
    configure_logging(settings.log_level, settings.log_json)
    return create_app(settings)
