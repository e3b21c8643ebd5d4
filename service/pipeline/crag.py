"""CRAG scoring (Corrective RAG's retrieval evaluator) without an LLM.

Each result's evidence score is the cross-encoder probability when a reranker ran, else its semantic
similarity. Two thresholds split it into correct / ambiguous / incorrect, as the CRAG paper's evaluator does;
the search as a whole is correct when any result is, incorrect when every result is, ambiguous otherwise.
needsWebSearch is true unless the verdict is correct, and refinedQuery keeps the query's key terms and
entities for the follow-up search.

Thresholds for the embedding models were chosen on dev data by `benchmarks/crag_calibration.py`
(results in benchmarks/results/crag-calibration-*.md): "correct" at >= 80% precision, "incorrect" at >= 90%.
No cross-encoder is on this machine, so the rerank thresholds are the probability midpoints, uncalibrated.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from hybridrag.schemas.search import CRAGScore, QueryClassification


@dataclass(frozen=True, slots=True)
class Thresholds:
    upper: float
    lower: float


# Pooled over HotpotQA-100 dev and SciFact train (minilm) / HotpotQA-100 dev and JaQuAD dev (e5).
THRESHOLDS: dict[str, Thresholds] = {
    "minilm": Thresholds(upper=0.787, lower=0.588),
    "e5-multilingual": Thresholds(upper=0.931, lower=0.923),
    "rerank": Thresholds(upper=0.7, lower=0.3),
}
FALLBACK = Thresholds(upper=0.8, lower=0.5)


def thresholds_for(source: str) -> Thresholds:
    return THRESHOLDS.get(source, FALLBACK)


def verdict(score: float, t: Thresholds, refined_query: str | None) -> CRAGScore:
    """One result's verdict; confidence grows with the distance from the ambiguous band."""
    if score >= t.upper:
        relevance = "correct"
        confidence = 0.5 + 0.5 * min(1.0, (score - t.upper) / max(1e-6, 1.0 - t.upper))
    elif score < t.lower:
        relevance = "incorrect"
        confidence = 0.5 + 0.5 * min(1.0, (t.lower - score) / max(1e-6, t.lower))
    else:
        relevance = "ambiguous"
        half = max(1e-6, (t.upper - t.lower) / 2)
        confidence = 1.0 - 0.5 * min(1.0, abs(score - (t.lower + half)) / half)
    return CRAGScore(
        relevance=relevance,  # type: ignore[arg-type]
        confidence=round(min(1.0, max(0.0, confidence)), 4),
        needs_web_search=relevance != "correct",
        refined_query=None if relevance == "correct" else refined_query,
    )


def overall(verdicts: Sequence[CRAGScore], refined_query: str | None) -> CRAGScore:
    """Correct if any result is correct; incorrect if all are (or there are none); ambiguous otherwise."""
    if any(v.relevance == "correct" for v in verdicts):
        best = max(v.confidence for v in verdicts if v.relevance == "correct")
        return CRAGScore(relevance="correct", confidence=best, needs_web_search=False, refined_query=None)
    if not verdicts or all(v.relevance == "incorrect" for v in verdicts):
        conf = min((v.confidence for v in verdicts), default=1.0)
        return CRAGScore(
            relevance="incorrect", confidence=conf, needs_web_search=True, refined_query=refined_query
        )
    conf = max(v.confidence for v in verdicts if v.relevance == "ambiguous")
    return CRAGScore(
        relevance="ambiguous", confidence=conf, needs_web_search=True, refined_query=refined_query
    )


def refined_query(classification: QueryClassification) -> str:
    """The query's key terms, then its entities not already among them."""
    key = (
        classification.expanded_queries[0]
        if classification.expanded_queries
        else classification.original_query
    )
    extra = [e for e in classification.extracted_entities if e not in key]
    return " ".join([key, *extra]).strip()
