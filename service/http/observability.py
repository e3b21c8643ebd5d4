"""Structured (JSON) logs and request ids echoed in the `X-Request-ID` response header."""

from __future__ import annotations

import contextvars
import json
import logging
import re
import time
import uuid
from datetime import UTC, datetime

from starlette.datastructures import Headers, MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from hybridrag.http.metrics import Metrics

REQUEST_ID_HEADER = "X-Request-ID"
_VALID_ID = re.compile(r"^[A-Za-z0-9._:\-]{1,128}$")
request_id_var: contextvars.ContextVar[str | None] = contextvars.ContextVar("request_id", default=None)
access_log = logging.getLogger("hybridrag.access")


class JsonFormatter(logging.Formatter):
    """One JSON object per line, with the request id of the request being served (if any)."""

    _SKIP = frozenset(logging.LogRecord("", 0, "", 0, "", (), None).__dict__) | {"message", "asctime"}

    def format(self, record: logging.LogRecord) -> str:
        data = {
            "ts": datetime.fromtimestamp(record.created, tz=UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        rid = request_id_var.get()
        if rid:
            data["requestId"] = rid
        data.update({k: v for k, v in record.__dict__.items() if k not in self._SKIP})
        if record.exc_info:
            data["exc"] = self.formatException(record.exc_info)
        return json.dumps(data, ensure_ascii=False, default=str)


KNOWN_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


def configure_logging(level: str = "INFO", json_lines: bool = True) -> None:
    handler = logging.StreamHandler()
    handler.setFormatter(
        JsonFormatter() if json_lines else logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s")
    )
    root = logging.getLogger("hybridrag")
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    root.propagate = False


def new_request_id(incoming: str | None) -> str:
    """Keep a caller's id when it is sane (so traces join up), else make one."""
    if incoming and _VALID_ID.match(incoming):
        return incoming
    return uuid.uuid4().hex


class RequestIdMiddleware:
    """Gives every request an id (the caller's `X-Request-ID` when sane), echoes it in the response header,
    puts it on `request.state.request_id` and on every log line, and writes one access-log line.

    Plain ASGI rather than `@app.middleware("http")`: Starlette's BaseHTTPMiddleware runs the rest of the
    app in a task of its own and streams the response through it, which cost about a millisecond per
    request here.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        rid = new_request_id(Headers(scope=scope).get(REQUEST_ID_HEADER))
        scope.setdefault("state", {})["request_id"] = rid
        status = 500
        started = time.perf_counter()

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                MutableHeaders(scope=message)[REQUEST_ID_HEADER] = rid
            await send(message)

        token = request_id_var.set(rid)
        try:
            await self.app(scope, receive, send_with_id)
        finally:
            request_id_var.reset(token)
        access_log.info(
            "request",
            extra={
                "requestId": rid,
                "method": scope["method"],
                "path": scope["path"],
                "status": status,
                "ms": round((time.perf_counter() - started) * 1000, 2),
            },
        )


class MetricsMiddleware:
    """Counts and times every request by its route template (not its raw path, which would explode labels).

    Plain ASGI, like `RequestIdMiddleware`. The router records the matched route in the scope it was given,
    so the template is known once the app has answered.
    """

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        metrics = self.metrics
        metrics.in_flight.inc()
        started = time.perf_counter()
        status = 500

        async def send_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_status)
        finally:
            metrics.in_flight.dec()
            route = scope.get("route")
            template = getattr(route, "path", None) or "unmatched"
            # Label values come from fixed sets: a made-up method name must not mint a new time series.
            method = scope["method"] if scope["method"] in KNOWN_METHODS else "OTHER"
            metrics.requests.labels(method, template, str(status)).inc()
            metrics.latency.labels(method, template).observe(time.perf_counter() - started)
