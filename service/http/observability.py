"""Structured (JSON) logs and request ids echoed in the `X-Request-ID` response header."""

from __future__ import annotations

import contextvars
import json
import logging
import re
import time
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime

from fastapi import Request, Response

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


async def request_id_middleware(
    request: Request, call_next: Callable[[Request], Awaitable[Response]]
) -> Response:
    rid = new_request_id(request.headers.get(REQUEST_ID_HEADER))
    request.state.request_id = rid
    token = request_id_var.set(rid)
    started = time.perf_counter()
    try:
        response = await call_next(request)
    finally:
        request_id_var.reset(token)
    response.headers[REQUEST_ID_HEADER] = rid
    access_log.info(
        "request",
        extra={
            "requestId": rid,
            "method": request.method,
            "path": request.url.path,
            "status": response.status_code,
            "ms": round((time.perf_counter() - started) * 1000, 2),
        },
    )
    return response


async def metrics_middleware(
    request: Request, call_next: Callable[[Request], Awaitable[Response]]
) -> Response:
    """Count and time every request by its route template (not its raw path, which would explode labels)."""
    metrics = request.app.state.metrics
    metrics.in_flight.inc()
    started = time.perf_counter()
    status = 500
    try:
        response = await call_next(request)
        status = response.status_code
        return response
    finally:
        metrics.in_flight.dec()
        route = request.scope.get("route")
        template = getattr(route, "path", None) or "unmatched"
        # Label values come from fixed sets: a made-up method name must not mint a new time series.
        method = request.method if request.method in KNOWN_METHODS else "OTHER"
        metrics.requests.labels(method, template, str(status)).inc()
        metrics.latency.labels(method, template).observe(time.perf_counter() - started)
