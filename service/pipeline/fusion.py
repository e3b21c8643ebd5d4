"""Weighted Reciprocal Rank Fusion: a pure function of ranked lists, weights and k.

    rrf(d) = sum over strategies s of  w_s / (k + rank_s(d))          (ranks start at 1)

With `normalize=True` the sum is divided by the best attainable value, sum_s w_s / (k + 1), so a candidate
ranked first by every strategy scores 1.0 and every score lies in 0..1. Ties are broken by the best
(smallest) rank the candidate reached anywhere, then by its id, so the order is fully deterministic.

Score-weighted RRF (the service default) multiplies each term by the candidate's score evidence e_s(d) in
0..1 (see `score_evidence`):  w_s * e_s(d) / (k + rank_s(d)).  Plain RRF throws away how far ahead a
strategy's top hit is; on the dev sets that cost the hybrid its lead whenever one strategy was much surer
than the other (benchmarks/docs/quality.md has the measurements). Ranks, k, weights and the 0..1 range stay.

`unseen` names, per strategy, candidates that strategy could not have ranked (a passage written after the
graph was built, until a merge brings it in): such a candidate's sum runs over the strategies that could,
divided by their share of the weight, so being newer than one index costs it nothing but that
strategy's say (missing from a list otherwise means "not relevant enough").

`regularized` then lets the graph re-weigh the fused list itself: each passage's score is pulled towards the
scores of the passages it shares entities or concepts with (the hybrid's use of the graph beyond its own
list; benchmarks/docs/concepts.md, "Neighbours' support").
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

DEFAULT_K = 60
REFERENCE_RANK = 100  # the evidence scale runs from a list's top score down to its score at this rank
EVIDENCE_FLOOR = 0.1  # every retrieved candidate keeps some say, even past the reference rank
# `regularized`: the share of a passage's fused score its neighbours' support takes where the graph's list
# has no weight (the search scales it by 1 - the graph's share of the weights, and gives none where that
# share is GRAPH_LED or more), over the fused list's first SUPPORT_DEPTH items (benchmarks/README.md,
# "Constants").
SUPPORT_SHARE = 0.2
SUPPORT_DEPTH = 100
GRAPH_LED = 0.5


@dataclass(frozen=True, slots=True)
class FusedItem:
    id: str
    score: float
    ranks: dict[str, int] = field(default_factory=dict)


def validate_weights(weights: Mapping[str, float]) -> None:
    for name, w in weights.items():
        if not (isinstance(w, (int, float)) and math.isfinite(w) and 0.0 <= w <= 1.0):
            raise ValueError(f"weight for {name!r} must be a finite number in 0..1, got {w!r}")
    if weights and sum(weights.values()) <= 0:
        raise ValueError("at least one fused strategy needs a positive weight")


def score_evidence(
    scores: Sequence[float], reference_rank: int = REFERENCE_RANK, floor: float = EVIDENCE_FLOOR
) -> list[float]:
    """Per-candidate evidence in floor..1 from a strategy's raw scores (best first).

    Min-max between the top score and the score at `reference_rank` (or the last one in a shorter list),
    clipped at 0, then lifted onto floor..1. The scale does not depend on how deep the list was fetched
    beyond the reference rank, so deeper pages never reorder earlier ones.
    """
    if not scores:
        return []
    if not 0.0 <= floor <= 1.0:
        raise ValueError(f"evidence floor must be in 0..1, got {floor!r}")
    hi = float(scores[0])
    lo = float(scores[min(reference_rank, len(scores)) - 1])
    if not (math.isfinite(hi) and math.isfinite(lo)) or hi <= lo:
        return [1.0] * len(scores)
    span = hi - lo
    return [floor + (1.0 - floor) * min(1.0, max(0.0, (float(v) - lo) / span)) for v in scores]


def weighted_rrf(
    rankings: Mapping[str, Sequence[str]],
    weights: Mapping[str, float],
    k: int = DEFAULT_K,
    normalize: bool = True,
    evidence: Mapping[str, Sequence[float]] | None = None,
    unseen: Mapping[str, Collection[str]] | None = None,
) -> list[FusedItem]:
    """Fuse ranked id lists (best first). Every ranking must have a weight; duplicates keep their first rank.

    `evidence`, when given, holds for some rankings a 0..1 factor per position (score-weighted RRF); a
    ranking without one counts every position with factor 1. `unseen`: per ranking, ids it could not have
    ranked (see the module's docstring); an id a ranking holds is never unseen by it.
    """
    if not isinstance(k, int) or k < 1:
        raise ValueError(f"RRF k must be an integer >= 1, got {k!r}")
    missing = set(rankings) - set(weights)
    if missing:
        raise ValueError(f"no weight for ranking(s): {sorted(missing)}")
    used = {name: float(weights[name]) for name in rankings}
    validate_weights(used)
    if evidence is not None:
        for name, factors in evidence.items():
            ranked = rankings.get(name)
            if ranked is None or len(factors) != len(ranked):
                raise ValueError(f"evidence for {name!r} must have one factor per ranked item")
            if not all(0.0 <= f <= 1.0 for f in factors):
                raise ValueError(f"evidence for {name!r} must lie in 0..1")
    scores: dict[str, float] = {}
    ranks: dict[str, dict[str, int]] = {}
    best_rank: dict[str, int] = {}
    for name in sorted(rankings):
        w = used[name]
        per_rank = evidence.get(name) if evidence is not None else None
        for rank, item in enumerate(rankings[name], start=1):
            per = ranks.get(item)
            if per is None:
                ranks[item] = per = {}
                best_rank[item] = rank
            elif name in per:
                continue
            elif rank < best_rank[item]:
                best_rank[item] = rank
            per[name] = rank
            e = per_rank[rank - 1] if per_rank is not None else 1.0
            scores[item] = scores.get(item, 0.0) + w * e / (k + rank)
    total = sum(used.values())
    for name in unseen or {}:
        if name not in used:
            raise ValueError(f"unseen ids for {name!r}, which is not fused")
    if unseen and total > 0:
        for item in scores:
            blind = sum(used[n] for n, ids in unseen.items() if item in ids and n not in ranks[item])
            if 0 < blind < total:
                scores[item] *= total / (total - blind)
    best = total / (k + 1)
    divisor = best if normalize and best > 0 else 1.0
    # Sort plain tuples, then build the items: a key function per item was most of the fusion's time.
    order = sorted((-score, best_rank[item], item) for item, score in scores.items())
    return [FusedItem(item, -neg / divisor, ranks[item]) for neg, _rank, item in order]


def regularized(
    fused: Sequence[FusedItem], support: Mapping[str, float], share: float, depth: int
) -> list[FusedItem]:
    """The fused list with each passage's score pulled towards its neighbours' (score regularisation:
    Diaz, 2005, the cluster hypothesis on a graph of the candidates).

    `support` holds, for the passages among the first `depth` items that can have neighbours, how much of
    the others' fused score they reach (the graph's two steps, `graph_walk.neighbour_support`). Scaled so
    the best-supported reaches the best of those scores, it takes `share` of each one's score:
    (1 - share) x s + share x top x support / max support. Items among the first `depth` without an entry
    (an entity, a report, a passage newer than the graph) keep their score; deeper ones keep (1 - share) of
    it, so none rises above a passage that was ahead of it and got no support. Scores stay in 0..top. Ties:
    the best rank reached anywhere, then the id, as `weighted_rrf`. No support anywhere: the list as it is.
    """
    if not 0.0 <= share <= 1.0:
        raise ValueError(f"support share must be in 0..1, got {share!r}")
    if depth < 1:
        raise ValueError(f"support depth must be >= 1, got {depth!r}")
    head = fused[:depth]
    held = [f for f in head if f.id in support]
    most = max((support[f.id] for f in held), default=0.0)
    if most <= 0 or share == 0:
        return list(fused)
    top = max(f.score for f in held)
    scores = [
        (1.0 - share) * f.score + share * top * support[f.id] / most if f.id in support else f.score
        for f in head
    ] + [(1.0 - share) * f.score for f in fused[depth:]]
    order = sorted(
        (-score, min(f.ranks.values(), default=0), f.id, i)
        for i, (f, score) in enumerate(zip(fused, scores, strict=True))
    )
    return [FusedItem(fused[i].id, -neg, fused[i].ranks) for neg, _rank, _id, i in order]


class Scored(Protocol):
    """A retriever's candidate as the fusion sees it: raw score, 0..1 score and kind."""

    @property
    def raw_score(self) -> float: ...

    @property
    def score(self) -> float: ...

    @property
    def kind(self) -> str: ...


