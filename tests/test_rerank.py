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
        "rerankConfig": {"model": str(tiny_cross_encoder), "topK": 6, "batchSize": 4},
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
