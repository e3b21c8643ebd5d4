"""The HTTP API end to end over the bundled sample corpus (real index, real models)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import search_json
from fastapi.testclient import TestClient

from hybridrag.http.app import create_app
from hybridrag.pipeline.settings import Settings


def titles(data: dict[str, Any]) -> list[str]:
    return [item["metadata"]["title"] for item in data["results"]]


def test_health(client: TestClient) -> None:
    assert client.get("/livez").json() == {"status": "ok"}
    ready = client.get("/readyz")
    assert ready.status_code == 200
    body = ready.json()
    assert body["status"] == "ready" and body["components"]["index"]["ready"] and body["indexVersion"]


@pytest.mark.parametrize(
    ("query", "expected_title"),
    [
        ("Who discovered radium and polonium?", "Marie Curie and the discovery of radium"),
        ("codebreaking Enigma Bombe", "Alan Turing, Bletchley Park and the question of machine intelligence"),
        ("トヨタ自動車を設立したのは誰ですか", "豊田佐吉とトヨタ自動車の創業"),
        ("中間子の存在を予言した物理学者", "湯川秀樹と中間子理論"),
        ("first high-speed railway", "The Tokaido Shinkansen"),
    ],
)
def test_hybrid_search_finds_the_right_document(client: TestClient, query: str, expected_title: str) -> None:
    data = search_json(client, {"text": query, "options": {"limit": 3}})
    assert titles(data)[0] == expected_title
    top = data["results"][0]
    assert top["type"] == "chunk" and 0 < top["score"] <= 1 and top["score"] == top["relevance"]["combined"]
    assert top["sources"]["chunkId"] == top["id"] and top["sources"]["fileId"].endswith(".md")
    assert data["strategies"]["keyword"]["enabled"] and data["strategies"]["semantic"]["enabled"]
    assert data["query"]["text"] == query and data["query"]["type"] in (
        "local",
        "global",
        "relationship",
        "hybrid",
    )
    assert data["classification"]["originalQuery"] == query


def test_highlights_are_character_offsets_into_the_text(client: TestClient) -> None:
    for query, needle in (("radium Nobel Prize", "radium"), ("東京タワーの設計", "設計")):
        data = search_json(client, {"text": query, "options": {"limit": 2}})
        item = data["results"][0]
        text = item["content"]["text"]
        spans = [text[o["start"] : o["end"]] for h in item["highlights"] for o in h["offsets"]]
        assert needle in spans, spans
        assert item["highlights"][0]["field"] == "text"


def test_keyword_only_search(client: TestClient) -> None:
    data = search_json(client, {"text": "Walkman Trinitron", "options": {"strategies": ["keyword"]}})
    assert data["strategies"]["semantic"]["enabled"] is False
    assert data["strategies"]["keyword"]["resultCount"] == data["totalCount"] == len(data["results"]) == 1
    assert titles(data) == ["Sony: Masaru Ibuka and Akio Morita"]
    assert data["results"][0]["relevance"]["semantic"] == 0


def test_graph_only_search_returns_chunks_and_entities(client: TestClient) -> None:
    data = search_json(
        client, {"text": "Sakichi Toyoda and Kiichiro Toyoda", "options": {"strategies": ["graph"]}}
    )
    kinds = {r["type"] for r in data["results"]}
    assert {"chunk", "entity"} <= kinds
    assert data["strategies"]["graph"]["enabled"] and data["strategies"]["keyword"]["enabled"] is False
    chunk = next(r for r in data["results"] if r["type"] == "chunk")
    assert chunk["metadata"]["title"].startswith("From automatic looms")
    assert chunk["sources"]["entityIds"] and chunk["relevance"]["graph"] > 0
    names = {r["metadata"]["title"] for r in data["results"] if r["type"] == "entity"}
    assert {"Sakichi Toyoda", "Kiichiro Toyoda"} & names


def test_unavailable_rerank_is_reported_not_silent(client: TestClient) -> None:
    data = search_json(client, {"text": "Toyota"})
    stages = {n["stage"]: n for n in data["notes"]}
    assert stages["rerank"]["status"] == "skipped" and "not on this machine" in stages["rerank"]["reason"]
    quiet = search_json(
        client, {"text": "Toyota", "options": {"rerankEnabled": False, "strategies": ["keyword"]}}
    )
    assert quiet["notes"] == []


def test_paging_is_stable_and_total_is_consistent(client: TestClient) -> None:
    base = {"text": "Japanese company founded in Tokyo", "filters": {"minRelevance": 0}}
    full = search_json(client, {**base, "options": {"limit": 10}})
    p1 = search_json(client, {**base, "options": {"limit": 4, "offset": 0}})
    p2 = search_json(client, {**base, "options": {"limit": 4, "offset": 4}})
    ids = [r["id"] for r in full["results"]]
    assert [r["id"] for r in p1["results"] + p2["results"]] == ids[:8]
    assert p1["totalCount"] == p2["totalCount"] == full["totalCount"] >= 10
    beyond = search_json(client, {**base, "options": {"limit": 5, "offset": 10_000}})
    assert beyond["results"] == [] and beyond["totalCount"] == full["totalCount"]
    # An offset far past any corpus (the contract leaves it unbounded) is an empty page, not a 500: tantivy
    # sized its top-k heap by offset + limit and panicked ("capacity overflow"), found by the fuzz test.
    for strategy in ("keyword", "semantic", "graph", "hybrid"):
        options = {"limit": 5, "offset": 2**60, "strategies": [strategy]}
        far = client.post("/v1/search", json={**base, "options": options})
        assert far.status_code == 200 and far.json()["results"] == [], strategy


def test_the_total_of_one_strategy_under_a_cut_is_what_its_pages_hold(tmp_path: Path) -> None:
    """A search one strategy alone answers, all of whose first 100 candidates pass the relevance cut: its
    `totalCount` is how many results the pages down to the end hold, not every chunk that holds a word of
    the query (400 here; the cut stops where the fused score, falling with the rank, drops under it)."""
    from conftest import jsonl_corpus

    from hybridrag.indexing.builds.build import BuildConfig, IndexBuilder
    from hybridrag.pipeline.engine import SearchEngine

    words = "granite basalt river valley meadow harbor lantern orchard canyon glacier".split()
    rows = []
    for i in range(1000):  # 400 chunks alike in the query's word and length: tied scores
        filler = " ".join(words[(i + j) % 10] for j in range(6))
        rows.append(
            {"_id": f"d{i}", "title": "", "text": f"zebra {filler}" if i % 5 < 2 else f"{filler} quartz"}
        )
    index_dir = tmp_path / "idx"
    IndexBuilder(index_dir, BuildConfig(embedding_model=None)).build(jsonl_corpus(tmp_path / "c", rows))
    settings = Settings(index_dir=index_dir, _env_file=None)  # type: ignore[call-arg]
    totals = []
    with TestClient(create_app(settings, SearchEngine(settings), wait=True)) as client:
        for min_relevance in (0.0, 0.3, 0.4, 0.5, 0.6):
            body = {"text": "zebra", "filters": {"minRelevance": min_relevance}}
            options = {"strategies": ["keyword"], "limit": 100}
            first = search_json(client, {**body, "options": options})
            held, offset = 0, 0
            while page := search_json(client, {**body, "options": {**options, "offset": offset}})["results"]:
                held, offset = held + len(page), offset + 100
            assert first["totalCount"] == held, min_relevance
            totals.append(held)
    assert totals[0] == 400 and any(100 < t < 400 for t in totals), totals


def test_file_and_date_filters_apply_to_every_strategy(client: TestClient) -> None:
    data = search_json(
        client, {"text": "Nobel Prize", "filters": {"fileIds": ["yukawa-ja.md"], "minRelevance": 0}}
    )
    assert data["results"] and {r["sources"]["fileId"] for r in data["results"]} == {"yukawa-ja.md"}
    dated = search_json(
        client,
        {
            "text": "company founded",
            "filters": {"dateRange": {"start": "1940-01-01", "end": "1960-12-31"}, "minRelevance": 0},
        },
    )
    # Passages carry their document's date; an entity passes through a passage that passed.
    years = {r["metadata"]["date"][:4] for r in dated["results"] if r["type"] == "chunk"}
    assert years and all(1940 <= int(y) <= 1960 for y in years)
    assert all(r["type"] in ("chunk", "entity", "community") for r in dated["results"])
    none = search_json(client, {"text": "Toyota", "filters": {"fileIds": [], "minRelevance": 0}})
    assert none["results"] == [] and none["totalCount"] == 0


def test_min_relevance_cuts_results(client: TestClient) -> None:
    loose = search_json(client, {"text": "radium", "filters": {"minRelevance": 0}})
    strict = search_json(client, {"text": "radium", "filters": {"minRelevance": 0.9}})
    assert all(r["score"] >= 0.9 for r in strict["results"])
    assert strict["totalCount"] < loose["totalCount"]


def test_type_and_weights_in_the_request_win(client: TestClient) -> None:
    body = {
        "text": "Toyota",
        "type": "global",
        "options": {"weights": {"keyword": 1.0, "semantic": 0.0, "graph": 0.0}},
    }
    data = search_json(client, body)
    assert data["query"]["type"] == "global"
    assert data["query"]["options"]["weights"] == {"keyword": 1.0, "semantic": 0.0, "graph": 0.0}
    auto = search_json(client, {"text": "relationship between Sakichi Toyoda and Toyota Motor"})
    assert auto["query"]["type"] == "relationship"
    assert auto["query"]["options"]["weights"] == auto["classification"]["suggestedWeights"]


def test_metadata_and_context(client: TestClient) -> None:
    data = search_json(client, {"text": "Trinitron colour television", "options": {"limit": 1}})
    meta = data["results"][0]["metadata"]
    assert meta["url"].startswith("http") and meta["language"] == "en" and meta["docId"]
    bare = search_json(
        client,
        {"text": "Trinitron", "options": {"limit": 1, "includeMetadata": False, "includeHighlights": False}},
    )
    assert bare["results"][0]["metadata"] is None and bare["results"][0]["highlights"] == []


def test_precomputed_embedding(client: TestClient, embedder) -> None:  # type: ignore[no-untyped-def]
    vector = embedder.embed_queries(["Bletchley Park codebreakers"])[0].tolist()
    data = search_json(
        client, {"text": "zzz", "embedding": vector, "options": {"strategies": ["semantic"], "limit": 1}}
    )
    assert titles(data) == ["Alan Turing, Bletchley Park and the question of machine intelligence"]
    r = client.post(
        "/v1/search", json={"text": "x", "embedding": [0.1] * 10}, headers={"Accept-Language": "en"}
    )
    assert r.status_code == 422
    assert r.json()["errors"] == [
        {
            "path": "embedding",
            "code": "embedding_dimension",
            "message": "Embedding must have 384 dimensions (got 10)",
        }
    ]


def test_alias_route(client: TestClient) -> None:
    body = {"text": "Kyoto Protocol", "options": {"limit": 3}}
    a = client.post("/search", json=body).json()
    b = client.post("/v1/search", json=body).json()
    assert [r["id"] for r in a["results"]] == [r["id"] for r in b["results"]]


def test_validation_errors_are_problem_json_in_both_languages(client: TestClient) -> None:
    bad = {
        "text": "",
        "options": {"limit": 0, "weights": {"keyword": 0.5, "semantic": 0.5, "graph": 0.5}},
        "x": 1,
    }
    ja = client.post("/v1/search", json=bad, headers={"X-Request-ID": "req-123"})
    assert ja.status_code == 422 and ja.headers["content-type"] == "application/problem+json"
    assert ja.headers["X-Request-ID"] == "req-123"
    body = ja.json()
    assert body["status"] == 422 and body["requestId"] == "req-123" and body["instance"] == "/v1/search"
    assert {(e["path"], e["message"]) for e in body["errors"]} == {
        ("text", "1文字以上である必要があります"),
        ("options.limit", "1以上である必要があります"),
        ("options.weights", "検索重みの合計は1.0である必要があります"),
        ("x", "不明なフィールドです"),
    }
    en = client.post("/v1/search", json=bad, headers={"Accept-Language": "en-US,en;q=0.9"}).json()
    assert {(e["path"], e["message"]) for e in en["errors"]} == {
        ("text", "Must be at least 1 characters"),
        ("options.limit", "Must be greater than or equal to 1"),
        ("options.weights", "Search weights must sum to 1.0"),
        ("x", "Unknown field"),
    }


def test_malformed_requests(client: TestClient) -> None:
    r = client.post("/v1/search", content=b'{"text": ', headers={"content-type": "application/json"})
    assert r.status_code == 400 and r.json()["errors"][0]["code"] == "json_invalid"
    r = client.post(
        "/v1/search", content=b'{"text": "\xff\xfe"}', headers={"content-type": "application/json"}
    )
    assert r.status_code == 400 and r.json()["errors"][0]["code"] == "invalid_utf8"
    r = client.post(
        "/v1/search", content=b"text=x", headers={"content-type": "application/x-www-form-urlencoded"}
    )
    assert r.status_code == 415 and r.json()["errors"][0]["path"] == "body"
    r = client.post(
        "/v1/search",
        content=b'{"text": "' + b"a" * 2_000_000 + b'"}',
        headers={"content-type": "application/json"},
    )
    assert r.status_code == 413 and r.json()["errors"][0]["code"] == "body_too_large"
    r = client.post(
        "/v1/search",
        content=b'{"text": "q", "options": {"weights": {"keyword": NaN, "semantic": 0.5, "graph": 0.5}}}',
        headers={"content-type": "application/json"},
    )
    assert r.status_code == 422 and r.json()["errors"][0]["path"] == "options.weights.keyword"
    assert client.get("/v1/search").status_code == 405
    assert client.get("/nope").json()["status"] == 404


def test_documents_endpoint(client: TestClient) -> None:
    data = search_json(client, {"text": "渋沢栄一", "options": {"limit": 1}})
    doc_id = data["results"][0]["metadata"]["docId"]
    doc = client.get(f"/v1/documents/{doc_id}").json()
    assert doc["id"] == doc_id and doc["chunks"] and data["results"][0]["content"]["text"] in doc["text"]
    missing = client.get("/v1/documents/..%2F..%2Fetc%2Fpasswd")
    assert missing.status_code == 404 and missing.headers["content-type"] == "application/problem+json"


def test_not_ready_without_an_index(tmp_path: Path) -> None:
    settings = Settings(index_dir=tmp_path / "none", load_embedder=False, _env_file=None)  # type: ignore[call-arg]
    with TestClient(create_app(settings, wait=True)) as c:
        r = c.get("/readyz")
        assert r.status_code == 503 and r.json()["components"]["index"]["ready"] is False
        assert "hybridrag index build" in r.json()["components"]["index"]["detail"]
        assert c.get("/livez").status_code == 200
        s = c.post("/v1/search", json={"text": "x"})
        assert s.status_code == 503 and s.headers["content-type"] == "application/problem+json"
        for r in (
            c.post("/v1/search/batch", json={"queries": [{"text": "x"}]}),
            c.get("/v1/documents/x"),
            c.get("/v1/chunks/x"),
        ):
            assert r.status_code == 503 and r.headers["retry-after"] == "5" and r.json()["status"] == 503


def test_api_key(sample_index: Path, embedder) -> None:  # type: ignore[no-untyped-def]
    from hybridrag.pipeline.engine import SearchEngine

    settings = Settings(index_dir=sample_index, embedding_model="minilm", api_key="s3cret", _env_file=None)  # type: ignore[call-arg]
    with TestClient(create_app(settings, SearchEngine(settings, embedder=embedder), wait=True)) as c:
        assert c.post("/v1/search", json={"text": "Toyota"}).status_code == 401
        assert (
            c.post(
                "/v1/search", json={"text": "Toyota"}, headers={"Authorization": "Bearer wrong"}
            ).status_code
            == 401
        )
        assert (
            c.post(
                "/v1/search", json={"text": "Toyota"}, headers={"Authorization": "Bearer s3cret"}
            ).status_code
            == 200
        )
        assert (
            c.post("/v1/search", json={"text": "Toyota"}, headers={"X-API-Key": "s3cret"}).status_code == 200
        )
        assert c.get("/livez").status_code == 200 and c.get("/readyz").status_code == 200


def test_index_built_with_another_model_is_refused(sample_index: Path) -> None:
    settings = Settings(
        index_dir=sample_index, embedding_model="e5-multilingual", load_embedder=False, _env_file=None
    )  # type: ignore[call-arg]
    with TestClient(create_app(settings, wait=True)) as c:
        detail = c.get("/readyz").json()["components"]["index"]["detail"]
        assert "built with embedding model 'minilm'" in detail and "HYBRIDRAG_EMBEDDING_MODEL" in detail


def test_time_budget_skips_a_slow_retriever(
    sample_index: Path, embedder, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    import time

    from hybridrag.pipeline.engine import SearchEngine
    from hybridrag.pipeline.retrievers import SemanticRetriever

    original = SemanticRetriever.retrieve

    def slow(self, query, limit):  # type: ignore[no-untyped-def]
        time.sleep(1.5)
        return original(self, query, limit)

    monkeypatch.setattr(SemanticRetriever, "retrieve", slow)
    settings = Settings(index_dir=sample_index, embedding_model="minilm", search_budget_s=0.5, _env_file=None)  # type: ignore[call-arg]
    with TestClient(create_app(settings, SearchEngine(settings, embedder=embedder), wait=True)) as c:
        started = time.perf_counter()
        data = search_json(c, {"text": "Who founded Sony?"})
        assert time.perf_counter() - started < 1.4
        assert any(n["stage"] == "semantic" and n["reason"] == "time budget exceeded" for n in data["notes"])
        assert data["results"] and data["strategies"]["semantic"]["enabled"] is False


def test_fusion_choice_and_deep_pages_agree(client: TestClient) -> None:
    base = {"text": "Japanese company founded in Tokyo", "filters": {"minRelevance": 0}}
    scored = search_json(client, {**base, "options": {"limit": 30}})
    plain = search_json(client, {**base, "fusion": "rrf", "options": {"limit": 30}})
    assert scored["results"] and plain["results"]
    assert {r["id"] for r in scored["results"]} & {r["id"] for r in plain["results"]}
    assert all(0 <= r["score"] <= 1 for r in scored["results"] + plain["results"])
    # A deep page (deeper fetch) agrees with the same positions of a shallow one.
    deep = search_json(client, {**base, "options": {"limit": 10, "offset": 20}})
    assert [r["id"] for r in deep["results"]] == [r["id"] for r in scored["results"][20:30]]
    r = client.post("/v1/search", json={**base, "fusion": "borda"}, headers={"Accept-Language": "en"})
    assert r.status_code == 422 and r.json()["errors"][0]["path"] == "fusion"
    assert "score-rrf" in r.json()["errors"][0]["message"]


def test_a_note_says_which_rule_set_the_weights(client: TestClient) -> None:
    question = search_json(client, {"text": "Who founded Toyota?", "options": {"rerankEnabled": False}})
    fusion = [n for n in question["notes"] if n["stage"] == "fusion"]
    assert fusion and fusion[0]["status"] == "weighted" and "question" in fusion[0]["reason"]
    assert (
        question["query"]["options"]["weights"]["graph"] >= 0.8
        or question["classification"]["suggestedWeights"]["graph"] >= 0.8
    )
    # Weights the caller chose are the caller's: no note.
    chosen = {"rerankEnabled": False, "weights": {"keyword": 0.4, "semantic": 0.4, "graph": 0.2}}
    explicit = search_json(client, {"text": "Who founded Toyota?", "options": chosen})
    assert not [n for n in explicit["notes"] if n["stage"] == "fusion"]


@pytest.mark.parametrize(
    "path", ["/v1/documents/", "/v1/chunks/", "/v1/search/", "/readyz/", "/ui/", "/v1/tasks/", "/docs/"]
)
def test_a_stray_slash_is_a_404_problem_never_a_redirect_built_from_host(
    live_service: str, path: str
) -> None:
    """Starlette's slash redirect took its Location from the Host header (`Host: evil.example` sent the
    caller there); every route now answers such a path with a 404 problem and no Location."""
    import httpx

    method = "POST" if path == "/v1/search/" else "GET"
    answer = httpx.request(
        method, f"{live_service}{path}", headers={"Host": "evil.example"}, json={"text": "Sony"}, timeout=10
    )
    assert answer.status_code == 404, (path, answer.status_code, answer.headers)
    assert "location" not in answer.headers
    assert answer.headers["content-type"].startswith("application/problem+json")
    assert answer.json()["status"] == 404 and "evil.example" not in answer.text


def test_an_index_built_without_embeddings_is_served_with_the_matching_setting(
    tmp_path: Path, serve: Any
) -> None:
    """`--embedding-model none` builds a keyword + graph index; `HYBRIDRAG_EMBEDDING_MODEL=none` serves it:
    ready, with `semantic` said to be unavailable in /readyz and in a search's notes."""
    import httpx

    from hybridrag.cli.commands import SAMPLE_CORPUS
    from hybridrag.indexing.builds.build import BuildConfig, IndexBuilder
    from hybridrag.pipeline.engine import SearchEngine

    index = tmp_path / "index"
    IndexBuilder(index, BuildConfig(embedding_model=None)).build(SAMPLE_CORPUS)
    settings = Settings(index_dir=index, embedding_model="none", reload_interval_s=0, _env_file=None)  # type: ignore[call-arg]
    url = serve(create_app(settings, SearchEngine(settings), wait=True))
    ready = httpx.get(f"{url}/readyz")
    assert ready.status_code == 200, ready.text
    body = ready.json()
    assert body["status"] == "ready" and "semantic" in body["unavailable"]
    assert "none" in body["components"]["embedder"]["detail"]
    hits = httpx.post(f"{url}/v1/search", json={"text": "Who founded Sony?", "options": {"limit": 3}}).json()
    assert "Sony" in hits["results"][0]["metadata"]["title"]
    assert any(n["stage"] == "semantic" and n["status"] == "skipped" for n in hits["notes"]), hits["notes"]
    only = httpx.post(f"{url}/v1/search", json={"text": "Sony", "options": {"strategies": ["semantic"]}})
    assert only.status_code == 200 and only.json()["results"] == []


