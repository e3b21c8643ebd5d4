"""The absolute relevance (`pipeline.relevance`): its evidence, its model file and what it does to a search:
junk comes back empty at the default `minRelevance`, answers stay, the order stays the fused order."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from conftest import search_json
from fastapi.testclient import TestClient

from hybridrag.indexing.stores.keyword import KeywordHit, KeywordSearch
from hybridrag.pipeline.relevance import MODEL_FILE, Logistic, RelevanceModel, query_evidence
from hybridrag.pipeline.retrievers import Candidate, Retrieved, keyword_evidence, semantic_evidence


def test_keyword_evidence_counts_the_terms_the_corpus_lacks() -> None:
    found = KeywordSearch([KeywordHit("c1", 6.0)], 1, ceiling=8.0, absent=4.0)
    assert keyword_evidence(found) == {"coverage": pytest.approx(0.5)}
    assert keyword_evidence(KeywordSearch([], 0, 0.0, 5.0)) == {"coverage": 0.0}
    assert keyword_evidence(KeywordSearch([], 0, 0.0, 0.0)) == {"coverage": 0.0}


def test_semantic_evidence_is_the_best_similarity() -> None:
    assert semantic_evidence([0.9, 0.8, 0.1]) == {"top": 0.9}
    assert semantic_evidence([]) == {}


def _retrieved(ids: list[str], evidence: dict[str, float]) -> Retrieved:
    return Retrieved([Candidate(i, 1.0, 1.0) for i in ids], len(ids), evidence=evidence)


def test_query_evidence_gathers_both_lists_and_their_agreement() -> None:
    keyword = _retrieved([f"c{i}" for i in range(10)], {"coverage": 0.4})
    semantic = _retrieved([f"c{i}" for i in range(5, 15)], {"top": 0.9})
    features = query_evidence({"keyword": keyword, "semantic": semantic})
    assert features == {"coverage": 0.4, "top": 0.9, "agreement": 0.5}
    assert set(query_evidence({"keyword": keyword})) == {"coverage"}


def _model(decay: float = 1.0) -> RelevanceModel:
    full = Logistic(-2.0, {"coverage": 4.0, "top": 1.0, "agreement": 1.0})
    keyword = Logistic(-1.0, {"coverage": 5.0})
    return RelevanceModel({"m": {"full": full, "keyword": keyword}, "*": {"keyword": keyword}}, decay)


def test_the_model_picks_the_coefficients_for_the_evidence_at_hand() -> None:
    model = _model()
    full = {"coverage": 0.5, "top": 0.9, "agreement": 0.5}
    assert model.probability("m", full) == pytest.approx(1 / (1 + math.exp(-(-2 + 2 + 0.9 + 0.5))))
    keyword_only = {"coverage": 0.5}
    assert model.probability("m", keyword_only) == pytest.approx(1 / (1 + math.exp(-1.5)))
    # A model without coefficients of its own falls back on the keyword evidence alone.
    assert model.probability("other", full) == pytest.approx(1 / (1 + math.exp(-1.5)))
    assert model.probability("other", {"top": 0.9}) is None


def test_scores_keep_the_fused_order_and_the_threshold_inverts_them() -> None:
    model = _model(decay=0.5)
    fused = [0.8, 0.4, 0.2, 0.0]
    scores = model.scores(0.9, fused, top=0.8)
    assert scores[0] == pytest.approx(0.9) and scores == sorted(scores, reverse=True) and scores[-1] == 0.0
    cut = model.threshold(0.9, 0.8, 0.3)
    assert [s >= 0.3 for s in scores] == [f >= cut for f in fused]
    assert model.threshold(0.2, 0.8, 0.3) == math.inf  # nothing can reach the cut
    assert model.threshold(0.9, 0.8, 0.0) == 0.0


def test_the_shipped_model_loads_and_is_a_probability() -> None:
    data = json.loads(MODEL_FILE.read_text("utf-8"))
    model = RelevanceModel.load(MODEL_FILE)
    assert data["fittedBy"] and model.decay > 0
    # Any other embedding model gets the keyword evidence's coefficients alone.
    assert set(model.models["*"]) == {"keyword"}
    for name, kinds in model.models.items():
        assert name == "*" or {"full", "keyword", "semantic"} <= set(kinds), name
        on = {"coverage": 0.6, "top": 0.9, "agreement": 0.6}
        off = {"coverage": 0.05, "top": 0.8, "agreement": 0.0}
        p_on, p_off = model.probability(name, on), model.probability(name, off)
        assert p_on is not None and p_off is not None and p_on > p_off, name


NONSENSE = ["zzzz qqqq nonexistent", "blorf quenti vaxel", "purple elephant xylophone quarterly"]


@pytest.mark.parametrize("text", NONSENSE)
def test_a_query_about_nothing_in_the_corpus_comes_back_empty(client: TestClient, text: str) -> None:
    junk = search_json(client, {"text": text})
    assert junk["results"] == [] and junk["totalCount"] == 0, [r["score"] for r in junk["results"]]
    everything = search_json(client, {"text": text, "filters": {"minRelevance": 0}})
    assert everything["results"] and max(r["score"] for r in everything["results"]) < 0.3


@pytest.mark.parametrize("text", ["How did Sony start?", "トヨタの歴史", "What did Ada Lovelace write?"])
def test_ordinary_questions_on_a_small_corpus_are_not_cut(client: TestClient, text: str) -> None:
    """The sample is fourteen chunks: evidence that follows the corpus' size (most words of a question absent
    from it) must not read as junk."""
    data = search_json(client, {"text": text})
    assert data["results"] and data["results"][0]["score"] >= 0.3


def test_an_answerable_query_keeps_its_answer_and_the_fused_order(client: TestClient) -> None:
    data = search_json(client, {"text": "Who founded Sony?"})
    assert data["results"] and "Sony" in data["results"][0]["metadata"]["title"]
    scores = [r["score"] for r in data["results"]]
    assert scores == sorted(scores, reverse=True) and all(s >= 0.3 for s in scores)
    assert all(r["relevance"]["combined"] == r["score"] for r in data["results"])
    loose = search_json(client, {"text": "Who founded Sony?", "filters": {"minRelevance": 0}})
    # The cut drops a tail; the order of what stays is the order of the uncut list.
    kept = [r["id"] for r in data["results"]]
    assert [r["id"] for r in loose["results"]][: len(kept)] == kept
    assert len(data["results"]) == min(20, data["totalCount"]) and data["totalCount"] <= loose["totalCount"]


def test_the_model_file_is_what_the_fitting_writes(tmp_path: Path) -> None:
    """`bench relevance --fit` writes one model per embedding model, and the service reads that file."""
    from hybridrag.benchmarks.relevance import Search, fit, model_file

    searches = []
    for i in range(40):
        on = i % 2 == 0
        searches.append(
            Search(
                "a" if on else "b",
                "a",
                {"coverage": 0.6 if on else 0.1, "top": 0.9, "agreement": 0.5 if on else 0.0},
                [1.0, 0.8, 0.5],
                ["d1", "d2", "d3"],
                ["d1"] if on else [],
            )
        )
    model = fit(searches)
    path = tmp_path / "model.json"
    model_file(model, "m", path)
    loaded = RelevanceModel.load(path)
    on = loaded.probability("m", searches[0].evidence)
    off = loaded.probability("m", searches[1].evidence)
    assert on is not None and off is not None and on > 0.9 and off < 0.1
    # Another embedding model's searches are judged by the keyword evidence alone.
    assert set(loaded.models["*"]) == {"keyword"}
    other = loaded.probability("another-model", searches[0].evidence)
    assert other is not None and other > 0.5
