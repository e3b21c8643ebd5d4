"""A retrieval provider for the deep-research orchestrator (deep-research-api.md).

The orchestrator sends several sub-queries per section, keys documents by `url || "providerId:docId"`,
records which sections each document served (`sectionHitMap`) and turns the final documents into evidence
records `e1, e2, ...` with `sectionHints`. This provider answers a section's sub-queries with one batch call
(run concurrently by the service, merged by document and diversified with MMR), and the two helpers below
are ports of the orchestrator's `computeCoverage` and `buildEvidences`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from hybridrag.client import HybridRagClient

MAX_SUBQUERIES = 10  # buildSectionSubqueries clips to 10


@dataclass(slots=True)
class ProviderDocument:
    """A document as the orchestrator sees it: `key` is `url || providerId:docId`, stable across calls."""

    id: str
    provider_id: str
    title: str
    content: str
    snippet: str
    url: str | None
    date: str | None
    score: float
    subqueries: list[str]
    section_hints: list[str] = field(default_factory=list)

    @property
    def key(self) -> str:
        return self.url or f"{self.provider_id}:{self.id}"


class HybridRagProvider:
    """`search(subqueries, section)` -> deduplicated, diversified documents for that section."""

    def __init__(
        self,
        client: HybridRagClient | None = None,
        provider_id: str = "hybridrag",
        per_query: int = 5,
        max_documents: int = 10,
        mmr_lambda: float = 0.7,
    ) -> None:
        self.client = client or HybridRagClient()  # HYBRIDRAG_URL / HYBRIDRAG_API_KEY, 15 s timeout
        self.id = provider_id
        self.per_query = per_query
        self.max_documents = max_documents
        self.mmr_lambda = mmr_lambda

    def search(
        self, subqueries: Sequence[str], section: str | None = None, **options: Any
    ) -> list[ProviderDocument]:
        unique = list(dict.fromkeys(q.strip() for q in subqueries if q.strip()))[:MAX_SUBQUERIES]
        if not unique:
            return []
        batch = self.client.search_batch(
            unique,
            merge={"limit": self.max_documents, "mmrLambda": self.mmr_lambda, "dedupeBy": "document"},
            limit=self.per_query,
            includeMetadata=True,
            **options,
        )
        docs = []
        for hit in batch.merged or []:
            meta = hit.item.metadata or {}
            docs.append(
                ProviderDocument(
                    id=hit.doc_id or hit.item.id,
                    provider_id=self.id,
                    title=str(meta.get("title") or hit.item.content.text[:80]),
                    content=hit.item.content.text,
                    snippet=hit.item.content.summary or hit.item.content.text[:400],
                    url=meta.get("url"),
                    date=meta.get("date"),
                    score=hit.relevance,
                    subqueries=[unique[i] for i in hit.query_indexes],
                    section_hints=[section] if section else [],
                )
            )
        return docs


def compute_coverage(
    section_keys: Sequence[str], targets: Mapping[str, int], section_hit_map: Mapping[str, Iterable[str]]
) -> tuple[dict[str, int], dict[str, int]]:
    """`computeCoverage`: documents per section so far, and how many each section still misses."""
    current = dict.fromkeys(section_keys, 0)
    for sections in section_hit_map.values():
        for section in sections:
            if section in current:
                current[section] += 1
    missing = {s: max(0, targets.get(s, 0) - current[s]) for s in section_keys}
    return current, missing


def build_evidences(
    documents: Iterable[ProviderDocument], section_hit_map: Mapping[str, Iterable[str]]
) -> list[dict[str, Any]]:
    """`buildEvidences`: one record per document key (first wins), ids e1, e2, ..., with section hints."""
    seen: dict[str, dict[str, Any]] = {}
    for doc in documents:
        if doc.key in seen:
            continue
        record: dict[str, Any] = {
            "id": f"e{len(seen) + 1}",
            "key": doc.key,
            "providerId": doc.provider_id,
            "docId": doc.id,
            "title": doc.title,
            "url": doc.url,
            "date": doc.date,
            "excerpt": doc.snippet or doc.content[:400],
            "score": doc.score,
        }
        hints = section_hit_map.get(doc.key)
        if hints:
            record["sectionHints"] = sorted(set(hints))
        seen[doc.key] = record
    return list(seen.values())