def test_the_service_model_runs_where_the_device_setting_says(sample_index: Path, serve: Any) -> None:
    """`HYBRIDRAG_DEVICE` puts the service's model (queries, and the passages the documents API writes) on
    CUDA when asked: auto falls back to the CPU where torch sees no device, and cuda then leaves the service
    not ready, saying why, instead of running elsewhere."""
    import httpx

    from hybridrag.indexing.models.embedders import cuda_available
    from hybridrag.pipeline.engine import SearchEngine

    if cuda_available():
        pytest.skip("this machine has a CUDA device: the refusal cannot be shown here")
    for device, ready_status in (("auto", 200), ("cuda", 503)):
        settings = Settings(  # type: ignore[call-arg]
            index_dir=sample_index,
            embedding_model="minilm",
            device=device,
            reload_interval_s=0,
            _env_file=None,
        )
        assert settings.search.device == device
        url = serve(create_app(settings, SearchEngine(settings), wait=True))
        ready = httpx.get(f"{url}/readyz")
        assert ready.status_code == ready_status, ready.text
        embedder = ready.json()["components"]["embedder"]
        if device == "auto":
            assert embedder["ready"] and "on cuda" not in embedder["detail"]
        else:
            assert not embedder["ready"] and "no CUDA device" in embedder["detail"]
        assert settings.writer.device == device
    with pytest.raises(ValueError, match="device"):
        Settings(index_dir=sample_index, device="tpu", _env_file=None)  # type: ignore[call-arg]


