"""Batch search over HTTP (sub-queries, per-query errors, merged MMR list) and the pure MMR function."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from hybridrag.pipeline.mmr import cosine_matrix, jaccard_matrix, mmr


def test_mmr_relevance_only_when_lambda_is_one() -> None:
    sim = np.ones((3, 3))
    assert [i for i, _ in mmr([0.2, 0.9, 0.5], sim, 3, 1.0)] == [1, 2, 0]


def test_mmr_prefers_novelty_over_a_near_duplicate() -> None:
    # 0 and 1 are near-duplicates; 2 is less relevant but different.
    sim = np.array([[1.0, 0.99, 0.1], [0.99, 1.0, 0.1], [0.1, 0.1, 1.0]])
    order = [i for i, _ in mmr([0.9, 0.89, 0.7], sim, 3, 0.5)]
    assert order == [0, 2, 1]
    # Ties go to the earlier candidate.
    assert [i for i, _ in mmr([0.5, 0.5], np.eye(2), 2, 0.7)] == [0, 1]


def test_mmr_rejects_bad_input() -> None:
    with pytest.raises(ValueError):
        mmr([0.1, 0.2], np.eye(3), 2, 0.5)
    with pytest.raises(ValueError):
        mmr([0.1], np.eye(1), 1, 1.5)


def test_similarity_matrices() -> None:
    cos = cosine_matrix(np.array([[1.0, 0.0], [0.0, 2.0], [0.0, 0.0]]))
    assert cos[0, 0] == pytest.approx(1.0) and cos[0, 1] == pytest.approx(0.0) and cos[2, 2] == 0.0
    jac = jaccard_matrix([{"a", "b"}, {"b", "c"}, set()])
    assert jac[0, 1] == pytest.approx(1 / 3) and jac[0, 2] == 0.0 and jac[2, 2] == 1.0


def _batch(client: Any, body: dict[str, Any], **headers: str) -> Any:
    return client.post("/v1/search/batch", json=body, headers=headers)


def test_batch_answers_each_query_and_merges_by_document(client: Any) -> None:
    queries = [
        {"text": "Toyota production system", "options": {"limit": 5}},
        {"text": "トヨタ 生産方式", "options": {"limit": 5}},
        {"text": "Alan Turing computing machinery", "options": {"limit": 5}},
    ]
    r = _batch(client, {"queries": queries, "merge": {"limit": 8, "mmrLambda": 0.7}})
    assert r.status_code == 200, r.text
    body = r.json()
    assert [o["index"] for o in body["results"]] == [0, 1, 2]
    for outcome, query in zip(body["results"], queries, strict=True):
        assert outcome["error"] is None
        single = client.post("/v1/search", json=query).json()
        # The same engine path as a single search: identical ranking.
        assert [i["id"] for i in outcome["result"]["results"]] == [i["id"] for i in single["results"]]
        assert outcome["result"]["requestId"].startswith(body["requestId"])
    merged = body["merged"]
    assert 0 < len(merged) <= 8
    keys = [m["key"] for m in merged]
    assert len(keys) == len(set(keys)), "merged hits must be deduplicated"
    doc_ids = [m["docId"] for m in merged if m["docId"]]
    assert len(doc_ids) == len(set(doc_ids))
    # A document found by the English and the Japanese Toyota queries records both.
    found_by = {m["docId"]: m["queryIndexes"] for m in merged if m["docId"]}
    assert (
        any(set(q) >= {0, 2} or set(q) >= {0, 1} or set(q) >= {1, 2} for q in found_by.values())
        or len(found_by) >= 3
    )
    assert all(0 <= m["relevance"] <= 1 for m in merged)
    # The first pick is the most relevant hit overall.
    best = max(m["relevance"] for m in merged)
    assert merged[0]["relevance"] == best
    assert body["indexVersion"] == body["results"][0]["result"]["indexVersion"]


def test_batch_mmr_lambda_changes_diversity(client: Any) -> None:
    queries = [
        {"text": "Toyota", "options": {"limit": 10}},
        {"text": "Toyota Prius hybrid", "options": {"limit": 10}},
    ]
    by_chunk = {"queries": queries, "merge": {"limit": 6, "dedupeBy": "chunk", "mmrLambda": 1.0}}
    relevance_only = _batch(client, by_chunk).json()["merged"]
    scores = [m["relevance"] for m in relevance_only]
    assert scores == sorted(scores, reverse=True)
    by_chunk["merge"]["mmrLambda"] = 0.3
    diverse = _batch(client, by_chunk).json()["merged"]
    assert {m["key"] for m in diverse} != {m["key"] for m in relevance_only} or len(relevance_only) < 6


def test_batch_without_merge_and_per_query_errors(client: Any) -> None:
    r = _batch(client, {"queries": [{"text": "Curie"}, {"text": "Curie", "embedding": [0.1, 0.2]}]})
    assert r.status_code == 200
    body = r.json()
    assert body["merged"] is None
    assert body["results"][0]["result"]["results"]
    error = body["results"][1]["error"]
    assert body["results"][1]["result"] is None
    assert error["status"] == 422 and error["errors"][0]["path"] == "queries[1].embedding"


@pytest.mark.parametrize(
    ("body", "path"),
    [
        ({"queries": []}, "queries"),
        ({"queries": [{"text": "x"}] * 21}, "queries"),
        ({"queries": [{"text": "ok"}, {"text": "  "}]}, "queries[1].text"),
        ({"queries": [{"text": "ok"}], "merge": {"limit": 0}}, "merge.limit"),
        ({"queries": [{"text": "ok"}], "merge": {"mmrLambda": 2}}, "merge.mmrLambda"),
        ({"queries": [{"text": "ok"}], "extra": 1}, "extra"),
    ],
)
def test_batch_validation_names_the_field(client: Any, body: dict[str, Any], path: str) -> None:
    r = _batch(client, body, **{"Accept-Language": "en"})
    assert r.status_code == 422, r.text
    assert r.headers["content-type"].startswith("application/problem+json")
    assert path in [e["path"] for e in r.json()["errors"]]


def test_chunk_endpoint(client: Any) -> None:
    hit = client.post("/v1/search", json={"text": "Ada Lovelace", "options": {"limit": 1}}).json()["results"][
        0
    ]
    r = client.get(f"/v1/chunks/{hit['id']}")
    assert r.status_code == 200
    chunk = r.json()
    assert chunk["text"] == hit["content"]["text"]
    doc = client.get(chunk["documentUrl"].split("://", 1)[1].split("/", 1)[1].join(["/", ""])).json()
    assert doc["text"][chunk["start"] : chunk["end"]] == chunk["text"]
    assert client.get("/v1/chunks/nope").status_code == 404
    assert client.get("/v1/chunks/..%2F..%2Fetc%2Fpasswd").status_code == 404
