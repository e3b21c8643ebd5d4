"""Ranking helpers of a search: fetch depth, the query vector, filters, and the retrievers run concurrently.

Pure functions over a pinned `LoadedIndex`; `SearchEngine.rank` strings them together. Never imports the
HTTP layer.
"""

from __future__ import annotations

import logging
import time
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from hybridrag.indexing.stores.filters import ChunkFilters, naive_utc
from hybridrag.pipeline.fusion import FusedItem, max_unseen_score
from hybridrag.pipeline.graph_retriever import PASSAGE_SEEDS, SEEDERS
from hybridrag.pipeline.loaded_index import LoadedIndex
from hybridrag.pipeline.retrievers import RetrievalQuery, Retrieved
from hybridrag.schemas.base import QueryTypeName
from hybridrag.schemas.search import QueryClassification, SearchRequest, SearchWeights, StageNote

log = logging.getLogger("hybridrag.engine")

STRATEGIES = ("keyword", "semantic", "graph")
MIN_DEPTH = 100
MAX_DEPTH = 1000


class InvalidSearch(ValueError):
    """A request that is valid against the schema but not against this index (e.g. embedding dimension)."""

    def __init__(self, path: str, code: str, ctx: dict[str, Any]) -> None:
        super().__init__(f"{path}: {code}")
        self.path, self.code, self.ctx = path, code, ctx


@dataclass(slots=True)
class Ranking:
    """The outcome of a search before paging: fused candidates that passed the relevance cut."""

    index: LoadedIndex
    classification: QueryClassification
    query_type: QueryTypeName
    weights: SearchWeights
    notes: list[StageNote]
    retrieved: dict[str, Retrieved]
    timings: dict[str, float]
    kept: list[FusedItem]
    total: int


def query_vector(request: SearchRequest, index: LoadedIndex) -> np.ndarray | None:
    if request.embedding is None:
        return None
    semantic = index.retrievers.get("semantic")
    expected = getattr(semantic, "dim", None)
    if expected is None:
        return None
    if len(request.embedding) != expected:
        raise InvalidSearch(
            "embedding", "embedding_dimension", {"expected": expected, "actual": len(request.embedding)}
        )
    return np.asarray(request.embedding, dtype=np.float32)


def fetch_depth(request: SearchRequest, weights: dict[str, float], k: int, normalize: bool) -> int:
    """How deep each strategy fetches: enough for the page, and enough that the relevance cut is exact."""
    need = request.options.offset + request.options.limit
    depth = max(MIN_DEPTH, need)
    min_rel = request.filters.min_relevance
    if weights and min_rel > 0:
        while depth < MAX_DEPTH and max_unseen_score(weights, depth, k, normalize) >= min_rel:
            depth = min(MAX_DEPTH, depth * 2)
    return min(depth, MAX_DEPTH) if need <= MAX_DEPTH else need


def run_retrievers(
    pool: ThreadPoolExecutor,
    index: LoadedIndex,
    active: list[str],
    query: RetrievalQuery,
    depth: int,
    deadline: float,
    notes: list[StageNote],
) -> tuple[dict[str, Retrieved], dict[str, float]]:
    timings: dict[str, float] = {}

    def timed(name: str, query: RetrievalQuery) -> Retrieved:
        t0 = time.perf_counter()
        try:
            return index.retrievers[name].retrieve(query, depth)
        finally:
            timings[name] = (time.perf_counter() - t0) * 1000

    # The graph seeds its walk with the other retrievers' top passages, so it starts when they are done
    # (and searches for its own seeds only when none of them is running).
    seeders = [name for name in SEEDERS if name in active] if "graph" in active else []
    futures: dict[str, Future[Retrieved]] = {
        name: pool.submit(timed, name, query) for name in active if not (seeders and name == "graph")
    }
    out: dict[str, Retrieved] = {}

    def collect(name: str, fut: Future[Retrieved]) -> None:
        try:
            out[name] = fut.result(timeout=max(0.0, deadline - time.perf_counter()))
        except FutureTimeout:
            fut.cancel()
            notes.append(StageNote(stage=name, status="skipped", reason="time budget exceeded"))
        except Exception as exc:  # one failing retriever must not fail the whole search
            log.exception("retriever %s failed", name)
            notes.append(StageNote(stage=name, status="failed", reason=f"{type(exc).__name__}: {exc}"))

    if seeders:
        for name in seeders:
            collect(name, futures.pop(name))
        seeds = {
            name: tuple((c.id, c.raw_score) for c in out[name].candidates[:PASSAGE_SEEDS])
            for name in seeders
            if name in out
        }
        futures["graph"] = pool.submit(timed, "graph", replace(query, seed_passages=seeds or None))
    for name, fut in futures.items():
        collect(name, fut)
    return {name: out[name] for name in active if name in out}, timings


def chunk_filters(request: SearchRequest) -> ChunkFilters:
    f = request.filters
    date_range = f.date_range
    return ChunkFilters(
        file_ids=f.file_ids,
        entity_types=f.entity_types,
        date_start=naive_utc(date_range.start) if date_range else None,
        date_end=naive_utc(date_range.end) if date_range else None,
    )
