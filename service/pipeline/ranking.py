"""Ranking helpers of a search: fetch depth, the query vector, filters, and the retrievers run concurrently.

Pure functions over a pinned `LoadedIndex`; `SearchEngine.rank` strings them together. Never imports the
HTTP layer.
"""

from __future__ import annotations

import logging
import time
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field, replace

import numpy as np

from hybridrag.indexing.stores.filters import ChunkFilters, naive_utc
from hybridrag.pipeline.errors import InvalidSearch
from hybridrag.pipeline.fusion import FusedItem
from hybridrag.pipeline.graph_retriever import PASSAGE_SEEDS, SEEDERS
from hybridrag.pipeline.loaded_index import LoadedIndex
from hybridrag.pipeline.retrievers import EVIDENCE_DEPTH, RetrievalQuery, Retrieved
from hybridrag.schemas.base import QueryTypeName
from hybridrag.schemas.search import QueryClassification, SearchRequest, SearchWeights, StageNote

log = logging.getLogger("hybridrag.engine")

STRATEGIES = ("keyword", "semantic", "graph")
MIN_DEPTH = 100


@dataclass(slots=True)
class SearchPlan:
    """What a search runs (`SearchEngine._plan`): computed once, used by every retriever and the fusion."""

    index: LoadedIndex
    classification: QueryClassification
    weights: SearchWeights
    notes: list[StageNote]
    active: list[str]
    weight_map: dict[str, float]
    query: RetrievalQuery
    depth: int
    # The query's embedding while the encoder computes it (`query.vector` is None until then): what needs
    # no vector starts beside it (`run_retrievers`). None: `query.vector` is all there is.
    pending: Future[np.ndarray] | None = None


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
    kept: list[FusedItem]  # in fused order, each with its fused score
    total: int
    # The query-level evidence and the probability the relevance model gives it (None: no model fits),
    # and each kept candidate's relevance (`pipeline.relevance`): what `score` and `minRelevance` mean.
    evidence: dict[str, float] = field(default_factory=dict)
    probability: float | None = None
    relevance: dict[str, float] = field(default_factory=dict)
    query_terms: tuple[str, ...] = ()  # the query's keyword tokens (highlights match them)


#: The strategies that read the query's embedding: semantic, and the graph (its seed passages, entities
#: matched by meaning, community search). The others start before the embedding is ready.
READS_VECTOR = frozenset({"semantic", "graph"})


def query_vector(request: SearchRequest, index: LoadedIndex) -> np.ndarray | None:
    if request.embedding is None:
        return None
    expected = index.dim
    if expected is None:
        return None
    if len(request.embedding) != expected:
        raise InvalidSearch(
            "embedding", "embedding_dimension", {"expected": expected, "actual": len(request.embedding)}
        )
    return np.asarray(request.embedding, dtype=np.float32)


def fetch_depth(request: SearchRequest, start: int = 0) -> int:
    """How deep each strategy fetches: MIN_DEPTH, or the page's end when it lies deeper.

    Not deep enough to make `totalCount` exact whatever the cut: the absolute relevance falls slowly with the
    fused score, so on a large corpus nearly every candidate of an on-topic search passes the default
    cut, and counting them all took lists ~800 deep (1.3-1.6x the latency at 100k chunks,
    benchmarks/README.md, "Constants"). Where a strategy's list is full, `totalCount` counts what passed
    among these candidates; where one strategy alone answers and all of them passed, its matches down to the
    rank where the cut stops them (`engine._total`).
    """
    need = request.options.offset + request.options.limit
    return max(MIN_DEPTH, need, start)


def run_retrievers(
    pool: ThreadPoolExecutor,
    index: LoadedIndex,
    active: list[str],
    query: RetrievalQuery,
    depth: int,
    deadline: float,
    notes: list[StageNote],
    pending: Future[np.ndarray] | None = None,
) -> tuple[dict[str, Retrieved], dict[str, float], dict[str, Retrieved]]:
    """The active strategies' lists, their times in ms, and the lists of the graph's seeders that are not
    active themselves (searched all the same when the graph runs: they seed its walk, and their evidence
    tells how relevant the search is; they are not fused).

    `pending`: the query's embedding still being computed. The strategies that do not read it (keyword)
    start at once, beside the encoder; the others when it is ready. A failed encoding fails the search, as
    it did when the vector was computed first.
    """
    timings: dict[str, float] = {}

    def timed(name: str, query: RetrievalQuery, depth: int = depth) -> Retrieved:
        t0 = time.perf_counter()
        try:
            return index.retrievers[name].retrieve(query, depth)
        finally:
            timings[name] = (time.perf_counter() - t0) * 1000

    # The graph seeds its walk with the seeders' top passages, so it starts when they are done.
    seeders = [n for n in SEEDERS if n in index.retrievers] if "graph" in active else []
    if "semantic" in seeders and query.vector is None and pending is None:
        seeders.remove("semantic")
    depths = {name: depth for name in active if not (seeders and name == "graph")}
    depths.update({name: EVIDENCE_DEPTH for name in seeders if name not in depths})
    futures: dict[str, Future[Retrieved]] = {}
    for name, wanted in depths.items():
        if name not in READS_VECTOR:
            futures[name] = pool.submit(timed, name, query, wanted)
    if pending is not None and not READS_VECTOR.isdisjoint(depths):
        query = replace(query, vector=pending.result())
    for name, wanted in depths.items():
        if name in READS_VECTOR:
            futures[name] = pool.submit(timed, name, query, wanted)
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
    probes = {name: out[name] for name in seeders if name not in active and name in out}
    return {name: out[name] for name in active if name in out}, timings, probes


def chunk_filters(request: SearchRequest) -> ChunkFilters:
    f = request.filters
    date_range = f.date_range
    return ChunkFilters(
        file_ids=f.file_ids,
        entity_types=f.entity_types,
        date_start=naive_utc(date_range.start) if date_range else None,
        date_end=naive_utc(date_range.end) if date_range else None,
    )
