"""Hostile and malformed HTTP input: error bodies stay bounded, content encodings, integral floats, array and
string bounds as Zod counts them, requests too malformed to reach the app, stalled connections and the
metrics' label set. Each was found by an outside probe or a consumer and is pinned here."""

from __future__ import annotations

import gzip
import json
import socket
import time
from typing import Any

import httpx
import pytest
from conftest import _start_server
from fastapi.testclient import TestClient

from hybridrag.schemas.errors import MAX_REPORTED_ERRORS

# Error bodies stay bounded whatever the request ----------------------------------------------------------------


def _raw_get(url: str, target: bytes) -> tuple[int, dict[str, str], bytes]:
    """One GET over a plain socket (httpx refuses URLs this long), answer read until the server closes."""
    host, port = url.rsplit("/", 1)[1].split(":")
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(b"GET " + target + b" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    return int(lines[0].split()[1]), headers, body


@pytest.mark.parametrize(("path", "length"), [("/v1/documents/", 10_000), ("/v1/chunks/", 10_000)])
def test_long_path_parameters_are_not_echoed(client: Any, path: str, length: int) -> None:
    answer = client.get(path + "a" * length)
    assert answer.status_code == 404
    assert len(answer.content) < 1_000, len(answer.content)
    problem = answer.json()
    assert f"({length} characters)" in problem["detail"]
    assert len(problem["instance"]) <= 201


@pytest.mark.parametrize("path", [b"/v1/documents/", b"/v1/chunks/"])
def test_very_long_paths_get_a_small_answer(live_service: str, path: bytes) -> None:
    status, headers, body = _raw_get(live_service, path + b"a" * 100_000)
    assert status in (400, 404, 414)
    assert len(body) < 1_000 and headers["content-type"] == "application/problem+json"


def test_a_request_refused_before_it_has_all_arrived_still_gets_its_answer(live_service: str) -> None:
    # The head arrives in two parts: h11 refuses the first (40 KB with no end of line) while the second is on
    # its way. Closed at once, the server's socket answered the unread second part with a reset, which
    # destroyed the 400 before the client read it (most tries failed so); it now drains until the client closes.
    # The pause lets the server read the first part alone even on a busy machine: sent together, the two parts
    # are one whole (long) request line, which the server answers with a 404.
    host, port = live_service.rsplit("/", 1)[1].split(":")
    for _ in range(10):
        with socket.create_connection((host, int(port)), timeout=30) as sock:
            sock.sendall(b"GET /v1/documents/" + b"a" * 40_000)
            time.sleep(0.2)
            sock.sendall(b"a" * 60_000 + b" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            data = b""
            while chunk := sock.recv(65536):
                data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 400"), head[:80]
        assert json.loads(body)["status"] == 400


# Content encodings --------------------------------------------------------------------------------------------


def _post(client: Any, body: bytes, encoding: str | None) -> Any:
    headers = {"Content-Type": "application/json", "Accept-Language": "en"}
    if encoding:
        headers["Content-Encoding"] = encoding
    return client.post("/v1/search", content=body, headers=headers)


def test_gzip_bodies_are_accepted(client: Any) -> None:
    body = json.dumps({"text": "Who founded Sony?", "options": {"limit": 3}}).encode()
    plain = _post(client, body, None)
    zipped = _post(client, gzip.compress(body), "gzip")
    assert zipped.status_code == 200, zipped.text
    assert [r["id"] for r in zipped.json()["results"]] == [r["id"] for r in plain.json()["results"]]


def test_a_gzip_bomb_is_a_413_and_other_encodings_a_415(client: Any) -> None:
    # 5 MB of spaces around a query: a few kilobytes compressed, five times the body limit inflated.
    bomb = gzip.compress(b'{"text": "Sony"' + b" " * 5_000_000 + b"}")
    assert len(bomb) < 20_000
    answer = _post(client, bomb, "gzip")
    assert answer.status_code == 413 and answer.json()["errors"][0]["code"] == "body_too_large"
    answer = _post(client, b"\x1f\x8b not gzip at all", "gzip")
    assert answer.status_code == 400 and answer.json()["errors"][0]["code"] == "invalid_gzip"
    answer = _post(client, b"{}", "br")
    assert answer.status_code == 415
    error = answer.json()["errors"][0]
    assert error["code"] == "unsupported_content_encoding" and "br" in error["message"]


# Integral floats for integer fields (JavaScript has one number type) -------------------------------------------


def test_integral_floats_are_integers(client: Any) -> None:
    ok = client.post(
        "/v1/search", json={"text": "Who founded Sony?", "options": {"limit": 2.0, "offset": 0.0}}
    )
    assert ok.status_code == 200, ok.text
    assert len(ok.json()["results"]) == 2 and ok.json()["query"]["options"]["limit"] == 2
    bad = client.post("/v1/search", json={"text": "Sony", "options": {"limit": 2.5}})
    assert bad.status_code == 422 and bad.json()["errors"][0]["path"] == "options.limit"


# Requests too malformed to reach the app still get the service's problem shape --------------------------------


@pytest.mark.parametrize(
    "raw",
    [
        b"GET /v1/s\xc3\xa9arch HTTP/1.1\r\nHost: x\r\n\r\n",
        b"GET /v1/\tsearch HTTP/1.1\r\nHost: x\r\n\r\n",
        b"GET /livez HTTP/1.1\r\nHost: x\r\nX-Bad: a\rb\r\n\r\n",
        b"GET /livez HTTP/1.1\r\nHost: x\r\nX-Bad: a\x00b\r\n\r\n",
    ],
    ids=["non-ascii path", "tab in path", "bare CR in header", "NUL in header"],
)
def test_malformed_requests_get_problem_json(live_service: str, raw: bytes) -> None:
    host, port = live_service.rsplit("/", 1)[1].split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(raw)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    assert lines[0].startswith("HTTP/1.1 400")
    headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    assert headers["content-type"] == "application/problem+json"
    assert headers["x-request-id"]
    problem = json.loads(body)
    assert problem["status"] == 400 and problem["requestId"] == headers["x-request-id"]


# Bounds, types and media types as the contract states them -----------------------------------------------------


def test_errors_are_capped_and_counted(client: TestClient) -> None:
    body = json.dumps({"text": "x", "options": {"strategies": ["x"] * 150_000}}, separators=(",", ":"))
    assert len(body) > 500_000
    response = client.post("/v1/search", content=body, headers={"Content-Type": "application/json"})
    assert response.status_code == 422
    assert len(response.content) < 5_000
    problem = response.json()
    assert problem["errors"] == [
        {"path": "options.strategies", "message": "4個以下の要素である必要があります", "code": "too_long"}
    ]
    # Errors that are not about one array's length are capped too, and counted.
    many = json.dumps({"text": "x", **{f"unknown{i}": 1 for i in range(20_000)}})
    response = client.post("/v1/search", content=many, headers={"Content-Type": "application/json"})
    problem = response.json()
    assert response.status_code == 422 and len(problem["errors"]) == MAX_REPORTED_ERRORS
    assert problem["errorCount"] == 20_000 and len(response.content) < 10_000
    # A batch of sub-queries full of bad items: one bounded body as well.
    batch = {"queries": [{"text": "x", "filters": {"fileIds": [""] * 7_000}} for _ in range(20)]}
    response = client.post("/v1/search/batch", json=batch)
    assert response.status_code == 422 and len(response.content) < 10_000
    assert {e["code"] for e in response.json()["errors"]} == {"too_long"}


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("filters.fileIds", ["f"] * 1_001),
        ("filters.fileIds", ["f" * 513]),
        ("filters.entityTypes", ["person"] * 21),
        ("options.strategies", ["hybrid"] * 5),
    ],
)
def test_array_and_item_bounds(client: TestClient, field: str, value: list[str]) -> None:
    section, name = field.split(".")
    response = client.post("/v1/search", json={"text": "x", section: {name: value}})
    assert response.status_code == 422
    assert response.json()["errors"][0]["path"].startswith(field)


