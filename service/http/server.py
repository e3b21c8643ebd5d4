"""Running the app under uvicorn, with a header-read timeout uvicorn lacks.

uvicorn closes idle kept-alive connections (`timeout_keep_alive`) but waits forever for a request whose
headers never finish arriving, so a client that stalls mid-headers holds a connection (and a file
descriptor) as long as it likes. `HeaderTimeoutH11Protocol` closes a connection whose request headers are
not complete `header_timeout_s` seconds after the first byte of the request (or after the connection
opened). The whole request is bounded by that, however slowly the bytes trickle in.

A request so malformed that it never reaches the app (a raw non-ASCII byte or a tab in the path, a bare CR
or NUL in a header) is answered by the protocol itself; it gets the service's own problem+json shape and an
`X-Request-ID` like every other answer, instead of uvicorn's plain-text 400. Such a request can be answered
before all of it has arrived (h11 gives up on a request head over its size limit while the rest is still
on its way), so the connection lingers: our side is shut after the answer, and what the client still sends
is read and dropped until it closes (`LINGER_S`, `LINGER_BYTES` at most). Closed at once, the socket would
answer the unread bytes with a reset, which can destroy the answer before the client reads it.
"""

from __future__ import annotations

import asyncio
import functools
import json
import uuid
from typing import Any

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

LINGER_S = 2.0
LINGER_BYTES = 1 << 20


class HeaderTimeoutH11Protocol(H11Protocol):
    """uvicorn's h11 protocol, closing connections that do not finish their request headers in time."""

    def __init__(self, *args: Any, header_timeout_s: float = 10.0, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.header_timeout_s = header_timeout_s
        self._header_timer: asyncio.TimerHandle | None = None
        #: Bytes dropped since the answer to an unparseable request (None: not lingering).
        self._dropped: int | None = None
        self._linger_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm_header_timer()

    def data_received(self, data: bytes) -> None:
        if self._dropped is not None:
            self._dropped += len(data)
            if self._dropped > LINGER_BYTES:
                self.transport.close()
            return
        super().data_received(data)
        if self.conn.their_state is h11.IDLE:
            # Part of a request's head has arrived (or, on a kept-alive connection, a new one has begun).
            if self._header_timer is None:
                self._arm_header_timer()
        else:
            self._cancel_header_timer()

    def eof_received(self) -> None:
        # The client is done sending (returning None lets the transport close): a lingering connection ends.
        self._cancel_linger_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_header_timer()
        self._cancel_linger_timer()
        super().connection_lost(exc)

    def send_400_response(self, msg: str) -> None:
        """The answer to a request h11 could not parse: problem+json with a request id, then close."""
        request_id = uuid.uuid4().hex
        body = json.dumps(
            {
                "type": "/problems/bad-request",
                "title": "リクエストが不正です",
                "status": 400,
                "detail": "invalid HTTP request: the request line or a header is malformed",
                "requestId": request_id,
                "errors": [],
            },
            ensure_ascii=False,
        ).encode("utf-8")
        headers = [
            (b"content-type", b"application/problem+json"),
            (b"content-length", str(len(body)).encode("ascii")),
            (b"x-request-id", request_id.encode("ascii")),
            (b"connection", b"close"),
        ]
        try:
            for event in (
                h11.Response(status_code=400, headers=headers, reason=b"Bad Request"),
                h11.Data(data=body),
                h11.EndOfMessage(),
            ):
                self.transport.write(self.conn.send(event))
        except h11.LocalProtocolError:
            self.transport.close()  # h11 cannot answer on this connection any more: just close it
            return
        self._linger()

    def _linger(self) -> None:
        """Shut our side once the answer is sent; drop what still arrives until the client closes."""
        if not self.transport.can_write_eof():
            self.transport.close()
            return
        self._dropped = 0
        self.transport.write_eof()
        self._linger_timer = self.loop.call_later(LINGER_S, self.transport.close)

    def _arm_header_timer(self) -> None:
        self._header_timer = self.loop.call_later(self.header_timeout_s, self._on_header_timeout)

    def _cancel_header_timer(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _cancel_linger_timer(self) -> None:
        if self._linger_timer is not None:
            self._linger_timer.cancel()
            self._linger_timer = None

    def _on_header_timeout(self) -> None:
        self._header_timer = None
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            self.logger.info("closing a connection whose request headers stalled")
            self.transport.close()


def uvicorn_config(app: Any, host: str, port: int, header_timeout_s: float, **kwargs: Any) -> uvicorn.Config:
    """A uvicorn configuration that uses the header-timeout protocol (h11)."""
    protocol = functools.partial(HeaderTimeoutH11Protocol, header_timeout_s=header_timeout_s)
    return uvicorn.Config(app, host=host, port=port, http=protocol, **kwargs)  # type: ignore[arg-type]