def test_the_documents_writer_embeds_where_the_device_setting_says(tmp_path: Path) -> None:
    """The writer's passages go to the configured device: cuda without one fails the task with the reason
    and publishes nothing; auto writes on the CPU and the manifest says so."""
    from conftest import jsonl_corpus

    from hybridrag.indexing.builds.build import BuildConfig, IndexBuilder
    from hybridrag.indexing.models.embedders import cuda_available
    from hybridrag.indexing.stores import versions
    from hybridrag.schemas.documents import DocumentIn
    from hybridrag.writes.writer import DocumentWriter

    if cuda_available():
        pytest.skip("this machine has a CUDA device: the refusal cannot be shown here")
    index_dir = tmp_path / "idx"
    rows = [
        {"_id": f"d{i}", "title": f"Note {i}", "text": f"Granite and basalt, note {i}."} for i in range(3)
    ]
    IndexBuilder(index_dir, BuildConfig(embedding_model="minilm")).build(jsonl_corpus(tmp_path / "c", rows))
    served = versions.current_version(index_dir).version
    for device, status in (("cuda", "failed"), ("auto", "succeeded")):
        writer = DocumentWriter(index_dir, merge_after_s=None, tasks_dir=tmp_path / device, device=device)
        task = writer.submit_documents([DocumentIn(id=f"n-{device}", text="Lichen on the moraine.")])
        assert writer.run_once() == 1
        done = writer.store.get(task.task_id)
        assert done is not None and done.status == status, done
        if device == "cuda":
            assert "no CUDA device" in (done.error or "")
            assert versions.current_version(index_dir).version == served
    assert versions.current_version(index_dir).manifest["embedding"]["device"] == "cpu"


def test_each_component_is_handed_its_group_of_the_settings() -> None:
    """One flat `HYBRIDRAG_*` surface; the app, the engine, the index and the writer each see only their group."""
    from dataclasses import fields

    from hybridrag.pipeline.settings import HttpSettings, IndexSettings, SearchSettings, WriterSettings

    settings = Settings(  # type: ignore[call-arg]
        port=9001,
        cors_origins=["https://a.example"],
        documents_batch_max=7,
        search_budget_s=3.0,
        _env_file=None,
    )
    assert settings.http.port == 9001 and settings.http.cors_origins == ("https://a.example",)
    assert settings.http.base_url == settings.search.base_url == "http://127.0.0.1:9001"
    assert settings.writer.documents_batch_max == 7 and settings.search.search_budget_s == 3.0
    assert settings.index.index_dir == settings.index_dir
    # Every setting belongs to a group (or to start-up: logging, where the index comes from).
    grouped = {
        f.name for g in (HttpSettings, SearchSettings, IndexSettings, WriterSettings) for f in fields(g)
    }
    start_up = {"log_level", "log_json", "public_base_url", "rerank_models"}
    assert set(Settings.model_fields) - grouped == start_up
