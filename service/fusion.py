"""Weighted Reciprocal Rank Fusion: a pure function of ranked lists, weights and k.

    rrf(d) = sum over strategies s of  w_s / (k + rank_s(d))          (ranks start at 1)

With `normalize=True` the sum is divided by the best attainable value, sum_s w_s / (k + 1), so a candidate
ranked first by every strategy scores 1.0 and every score lies in 0..1. Ties are broken by the best
(smallest) rank the candidate reached anywhere, then by its id, so the order is fully deterministic.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

DEFAULT_K = 60


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


def weighted_rrf(
    rankings: Mapping[str, Sequence[str]],
    weights: Mapping[str, float],
    k: int = DEFAULT_K,
    normalize: bool = True,
) -> list[FusedItem]:
    """Fuse ranked id lists (best first). Every ranking must have a weight; duplicates keep their first rank."""
    if not isinstance(k, int) or k < 1:
        raise ValueError(f"RRF k must be an integer >= 1, got {k!r}")
    missing = set(rankings) - set(weights)
    if missing:
        raise ValueError(f"no weight for ranking(s): {sorted(missing)}")
    used = {name: float(weights[name]) for name in rankings}
    validate_weights(used)
    scores: dict[str, float] = {}
    ranks: dict[str, dict[str, int]] = {}
    for name in sorted(rankings):
        w = used[name]
        for rank, item in enumerate(rankings[name], start=1):
            per = ranks.setdefault(item, {})
            if name in per:
                continue
            per[name] = rank
            scores[item] = scores.get(item, 0.0) + w / (k + rank)
    best = sum(used.values()) / (k + 1)
    out = [
        FusedItem(item, (score / best if normalize and best > 0 else score), ranks[item])
        for item, score in scores.items()
    ]
    out.sort(key=lambda f: (-f.score, min(f.ranks.values()), f.id))
    return out


def max_unseen_score(
    weights: Mapping[str, float], depth: int, k: int = DEFAULT_K, normalize: bool = True
) -> float:
    """The highest fused score a candidate missing from every ranking (each `depth` long) could have.

    Used to pick a fetch depth that makes a minimum-relevance cut, and so `totalCount`, exact.
    """
    total = sum(weights.values())
    raw = total / (k + depth + 1)
    return raw / (total / (k + 1)) if normalize and total > 0 else raw
