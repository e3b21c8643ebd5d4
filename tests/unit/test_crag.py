"""CRAG verdicts: the threshold rules, and the scores a search reports with cragEnabled."""

from __future__ import annotations

import httpx
import pytest
from fastapi.testclient import TestClient

from hybridrag.pipeline import crag
from hybridrag.pipeline.crag import Thresholds, overall, verdict

T = Thresholds(upper=0.8, lower=0.5)


def test_verdict_bands() -> None:
    assert verdict(0.9, T, "q").relevance == "correct"
    assert verdict(0.8, T, "q").needs_web_search is False and verdict(0.8, T, "q").refined_query is None
    mid = verdict(0.65, T, "refined")
    assert mid.relevance == "ambiguous" and mid.needs_web_search and mid.refined_query == "refined"
    assert mid.confidence == pytest.approx(1.0)
    low = verdict(0.1, T, "refined")
    assert low.relevance == "incorrect" and low.needs_web_search and 0.5 < low.confidence <= 1


def test_overall_rules() -> None:
    c, a, i = verdict(0.95, T, "r"), verdict(0.6, T, "r"), verdict(0.2, T, "r")
    assert overall([i, a, c], "r").relevance == "correct"
    assert overall([i, a], "r").relevance == "ambiguous"
    assert overall([i, i], "r").relevance == "incorrect"
    assert overall([], "r").relevance == "incorrect" and overall([], "r").needs_web_search


def test_search_with_crag(client: TestClient) -> None:
    body = {
        "text": "lattice gauge theory of quantum chromodynamics",
        "filters": {"minRelevance": 0},
        "options": {"cragEnabled": True, "rerankEnabled": False, "limit": 5},
    }
    data = client.post("/v1/search", json=body).json()
    t = crag.thresholds_for("minilm")
    for item in data["results"]:
        sem, v = item["relevance"]["semantic"], item["relevance"]["crag"]
        expected = "correct" if sem >= t.upper else "incorrect" if sem < t.lower else "ambiguous"
        assert v["relevance"] == expected and v["needsWebSearch"] == (expected != "correct")
    assert data["crag"]["relevance"] in ("incorrect", "ambiguous") and data["crag"]["needsWebSearch"]
    assert "lattice" in data["crag"]["refinedQuery"]
    off = client.post(
        "/v1/search", json={**body, "options": {**body["options"], "cragEnabled": False}}
    ).json()
    assert off["crag"] is None and all(r["relevance"]["crag"] is None for r in off["results"])


def test_a_nonsense_query_is_judged_incorrect_by_crag(live_service: str) -> None:
    body = {"text": "zzzz qqqq nonexistent", "options": {"cragEnabled": True}, "filters": {"minRelevance": 0}}
    data = httpx.post(f"{live_service}/v1/search", json=body, timeout=30).json()
    assert data["results"], "scores are relative, so a page still comes back"
    assert data["crag"]["relevance"] == "incorrect" and data["crag"]["needsWebSearch"] is True
    assert all(
        r["relevance"]["crag"]["relevance"] != "correct" for r in data["results"] if r["type"] == "chunk"
    )
