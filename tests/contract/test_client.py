"""The Python client against the real service on loopback, and against failing and slow endpoints."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from typing import Any

import httpx
import pytest
from conftest import free_port

from hybridrag.client import (
    AsyncHybridRagClient,
    HybridRagClient,
    HybridRagUnavailable,
    HybridRagValidationError,
)


@pytest.fixture()
def live_url(live_service: str) -> str:
    return live_service


def test_sync_client_search_and_documents(live_url: str) -> None:
    with HybridRagClient(live_url) as rag:
        assert rag.ready()
        result = rag.search("Who founded Sony?", limit=3, strategies=["keyword", "semantic"])
        top = result.results[0]
        assert top.metadata and top.metadata["title"] == "Sony: Masaru Ibuka and Akio Morita"
        assert result.request_id and result.query.options.limit == 3
        doc = rag.document(top.metadata["docId"])
        assert top.content.text in doc.text


def test_client_validates_before_sending_and_maps_4xx(live_url: str) -> None:
    with HybridRagClient(live_url) as rag:
        with pytest.raises(HybridRagValidationError) as early:
            rag.search("x", limit=0)
        assert early.value.source == "client" and early.value.errors[0]["path"] == "options.limit"
        with pytest.raises(HybridRagValidationError) as info:
            rag.search("x", embedding=[0.1, 0.2], language="en")
        err = info.value
        assert err.status_code == 422 and err.request_id and err.errors[0]["path"] == "embedding"
        with pytest.raises(HybridRagValidationError) as missing:
            rag.document("no-such-doc")
        assert missing.value.status_code == 404


def test_batch_and_chunk_through_both_clients(live_url: str) -> None:
    queries = ["radium", {"text": "東京タワー", "options": {"limit": 2}}]
    with HybridRagClient(live_url) as rag:
        batch = rag.search_batch(queries, merge=True, limit=3)
        assert [o.index for o in batch.results] == [0, 1] and all(o.result for o in batch.results)
        assert len(batch.results[0].result.results) <= 3 and len(batch.results[1].result.results) <= 2  # type: ignore[union-attr]
        assert batch.merged and len({m.key for m in batch.merged}) == len(batch.merged)
        chunk = rag.chunk(batch.merged[0].item.id)
        assert chunk.text == batch.merged[0].item.content.text
        with pytest.raises(HybridRagValidationError):
            rag.search_batch([])  # validated before sending

    async def run() -> Any:
        async with AsyncHybridRagClient(live_url) as rag:
            result = await rag.search_batch(["Shinkansen", "新幹線"], merge={"limit": 2, "mmrLambda": 0.5})
            return result, await rag.chunk(result.merged[0].item.id)

    result, chunk = asyncio.run(run())
    assert result.merged is not None and len(result.merged) <= 2 and chunk.doc_id == result.merged[0].doc_id


def test_async_client(live_url: str) -> None:
    async def run() -> list[str]:
        async with AsyncHybridRagClient(live_url) as rag:
            results = await asyncio.gather(
                *(rag.search(q, limit=1) for q in ("radium", "東京タワー", "Shinkansen"))
            )
            return [r.results[0].metadata["title"] for r in results if r.results[0].metadata]

    titles = asyncio.run(run())
    assert (
        titles[0].startswith("Marie Curie") and titles[1] == "東京タワーの建設" and "Shinkansen" in titles[2]
    )


def test_retries_5xx_then_succeeds(serve: Any, client: Any) -> None:
    good = client.post("/v1/search", json={"text": "Toyota", "options": {"limit": 1}}).content
    calls = {"n": 0}

    async def flaky(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        calls["n"] += 1
        status, body = (503, b'{"status": 503, "title": "busy"}') if calls["n"] <= 2 else (200, good)
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [(b"content-type", b"application/json")],
            }
        )
        await send({"type": "http.response.body", "body": body})

    url = serve(flaky)
    with HybridRagClient(url, retries=2, backoff=0.01) as rag:
        assert rag.search("Toyota", limit=1).results
    assert calls["n"] == 3
    calls["n"] = 0
    with HybridRagClient(url, retries=1, backoff=0.01) as rag, pytest.raises(HybridRagUnavailable) as info:
        rag.search("Toyota", limit=1)
    assert info.value.status_code == 503 and calls["n"] == 2


def test_4xx_is_not_retried(serve: Any) -> None:
    calls = {"n": 0}

    async def bad(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        calls["n"] += 1
        await send({"type": "http.response.start", "status": 422, "headers": [(b"x-request-id", b"r-1")]})
        await send({"type": "http.response.body", "body": b'{"errors": [{"path": "text", "message": "m"}]}'})

    with (
        HybridRagClient(serve(bad), retries=3, backoff=0.01) as rag,
        pytest.raises(HybridRagValidationError) as info,
    ):
        rag.search("x")
    assert calls["n"] == 1 and info.value.request_id == "r-1"


def test_timeout_on_a_slow_endpoint(serve: Any) -> None:
    async def slow(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        await asyncio.sleep(2)
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})

    url = serve(slow)
    started = time.perf_counter()
    with (
        HybridRagClient(url, timeout=0.3, retries=1, backoff=0.01) as rag,
        pytest.raises(HybridRagUnavailable) as info,
    ):
        rag.search("x")
    assert info.value.status_code is None and time.perf_counter() - started < 1.5


def test_unreachable_service() -> None:
    with HybridRagClient(f"http://127.0.0.1:{free_port()}", retries=1, backoff=0.01) as rag:
        assert rag.ready() is False
        with pytest.raises(HybridRagUnavailable, match="unreachable"):
            rag.search("x")


def test_env_configuration(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HYBRIDRAG_URL", "http://127.0.0.1:9999/")
    monkeypatch.setenv("HYBRIDRAG_API_KEY", "k")
    seen: dict[str, str] = {}

    def handler(request: httpx.Request) -> httpx.Response:
        seen["url"] = str(request.url)
        seen["auth"] = request.headers["authorization"]
        return httpx.Response(404, json={"status": 404, "title": "Not found"})

    with (
        HybridRagClient(transport=httpx.MockTransport(handler)) as rag,
        pytest.raises(HybridRagValidationError),
    ):
        rag.document("d")
    assert seen == {"url": "http://127.0.0.1:9999/v1/documents/d", "auth": "Bearer k"}


def test_client_imports_nothing_heavy() -> None:
    code = "import sys, hybridrag.client; heavy = {'torch', 'numpy', 'tantivy', 'lancedb', 'sentence_transformers', 'fastapi', 'typer'}; print(sorted(heavy & set(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# One exception family, the same errors, whoever finds the problem ---------------------------------------------


INVALID_SEARCHES: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
    # (name, client keyword arguments, the same request as a wire body)
    (
        "weights",
        {"weights": {"keyword": 0.5, "semantic": 0.5, "graph": 0.5}},
        {"options": {"weights": {"keyword": 0.5, "semantic": 0.5, "graph": 0.5}}},
    ),
    ("limit 0", {"limit": 0}, {"options": {"limit": 0}}),
    ("misspelled option", {"limt": 3}, {"options": {"limt": 3}}),
    ("limit 10.5", {"limit": 10.5}, {"options": {"limit": 10.5}}),
]


def _service_errors(url: str, body: dict[str, Any], path: str, language: str) -> list[dict[str, Any]]:
    answer = httpx.post(f"{url}{path}", json=body, headers={"Accept-Language": language}, timeout=30)
    assert answer.status_code == 422, answer.text
    errors: list[dict[str, Any]] = answer.json()["errors"]
    return errors


@pytest.mark.parametrize("language", ["ja", "en"])
@pytest.mark.parametrize("case", INVALID_SEARCHES, ids=lambda c: c[0])
def test_client_validation_raises_the_services_error(
    case: tuple[str, dict[str, Any], dict[str, Any]], language: str, live_service: str
) -> None:
    from hybridrag.client import HybridRagClient, HybridRagError, HybridRagValidationError

    _name, kwargs, wire = case
    expected = _service_errors(live_service, {"text": "Who founded Sony?", **wire}, "/v1/search", language)
    with HybridRagClient(live_service, retries=0) as rag, pytest.raises(HybridRagValidationError) as caught:
        rag.search("Who founded Sony?", language=language, **kwargs)
    assert isinstance(caught.value, HybridRagError)
    assert caught.value.source == "client" and caught.value.status_code == 422
    assert caught.value.errors == expected
    assert all(isinstance(e, dict) for e in caught.value.errors)  # a list, not a method


def test_client_language_is_the_clients_default(live_service: str) -> None:
    from hybridrag.client import HybridRagClient, HybridRagValidationError

    with (
        HybridRagClient(live_service, language="en") as rag,
        pytest.raises(HybridRagValidationError) as caught,
    ):
        rag.search("Who founded Sony?", weights={"keyword": 0.5, "semantic": 0.5, "graph": 0.5})
    assert caught.value.errors[0]["message"] == "Search weights must sum to 1.0"
    with HybridRagClient(live_service) as rag, pytest.raises(HybridRagValidationError) as caught:
        rag.search("Who founded Sony?", weights={"keyword": 0.5, "semantic": 0.5, "graph": 0.5})
    assert caught.value.errors[0]["message"] == "検索重みの合計は1.0である必要があります"


def test_batch_validation_errors_match_the_service(live_service: str) -> None:
    from hybridrag.client import AsyncHybridRagClient, HybridRagClient, HybridRagValidationError

    bad_weights = {"keyword": 0.5, "semantic": 0.5, "graph": 0.5}
    # Shared options with weights inside a batch, and a raw-dict sub-query.
    expected = _service_errors(
        live_service,
        {"queries": [{"text": "Sony"}, {"text": "Toyota", "options": {"weights": bad_weights}}]},
        "/v1/search/batch",
        "en",
    )
    with HybridRagClient(live_service, language="en") as rag:
        with pytest.raises(HybridRagValidationError) as caught:
            rag.search_batch(["Sony", {"text": "Toyota", "options": {"weights": bad_weights}}])
        assert caught.value.errors == expected
        with pytest.raises(HybridRagValidationError) as caught:
            rag.search_batch(["Sony", "Toyota"], weights=bad_weights)
        assert [e["path"] for e in caught.value.errors] == [
            "queries[0].options.weights",
            "queries[1].options.weights",
        ]
    import asyncio

    async def run() -> list[dict[str, Any]]:
        async with AsyncHybridRagClient(live_service, language="en") as rag:
            try:
                await rag.search_batch([{"text": "Toyota", "options": {"limit": 0}}])
            except HybridRagValidationError as exc:
                return exc.errors
        return []

    assert asyncio.run(run()) == [
        {
            "path": "queries[0].options.limit",
            "message": "Must be greater than or equal to 1",
            "code": "greater_than_equal",
        }
    ]


# The body carries what the caller set, nothing more ------------------------------------------------------------


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