def test_string_bounds_count_utf16_units_like_zod(client: TestClient) -> None:
    astral = "𝐀" * 501  # 501 code points, 1,002 UTF-16 units
    response = client.post("/v1/search", json={"text": astral}, headers={"Accept-Language": "en"})
    assert response.status_code == 422
    assert response.json()["errors"] == [
        {"path": "text", "message": "Must be at most 1000 characters", "code": "string_too_long"}
    ]
    assert client.post("/v1/search", json={"text": "𝐀" * 500}).status_code == 200


def test_dates_must_be_strings(client: TestClient) -> None:
    for value in (1704067200, 1704067200.5):
        response = client.post("/v1/search", json={"text": "x", "filters": {"dateRange": {"start": value}}})
        assert response.status_code == 422
        assert response.json()["errors"][0] == {
            "path": "filters.dateRange.start",
            "message": "日付は ISO 8601 形式の文字列である必要があります",
            "code": "date_type",
        }
    ok = client.post("/v1/search", json={"text": "x", "filters": {"dateRange": {"start": "2024-01-01"}}})
    assert ok.status_code == 200


def test_a_body_without_content_type_is_415(client: TestClient) -> None:
    request = client.build_request("POST", "/v1/search", content=b'{"text": "Sony"}')
    request.headers.pop("content-type", None)
    assert "content-type" not in request.headers
    response = client.send(request)
    assert response.status_code == 415
    assert response.json()["errors"][0]["code"] == "unsupported_media_type"


def test_metrics_labels_come_from_a_fixed_set(client: TestClient) -> None:
    for method in ("FOO", "BAR", "BAZQUX"):
        client.request(method, "/v1/search")
        client.request(method, f"/no/such/{method}")
    metrics = client.get("/metrics").text
    for method in ("FOO", "BAR", "BAZQUX"):
        assert method not in metrics and f"/no/such/{method}" not in metrics
    assert 'method="OTHER"' in metrics


async def _ok_app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """A bare ASGI app: the header timeout lives in the protocol, below any app (and the shared test app's
    lifespan must not be run, and shut down, by a second server)."""
    if scope["type"] == "http":
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
        await send({"type": "http.response.body", "body": b"ok"})
    elif scope["type"] == "lifespan":
        while (await receive())["type"] != "lifespan.shutdown":
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})


def test_connections_that_stall_mid_headers_are_closed() -> None:
    server, url = _start_server(_ok_app, header_timeout_s=1.0)
    try:
        port = int(url.rsplit(":", 1)[1])
        stalled = []
        for _ in range(5):
            sock = socket.create_connection(("127.0.0.1", port), timeout=10)
            sock.sendall(b"GET /livez HTTP/1.1\r\nHost: x\r\nX-Slow: ")
            stalled.append(sock)
        idle = socket.create_connection(("127.0.0.1", port), timeout=10)  # sends nothing at all
        stalled.append(idle)
        started = time.monotonic()
        for sock in stalled:
            assert sock.recv(1024) == b""  # closed by the server, not answered
            sock.close()
        assert time.monotonic() - started < 8
        # A request that completes its headers is served as usual on the same server.
        assert httpx.get(f"{url}/livez", timeout=10).status_code == 200
    finally:
        server.should_exit = True
