"""Maximal Marginal Relevance (Carbonell & Goldstein, 1998): a pure function of relevances and similarities.

    next = argmax over unpicked i of  lambda * rel(i) - (1 - lambda) * max over picked j of sim(i, j)

Ties go to the earlier candidate, so the order is deterministic.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def mmr(
    relevance: Sequence[float], similarity: np.ndarray, limit: int, lam: float
) -> list[tuple[int, float]]:
    """Pick up to `limit` candidate indexes; returns (index, MMR score at the time it was picked)."""
    n = len(relevance)
    if similarity.shape != (n, n):
        raise ValueError(f"similarity must be {n}x{n}, got {similarity.shape}")
    if not 0.0 <= lam <= 1.0:
        raise ValueError(f"lambda must be in 0..1, got {lam}")
    rel = np.asarray(relevance, dtype=np.float64)
    penalty = np.zeros(n)  # max similarity to anything picked so far
    free = np.ones(n, dtype=bool)
    picked: list[tuple[int, float]] = []
    for _ in range(min(limit, n)):
        scores = np.where(free, lam * rel - (1.0 - lam) * penalty, -np.inf)
        best = int(np.argmax(scores))  # argmax returns the first of equal maxima
        picked.append((best, float(scores[best])))
        free[best] = False
        penalty = np.maximum(penalty, similarity[best])
    return picked


def cosine_matrix(vectors: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    unit = vectors / np.where(norms > 0, norms, 1.0)
    return np.clip(unit @ unit.T, -1.0, 1.0)


def jaccard_matrix(token_sets: Sequence[set[str]]) -> np.ndarray:
    """Word-overlap similarity, used when the index has no embeddings."""
    n = len(token_sets)
    out = np.eye(n)
    for i in range(n):
        for j in range(i + 1, n):
            a, b = token_sets[i], token_sets[j]
            union = len(a | b)
            out[i, j] = out[j, i] = len(a & b) / union if union else 0.0
    return out
