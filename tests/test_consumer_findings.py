"""Defects found by real consumers and an outside probe (issue 15), each pinned by a test."""

from __future__ import annotations

import json
import socket
import time
from typing import Any

import httpx
import pytest
from conftest import _start_server
from fastapi.testclient import TestClient

from hybridrag.client import HybridRagClient
from hybridrag.schemas.errors import MAX_REPORTED_ERRORS


def _comparable(result: dict[str, Any]) -> dict[str, Any]:
    """A response without what legitimately differs between two calls (timings, request id)."""
    drop = {"processingTime", "requestId"}
    out = {k: v for k, v in result.items() if k not in drop}
    out["strategies"] = {k: {**v, "processingTime": 0} for k, v in result["strategies"].items()}
    return out


def test_the_client_sends_only_what_its_caller_set(live_service: str) -> None:
    raw = httpx.post(f"{live_service}/v1/search", json={"text": "Who founded Sony?"}, timeout=30).json()
    with HybridRagClient(live_service) as rag:
        via_client = rag.search("Who founded Sony?").model_dump(mode="json", by_alias=True)
    assert _comparable(via_client) == _comparable(raw)
    # The classifier's weights were used, not the contract's defaults sent as if they were a choice.
    assert raw["query"]["options"]["weights"] == raw["classification"]["suggestedWeights"]
    assert raw["query"]["options"]["weights"] != {"keyword": 0.35, "semantic": 0.35, "graph": 0.3}
    # What the caller does set still goes out, and wins.
    with HybridRagClient(live_service) as rag:
        chosen = rag.search("Who founded Sony?", weights={"keyword": 1, "semantic": 0, "graph": 0}, limit=2)
    assert chosen.query.options.weights.keyword == 1 and len(chosen.results) <= 2


def test_the_client_body_carries_no_defaults() -> None:
    seen: list[dict[str, Any]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(json.loads(request.content))
        return httpx.Response(422, json={"title": "x", "errors": []})

    with HybridRagClient("http://127.0.0.1:9", transport=httpx.MockTransport(handler)) as rag:
        for call in (lambda: rag.search("Sony", limit=3), lambda: rag.search_batch(["a", "b"], merge=True)):
            with pytest.raises(Exception):  # noqa: B017 - the mock answers 422; only the body matters here
                call()
    assert seen[0] == {"text": "Sony", "options": {"limit": 3}}
    assert seen[1] == {"queries": [{"text": "a"}, {"text": "b"}], "merge": {}}


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


def test_a_nonsense_query_is_judged_incorrect_by_crag(live_service: str) -> None:
    body = {"text": "zzzz qqqq nonexistent", "options": {"cragEnabled": True}, "filters": {"minRelevance": 0}}
    data = httpx.post(f"{live_service}/v1/search", json=body, timeout=30).json()
    assert data["results"], "scores are relative, so a page still comes back"
    assert data["crag"]["relevance"] == "incorrect" and data["crag"]["needsWebSearch"] is True
    assert all(
        r["relevance"]["crag"]["relevance"] != "correct" for r in data["results"] if r["type"] == "chunk"
    )
