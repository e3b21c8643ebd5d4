"""Cross-encoder rerank, exercised for real with a tiny cross-encoder built here (none ships on PyPI)."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from hybridrag.pipeline.rerank import CrossEncoderReranker, RerankerPool, RerankerUnavailable, resolve_model


def test_missing_model_is_reported_not_downloaded(tmp_path: Path) -> None:
    with pytest.raises(RerankerUnavailable, match="not on this machine"):
        resolve_model("no-org/no-such-cross-encoder")
    pool = RerankerPool()
    for _ in range(2):  # the failure is remembered, not retried
        with pytest.raises(RerankerUnavailable):
            pool.get(str(tmp_path / "missing"))


def test_scores_are_probabilities(tiny_cross_encoder: Path) -> None:
    model = CrossEncoderReranker(str(tiny_cross_encoder))
    scores = model.score(
        "radium", ["Marie Curie discovered radium.", "Toyota makes cars.", "x"], batch_size=2
    )
    assert scores.shape == (3,) and ((scores > 0) & (scores < 1)).all()
    again = model.score("radium", ["Marie Curie discovered radium.", "Toyota makes cars.", "x"], batch_size=3)
    assert scores == pytest.approx(again, abs=1e-6)


def test_search_reranks_top_k(client: TestClient, tiny_cross_encoder: Path) -> None:
    body = {
        "text": "company founded in Tokyo",
        "filters": {"minRelevance": 0},
        "options": {"limit": 10, "strategies": ["keyword", "semantic"]},
        "rerankConfig": {"model": "tiny", "topK": 6, "batchSize": 4},
    }
    data = client.post("/v1/search", json=body).json()
    assert not [n for n in data["notes"] if n["stage"] == "rerank"]
    reranked = [r for r in data["results"] if r["relevance"]["rerank"] is not None]
    assert len(reranked) == 6 and data["results"][:6] == reranked
    scores = [r["relevance"]["rerank"] for r in reranked]
    assert scores == sorted(scores, reverse=True)
    assert all(r["score"] == r["relevance"]["rerank"] for r in reranked)
    assert all(r["relevance"]["rerank"] is None for r in data["results"][6:])
    plain = client.post(
        "/v1/search", json={**body, "options": {**body["options"], "rerankEnabled": False}}
    ).json()
    assert {r["id"] for r in plain["results"][:6]} == {r["id"] for r in reranked}


def test_unavailable_reranker_is_skipped_with_reason(client: TestClient) -> None:
    data = client.post("/v1/search", json={"text": "Toyota"}).json()
    note = next(n for n in data["notes"] if n["stage"] == "rerank")
    assert note["status"] == "skipped" and "not on this machine" in note["reason"]
    assert all(r["relevance"]["rerank"] is None for r in data["results"])
    ready = client.get("/readyz").json()
    assert ready["status"] == "ready"
    assert ready["components"]["reranker"]["required"] is False


def test_a_missing_reranker_reads_only_the_page(
    client: TestClient, tiny_cross_encoder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Reranking is asked for by default; with its model known to be missing, the page reads its own rows,
    # not the rerank's top k as well.
    from hybridrag.pipeline.response import PageRows

    asked: list[list[str]] = []
    read = PageRows.read.__func__  # type: ignore[attr-defined]

    def recording(cls: type[PageRows], index: object, ids: list[str]) -> PageRows:
        asked.append(list(ids))
        return read(cls, index, ids)

    monkeypatch.setattr(PageRows, "read", classmethod(recording))
    body = {
        "text": "company founded in Tokyo",
        "filters": {"minRelevance": 0},
        "options": {"limit": 2, "strategies": ["keyword", "semantic"]},
    }
    data = client.post("/v1/search", json=body).json()
    assert any(n["stage"] == "rerank" and n["status"] == "skipped" for n in data["notes"])
    assert len(asked) == 1 and asked[0] == [r["id"] for r in data["results"]] and len(asked[0]) == 2
    # A model that loads: its top k are read with the page, and reranked.
    asked.clear()
    data = client.post("/v1/search", json={**body, "rerankConfig": {"model": "tiny", "topK": 6}}).json()
    assert len(asked) == 1 and len(asked[0]) == 6
    assert all(r["relevance"]["rerank"] is not None for r in data["results"])


def test_only_allow_listed_models_are_loaded(client: TestClient, tiny_cross_encoder: Path) -> None:
    # A path (even one holding a real model) or any other name is refused before anything is loaded.
    for name in (str(tiny_cross_encoder), "/etc", "x" * 200, "../../secret"):
        response = client.post(
            "/v1/search",
            json={"text": "Toyota", "rerankConfig": {"model": name}},
            headers={"Accept-Language": "en"},
        )
        assert response.status_code == 422, name
        (error,) = response.json()["errors"]
        assert error["path"] == "rerankConfig.model" and error["code"] == "rerank_model_not_allowed"
        assert "tiny" in error["message"] and "cross-encoder/ms-marco-MiniLM-L-6-v2" in error["message"]
        assert name not in response.text
    # A name longer than the contract's bound is a plain 422 too, and is not echoed either.
    long = client.post("/v1/search", json={"text": "Toyota", "rerankConfig": {"model": "m" * 400_000}})
    assert long.status_code == 422 and len(long.content) < 2_000


def test_unavailable_allowed_model_notes_carry_our_own_message(tmp_path: Path) -> None:
    pool = RerankerPool()
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "config.json").write_text("{not json")
    with pytest.raises(RerankerUnavailable) as info:
        pool.get("broken", str(tmp_path / "broken"))
    assert str(info.value) == "cross-encoder 'broken' could not be loaded (see the server log)"
    with pytest.raises(RerankerUnavailable, match="'gone' is not on this machine"):
        pool.get("gone", str(tmp_path / "missing"))
    with pytest.raises(RerankerUnavailable) as info:
        pool.get("long", str(tmp_path / ("x" * 300)))  # the OS refuses the name itself
    assert "Errno" not in str(info.value) and str(info.value).startswith("cross-encoder 'long'")
