"""Merging the answers of a batch: deduplicate by document (or chunk), then diversify with MMR."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from hybridrag.pipeline.loaded_index import LoadedIndex
from hybridrag.pipeline.mmr import cosine_matrix, jaccard_matrix, mmr
from hybridrag.schemas.batch import BatchMerge, MergedHit
from hybridrag.schemas.search import SearchResult, SearchResultItem

# MMR is quadratic in the pool; the best few hundred distinct hits are plenty to diversify a page from.
MAX_POOL = 400


@dataclass(slots=True)
class _Group:
    key: str
    doc_id: str | None
    item: SearchResultItem
    queries: list[int] = field(default_factory=list)


def merge_results(
    index: LoadedIndex, results: Sequence[SearchResult | None], merge: BatchMerge
) -> list[MergedHit]:
    """One list over every sub-result: each key once (its best-scoring item), ordered by MMR."""
    groups: dict[str, _Group] = {}
    for qi, result in enumerate(results):
        if result is None:
            continue
        for item in result.results:
            chunk = index.chunks.get(item.id) if item.type == "chunk" else None
            doc_id = chunk.doc_id if chunk is not None else None
            key = doc_id if merge.dedupe_by == "document" and doc_id is not None else item.id
            group = groups.get(key)
            if group is None:
                groups[key] = _Group(key, doc_id, item, [qi])
                continue
            if qi not in group.queries:
                group.queries.append(qi)
            if item.score > group.item.score:
                group.item = item
    pool = sorted(groups.values(), key=lambda g: (-g.item.score, g.key))[:MAX_POOL]
    if not pool:
        return []
    picked = mmr([g.item.score for g in pool], _similarity(index, pool), merge.limit, merge.mmr_lambda)
    return [
        MergedHit(
            key=pool[i].key,
            doc_id=pool[i].doc_id,
            item=pool[i].item,
            query_indexes=pool[i].queries,
            relevance=pool[i].item.score,
            mmr_score=round(score, 6),
        )
        for i, score in picked
    ]


def _similarity(index: LoadedIndex, pool: list[_Group]) -> np.ndarray:
    """Cosine of the chunks' stored embeddings when the index has them, else word overlap (Jaccard)."""
    chunk_ids = [g.item.id for g in pool if g.item.type == "chunk"]
    if index.vectors is not None and chunk_ids:
        stored = index.vectors.vectors(chunk_ids)
        if len(stored) == len(chunk_ids):
            dim = next(iter(stored.values())).shape[0]
            matrix = np.zeros((len(pool), dim), dtype=np.float32)
            for row, g in enumerate(pool):
                if g.item.type == "chunk":
                    matrix[row] = stored[g.item.id]
            sim = cosine_matrix(matrix)
            np.fill_diagonal(sim, 1.0)  # graph items (zero rows) are still identical to themselves
            return sim
    tokens = [set(index.keyword.query_terms(g.item.content.text)[0]) for g in pool]
    return jaccard_matrix(tokens)