def list_evidence(candidates: Sequence[Scored], ratio_scores: bool) -> list[float]:
    """Score evidence of one retriever's list for score-weighted RRF.

    Keyword and semantic scores are min-max scaled against the list's own depth (`score_evidence`). A list
    of `ratio_scores` (the graph's passages, PageRank mass over the top passage's: a natural zero, half the
    mass counts half) is weighed by those ratios; its entities and community reports, on other scales,
    keep rank-only terms. Measured against rank-only graph terms on the dev sets: benchmarks/docs/quality.md.
    """
    if not ratio_scores:
        return score_evidence([c.raw_score for c in candidates])
    return [
        EVIDENCE_FLOOR + (1.0 - EVIDENCE_FLOOR) * min(1.0, max(0.0, c.score)) if c.kind == "chunk" else 1.0
        for c in candidates
    ]


def deepest_passing_rank(
    candidates: Sequence[Scored], ratio_scores: bool, weighted: bool, first_score: float, cut: float, k: int
) -> int | None:
    """How deep one strategy's list, fused alone, passes a cut on the fused score (`cut`) beyond the
    candidates fetched: the deepest rank whose RRF term can still reach it. `first_score`: the fused score of
    the list's first candidate. None: no bound (no cut, or a list shorter than the evidence's reference
    rank, whose scale a deeper fetch would change).

    The term at rank r is first_score * (e_r / e_1) * (k + 1) / (k + r), e being the score evidence (1 under
    plain RRF). Past the reference rank a min-max scaled list's every deeper score lies at or below the
    scale's low end, so e_r is the last candidate's evidence exactly; a list of `ratio_scores` may hold an
    entity or a report deeper, whose evidence is 1, the bound used.
    """
    if cut <= 0 or not candidates:
        return None
    n = len(candidates)
    if not math.isfinite(cut):
        return n
    first = last = 1.0
    if weighted:
        if not ratio_scores and n < REFERENCE_RANK:
            return None
        evidence = list_evidence(candidates, ratio_scores)
        first, last = evidence[0], (1.0 if ratio_scores else evidence[-1])
        if first <= 0:  # a first candidate without weight (an evidence floor of 0) bounds nothing
            return None
    return max(n, math.floor(first_score * (last / first) * (k + 1) / cut - k))
