"""Weighted RRF against hand-computed values."""

from __future__ import annotations

import math

import pytest

from hybridrag.pipeline.fusion import validate_weights, weighted_rrf


def test_hand_computed_scores() -> None:
    fused = weighted_rrf({"a": ["x", "y"], "b": ["y", "z"]}, {"a": 0.5, "b": 0.5}, k=60, normalize=False)
    scores = {f.id: f.score for f in fused}
    assert scores["x"] == pytest.approx(0.5 / 61)
    assert scores["y"] == pytest.approx(0.5 / 62 + 0.5 / 61)
    assert scores["z"] == pytest.approx(0.5 / 62)
    assert [f.id for f in fused] == ["y", "x", "z"]
    assert fused[0].ranks == {"a": 2, "b": 1}


def test_normalized_scores_are_in_unit_range() -> None:
    fused = weighted_rrf({"a": ["x", "y"], "b": ["x"]}, {"a": 0.7, "b": 0.3}, k=10)
    assert fused[0].id == "x" and fused[0].score == pytest.approx(1.0)
    assert fused[1].score == pytest.approx((0.7 / 12) / (1.0 / 11))
    assert all(0 <= f.score <= 1 for f in fused)


def test_weights_change_the_order() -> None:
    rankings = {"keyword": ["k1", "s1"], "semantic": ["s1", "k1"]}
    assert weighted_rrf(rankings, {"keyword": 0.9, "semantic": 0.1})[0].id == "k1"
    assert weighted_rrf(rankings, {"keyword": 0.1, "semantic": 0.9})[0].id == "s1"


def test_ties_are_deterministic() -> None:
    # Same score for p and q; best rank equal; id breaks the tie, whatever the input order.
    one = weighted_rrf({"a": ["q", "p"], "b": ["p", "q"]}, {"a": 0.5, "b": 0.5})
    two = weighted_rrf({"b": ["p", "q"], "a": ["q", "p"]}, {"a": 0.5, "b": 0.5})
    assert [f.id for f in one] == [f.id for f in two] == ["p", "q"]


def test_k_changes_scores() -> None:
    small = weighted_rrf({"a": ["x", "y"]}, {"a": 1.0}, k=1, normalize=False)
    large = weighted_rrf({"a": ["x", "y"]}, {"a": 1.0}, k=1000, normalize=False)
    assert small[0].score == pytest.approx(0.5) and large[0].score == pytest.approx(1 / 1001)


def test_duplicates_keep_first_rank() -> None:
    fused = weighted_rrf({"a": ["x", "x", "y"]}, {"a": 1.0}, k=60, normalize=False)
    assert {f.id: f.ranks["a"] for f in fused} == {"x": 1, "y": 3}


