"""An absolute relevance for every result: what `score`, `relevance.combined` and `minRelevance` mean.

The fused score (weighted RRF) orders results but says nothing absolute: a query of random words gets a
first result at 1.0 like any other. Here a small logistic model estimates, from what the retrievers already
know about the query as a whole, the probability that the query asks about something this corpus holds:

* keyword `coverage`: the best BM25 score over the query's whole ceiling (the terms the corpus lacks
  count, at the idf of a word in no chunk);
* semantic `top`: the best cosine similarity;
* `agreement`: how many of the keyword list's first ten the semantic list's first ten share.

Features that fitted the dev sets a little better but follow the corpus' size were left out: the share of
the query in terms the corpus lacks, the best cosine's gap over rank 100 and the first passages' mutual
similarity all call ordinary questions junk on a corpus of a dozen documents (benchmarks/docs/relevance.md,
"Relevance").

Fitted by `hybridrag bench relevance --fit` (benchmarks/relevance.py) on the dev sets' queries against
their own index (positive) and against the other dev sets' indexes and strings of random words
(negative), at even prior odds; the coefficients ship in `relevance_model.json`, one set per embedding
model and per evidence available (a keyword-only search has no cosine), and a keyword-only set for any
other model. A result's relevance is that probability times its fused score relative to the first
result's, raised to `decay`: the ranking stays the fused order, the first result carries the calibrated
probability, and `minRelevance` (default 0.3) cuts by it, so an off-topic query comes back empty. A
`global` query asks about the collection as a whole and is not judged (its scores stay relative).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from hybridrag.pipeline.retrievers import EVIDENCE_DEPTH, Retrieved

MODEL_FILE = Path(__file__).with_name("relevance_model.json")
AGREEMENT_DEPTH = EVIDENCE_DEPTH


def query_evidence(retrieved: Mapping[str, Retrieved]) -> dict[str, float]:
    """The model's inputs from a search's retrieved lists (the keyword and semantic lists' evidence)."""
    features: dict[str, float] = {}
    keyword = retrieved.get("keyword")
    semantic = retrieved.get("semantic")
    if keyword is not None and keyword.evidence:
        features["coverage"] = keyword.evidence["coverage"]
    if semantic is not None and semantic.evidence:
        features["top"] = semantic.evidence["top"]
    if keyword is not None and semantic is not None and keyword.evidence and semantic.evidence:
        first = {c.id for c in keyword.candidates[:AGREEMENT_DEPTH]}
        shared = sum(1 for c in semantic.candidates[:AGREEMENT_DEPTH] if c.id in first)
        features["agreement"] = shared / AGREEMENT_DEPTH
    return features


@dataclass(frozen=True, slots=True)
class Logistic:
    """p = sigmoid(intercept + sum of coefficient * feature), over named features."""

    intercept: float
    coefficients: Mapping[str, float]

    def probability(self, features: Mapping[str, float]) -> float:
        z = self.intercept + sum(w * features[name] for name, w in self.coefficients.items())
        return 1.0 / (1.0 + math.exp(-max(-60.0, min(60.0, z))))


@dataclass(frozen=True, slots=True)
class RelevanceModel:
    """Per embedding model, a logistic model per set of available evidence; `decay` shapes the results
    after the first."""

    models: Mapping[str, Mapping[str, Logistic]]  # embedding model -> evidence kind -> model
    decay: float

    @classmethod
    def load(cls, path: Path = MODEL_FILE) -> RelevanceModel:
        data = json.loads(path.read_text("utf-8"))
        models = {
            name: {
                kind: Logistic(float(m["intercept"]), {k: float(v) for k, v in m["coefficients"].items()})
                for kind, m in kinds.items()
            }
            for name, kinds in data["models"].items()
        }
        return cls(models, float(data["decay"]))

    def probability(self, embedding_model: str, features: Mapping[str, float]) -> float | None:
        """P(the search found what the query asks for); None when no model fits the evidence (a graph-only
        index, or an embedding model with no fitted coefficients and no keyword evidence)."""
        kinds = self.models.get(embedding_model) or self.models.get("*", {})
        for kind, model in kinds.items():
            if all(name in features for name in model.coefficients) and _kind_matches(kind, features):
                return model.probability(features)
        keyword_only = self.models.get("*", {}).get("keyword")
        if keyword_only is not None and all(n in features for n in keyword_only.coefficients):
            return keyword_only.probability(features)
        return None

    def scores(self, probability: float, fused: Sequence[float], top: float) -> list[float]:
        """Each result's relevance: `probability` times its fused score over the first result's (`top`),
        to the power `decay`."""
        if top <= 0:
            return [0.0] * len(fused)
        return [probability * (max(0.0, f) / top) ** self.decay for f in fused]

    def threshold(self, probability: float, top: float, min_relevance: float) -> float:
        """The fused score a result needs for a relevance of at least `min_relevance` (inf: none can)."""
        if min_relevance <= 0:
            return 0.0
        if probability <= 0 or min_relevance > probability:
            return math.inf
        return top * (min_relevance / probability) ** (1.0 / self.decay)


def _kind_matches(kind: str, features: Mapping[str, float]) -> bool:
    """ "full": keyword and semantic evidence; "keyword" / "semantic": that one alone."""
    has_keyword, has_semantic = "coverage" in features, "top" in features
    return {
        "full": has_keyword and has_semantic,
        "keyword": has_keyword and not has_semantic,
        "semantic": has_semantic and not has_keyword,
    }.get(kind, False)