@pytest.mark.parametrize("bad", [{"a": -0.1}, {"a": 1.5}, {"a": math.nan}, {"a": 0.0}])
def test_bad_weights_are_rejected(bad: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        weighted_rrf({"a": ["x"]}, bad)


def test_missing_weight_and_bad_k() -> None:
    with pytest.raises(ValueError, match="no weight"):
        weighted_rrf({"a": ["x"]}, {})
    with pytest.raises(ValueError, match="k"):
        weighted_rrf({"a": ["x"]}, {"a": 1.0}, k=0)


def test_validate_weights_accepts_zero_for_some() -> None:
    validate_weights({"a": 0.0, "b": 1.0})


def test_score_evidence_scale() -> None:
    from hybridrag.pipeline.fusion import score_evidence

    # Top score -> 1, score at the reference rank (here the last) -> the floor, linear in between.
    assert score_evidence([10.0, 6.0, 2.0], reference_rank=100, floor=0.0) == [1.0, 0.5, 0.0]
    assert score_evidence([10.0, 6.0, 2.0], reference_rank=2, floor=0.0) == [1.0, 0.0, 0.0]
    e = score_evidence([10.0, 6.0, 2.0], reference_rank=100, floor=0.1)
    assert e == pytest.approx([1.0, 0.55, 0.1])
    assert score_evidence([3.0, 3.0]) == [1.0, 1.0]  # no spread: no evidence either way
    assert score_evidence([]) == []
    with pytest.raises(ValueError):
        score_evidence([1.0], floor=2.0)


def test_score_evidence_does_not_depend_on_depth_past_the_reference_rank() -> None:
    from hybridrag.pipeline.fusion import score_evidence

    scores = [100.0 - i for i in range(300)]
    assert (
        score_evidence(scores[:150], reference_rank=100) == score_evidence(scores, reference_rank=100)[:150]
    )


def test_score_weighted_rrf_hand_computed() -> None:
    rankings = {"keyword": ["a", "b"], "semantic": ["b", "a"]}
    weights = {"keyword": 0.5, "semantic": 0.5}
    # Keyword is far surer of "a" than semantic is of "b": a wins, where plain RRF ties them.
    plain = weighted_rrf(rankings, weights, k=1, normalize=False)
    assert plain[0].score == pytest.approx(plain[1].score)
    evidence = {"keyword": [1.0, 0.1], "semantic": [1.0, 0.9]}
    fused = weighted_rrf(rankings, weights, k=1, normalize=False, evidence=evidence)
    # a: 0.5*1/2 + 0.5*0.9/3 = 0.4 ; b: 0.5*0.1/3 + 0.5*1/2 = 0.2667
    assert [f.id for f in fused] == ["a", "b"]
    assert fused[0].score == pytest.approx(0.4) and fused[1].score == pytest.approx(0.25 + 0.05 / 3)
    # A ranking without evidence counts every position with factor 1.
    partial = weighted_rrf(rankings, weights, k=1, normalize=False, evidence={"keyword": [1.0, 0.1]})
    assert {f.id: f.score for f in partial} == pytest.approx({"a": 0.25 + 0.5 / 3, "b": 0.05 / 3 + 0.25})
    normalized = weighted_rrf(rankings, weights, k=60, evidence=evidence)
    assert all(0.0 <= f.score <= 1.0 for f in normalized)


def test_score_weighted_rrf_rejects_bad_evidence() -> None:
    rankings = {"keyword": ["a", "b"]}
    with pytest.raises(ValueError):
        weighted_rrf(rankings, {"keyword": 1.0}, evidence={"keyword": [1.0]})
    with pytest.raises(ValueError):
        weighted_rrf(rankings, {"keyword": 1.0}, evidence={"keyword": [1.0, 1.5]})
    with pytest.raises(ValueError):
        weighted_rrf(rankings, {"keyword": 1.0}, evidence={"semantic": [1.0, 1.0]})


def test_graph_passages_weigh_by_mass_and_its_entities_by_rank() -> None:
    from hybridrag.pipeline.fusion import EVIDENCE_FLOOR, list_evidence, score_evidence
    from hybridrag.pipeline.retrievers import Candidate, Retrieved

    def fusion_evidence(retrieved: Retrieved) -> list[float]:
        return list_evidence(retrieved.candidates, retrieved.ratio_scores)

    graph = Retrieved(
        [
            Candidate("c1", 0.2, 1.0),
            Candidate("c2", 0.1, 0.5),
            Candidate("e1", 0.9, 1.0, kind="entity"),
            Candidate("c3", 0.0, 0.0),
        ],
        4,
        ratio_scores=True,
    )
    assert fusion_evidence(graph) == pytest.approx(
        [1.0, EVIDENCE_FLOOR + (1 - EVIDENCE_FLOOR) * 0.5, 1.0, EVIDENCE_FLOOR]
    )
    keyword = Retrieved(
        [Candidate("c1", 12.0, 1.0), Candidate("c2", 6.0, 0.5), Candidate("c3", 3.0, 0.25)], 3
    )
    assert fusion_evidence(keyword) == score_evidence([12.0, 6.0, 3.0])
    # The passage with half the mass trails by more than its rank alone says.
    fused = weighted_rrf(
        {"graph": ["c1", "c2", "e1", "c3"]}, {"graph": 1.0}, evidence={"graph": fusion_evidence(graph)}
    )
    assert [f.id for f in fused] == ["c1", "e1", "c2", "c3"]


def test_each_strategy_fetches_a_hundred_or_down_to_the_page() -> None:
    """The depth does not follow the relevance cut: at 100k chunks lists deep enough to count every
    candidate over the default cut cost 1.3-1.6x the latency, for a `totalCount` no page needs."""
    from hybridrag.pipeline.ranking import MIN_DEPTH, fetch_depth
    from hybridrag.schemas.search import SearchRequest

    def depth(options: dict[str, int], min_relevance: float = 0.3, start: int = 0) -> int:
        body = {"text": "x", "options": options, "filters": {"minRelevance": min_relevance}}
        return fetch_depth(SearchRequest.model_validate(body), start)

    assert MIN_DEPTH == 100
    assert depth({"limit": 10}) == depth({"limit": 10}, 0.9) == depth({"limit": 10}, 0.0) == 100
    assert depth({"limit": 50, "offset": 200}) == 250
    assert depth({"limit": 10}, start=300) == 300  # a batch's merge asks for more


def test_a_candidate_one_list_could_not_see_is_scored_by_the_others_alone() -> None:
    """A passage newer than the graph (until a merge) is scored by the lists that could rank it, on the same
    scale: the graph's weight is left out of its sum and the rest scaled up to the whole weight."""
    rankings = {"keyword": ["new", "old"], "semantic": ["new", "old"], "graph": ["old"]}
    weights = {"keyword": 0.35, "semantic": 0.35, "graph": 0.3}
    plain = {f.id: f.score for f in weighted_rrf(rankings, weights, k=60, normalize=False)}
    assert plain["old"] > plain["new"]  # missing from the graph's list reads as "not relevant enough"
    fused = weighted_rrf(rankings, weights, k=60, normalize=False, unseen={"graph": {"new"}})
    scores = {f.id: f.score for f in fused}
    assert math.isclose(scores["new"], (0.35 / 61 + 0.35 / 61) / 0.7)
    assert math.isclose(scores["old"], plain["old"])
    assert fused[0].id == "new"
    # A list that ranked the candidate is never blind to it; one that is not fused cannot be named.
    same = weighted_rrf(rankings, weights, k=60, normalize=False, unseen={"graph": {"old"}})
    assert {f.id: f.score for f in same} == plain
    with pytest.raises(ValueError, match="not fused"):
        weighted_rrf(rankings, weights, unseen={"rerank": {"new"}})


@pytest.mark.parametrize("weighted", [True, False])
@pytest.mark.parametrize("tied", [True, False])
def test_the_deepest_passing_rank_is_where_a_deeper_fetch_stops_passing(weighted: bool, tied: bool) -> None:
    """One list fused alone, fetched 100 deep with every candidate over the cut: the deepest rank the cut can
    let through is how many a fetch 1,000 deep keeps (min-max evidence, tied scores, plain RRF)."""
    from hybridrag.pipeline.fusion import deepest_passing_rank, list_evidence
    from hybridrag.pipeline.retrievers import Candidate

    scores = [5.0] * 1000 if tied else [10.0 - i * 0.001 for i in range(1000)]
    everything = [Candidate(f"c{i}", s, 0.5) for i, s in enumerate(scores)]

    def fuse(candidates: list[Candidate]) -> list[float]:
        evidence = {"keyword": list_evidence(candidates, False)} if weighted else None
        ids = [c.id for c in candidates]
        return [f.score for f in weighted_rrf({"keyword": ids}, {"keyword": 1.0}, evidence=evidence)]

    fetched, deep = fuse(everything[:100]), fuse(everything)
    checked = 0
    # Cuts off the exact boundaries (61 / 0.1 - 60 is a whole rank, on which float rounding decides).
    for ratio in (0.0123, 0.0217, 0.0311, 0.1037, 0.2071, 0.3019):
        cut = fetched[0] * ratio
        if min(fetched) < cut:
            continue  # not every fetched candidate passed: the kept count is the total
        deepest = deepest_passing_rank(everything[:100], False, weighted, fetched[0], cut, 60)
        assert deepest is not None and min(deepest, 1000) == sum(1 for s in deep if s >= cut), ratio
        checked += 1
    assert checked >= 2
    assert deepest_passing_rank(everything[:100], False, weighted, fetched[0], 0.0, 60) is None  # no cut
    # A scale a deeper fetch would change (a list shorter than the reference rank) gives no bound.
    short = deepest_passing_rank(everything[:50], False, weighted, fetched[0], fetched[0] * 0.01, 60)
    assert (short is None) == weighted


def test_the_deepest_passing_rank_of_a_graph_list_bounds_its_deeper_entities() -> None:
    """A graph's list weighs passages by their mass and entities at 1: past a passage with little mass an
    entity can score more, so the rank found is a bound, never short of what a deeper fetch keeps."""
    from hybridrag.pipeline.fusion import deepest_passing_rank, list_evidence
    from hybridrag.pipeline.retrievers import Candidate

    everything = [
        Candidate(f"e{i}", 1.0, 1.0, kind="entity") if i % 7 == 6 else Candidate(f"c{i}", 0.0, 1.0 / (1 + i))
        for i in range(600)
    ]

    def fuse(candidates: list[Candidate]) -> list[float]:
        ids = [c.id for c in candidates]
        evidence = {"graph": list_evidence(candidates, True)}
        return [f.score for f in weighted_rrf({"graph": ids}, {"graph": 1.0}, evidence=evidence)]

    fetched, deep = fuse(everything[:100]), fuse(everything)
    cut = min(fetched)
    deepest = deepest_passing_rank(everything[:100], True, True, fuse(everything[:1])[0], cut, 60)
    assert deepest is not None and deepest >= sum(1 for s in deep if s >= cut) > 100


def test_regularized_pulls_each_passage_towards_its_neighbours_support() -> None:
    """(1 - share) x s + share x top x support / max support over the head; items without support there
    keep their score, deeper ones (1 - share) of it; ties by best rank then id; bad arguments rejected."""
    from hybridrag.pipeline.fusion import FusedItem, regularized

    fused = [
        FusedItem("a", 1.0, {"keyword": 1}),
        FusedItem("b", 0.9, {"keyword": 2}),
        FusedItem("entity:x", 0.85, {"graph": 1}),
        FusedItem("c", 0.8, {"semantic": 1}),
        FusedItem("d", 0.7, {"semantic": 2}),
    ]
    support = {"a": 0.0, "b": 0.1, "c": 0.4}
    got = regularized(fused, support, share=0.5, depth=4)
    scores = {f.id: f.score for f in got}
    assert scores == pytest.approx({"a": 0.5, "b": 0.45 + 0.125, "entity:x": 0.85, "c": 0.4 + 0.5, "d": 0.35})
    assert [f.id for f in got] == ["c", "entity:x", "b", "a", "d"]
    assert got[0].ranks == {"semantic": 1}  # the ranks stay as fused
    # Equal scores: the best rank reached, then the id.
    tied = regularized(
        [FusedItem("y", 0.5, {"k": 2}), FusedItem("x", 0.5, {"k": 2})], {"x": 1, "y": 1}, 0.3, 10
    )
    assert [f.id for f in tied] == ["x", "y"]
    # No support anywhere, or no share: the list as it is.
    assert regularized(fused, {"a": 0.0}, 0.5, 4) == fused
    assert regularized(fused, support, 0.0, 4) == fused
    with pytest.raises(ValueError, match="share"):
        regularized(fused, support, 1.5, 4)
    with pytest.raises(ValueError, match="depth"):
        regularized(fused, support, 0.5, 0)


def test_one_articles_paragraphs_stored_apart_give_each_other_no_support() -> None:
    """Different documents with one title are held apart; one document's chunks, untitled documents and
    ids that are no chunk (an entity) are not."""
    from types import SimpleNamespace

    import numpy as np
    import pyarrow as pa

    from hybridrag.pipeline.engine import _one_article_apart

    chunk_docs = {"a1": "A-1", "a2": "A-2", "a3": "A-2", "b": "B", "u1": "U-1", "u2": "U-2"}
    titles = {"A-1": "Kyoto", "A-2": "Kyoto", "B": "Nara", "U-1": None, "U-2": ""}
    order = list(chunk_docs)
    chunks = SimpleNamespace(
        rows=lambda ids: np.array([order.index(i) if i in chunk_docs else -1 for i in ids]),
        column=lambda name: pa.chunked_array([pa.array([chunk_docs[c] for c in order])]),
    )
    documents = SimpleNamespace(heads=lambda ids: {d: SimpleNamespace(title=titles[d]) for d in ids})
    ids = ["a1", "entity:kyoto", "a2", "a3", "b", "u1", "u2"]
    apart = _one_article_apart(SimpleNamespace(chunks=chunks, documents=documents), ids)
    held = {(ids[i], ids[j]) for i, j in zip(*np.nonzero(apart), strict=True)}
    assert held == {("a1", "a2"), ("a2", "a1"), ("a1", "a3"), ("a3", "a1")}
