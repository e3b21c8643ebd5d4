"""The search engine: classify, retrieve concurrently, fuse, filter, page, explain.

`SearchEngine` is cheap to construct; `start()` loads the index and models once (warm-up) and only then
reports ready. CPU-heavy work happens in `search()`, which callers run off the event loop.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from indexing import store
from indexing.embedders import Embedder, ModelUnavailable, load_embedder
from indexing.filters import ChunkFilters, naive_utc
from schemas.base import SCHEMA_VERSION, QueryTypeName
from schemas.search import (
    CRAGScore,
    Highlight,
    HighlightOffset,
    QueryClassification,
    RelevanceScore,
    SearchQuery,
    SearchRequest,
    SearchResult,
    SearchResultContent,
    SearchResultItem,
    SearchResultSources,
    SearchStrategyMetrics,
    SearchWeights,
    StageNote,
    StrategyMetric,
)
from service import crag
from service.classifier import QueryClassifier
from service.fusion import FusedItem, max_unseen_score, score_evidence, weighted_rrf
from service.highlight import best_sentence, fragment, term_matches
from service.loaded_index import LoadedIndex, load_index
from service.rerank import RerankerPool, RerankerUnavailable
from service.retrievers import Candidate, RetrievalQuery, Retrieved, strategy_names
from service.settings import Settings

log = logging.getLogger("hybridrag.engine")

STRATEGIES = ("keyword", "semantic", "graph")
SCORED_STRATEGIES = ("keyword", "semantic")
MIN_DEPTH = 100
MAX_DEPTH = 1000
CONTEXT_CHARS = 300


class InvalidSearch(ValueError):
    """A request that is valid against the schema but not against this index (e.g. embedding dimension)."""

    def __init__(self, path: str, code: str, ctx: dict[str, Any]) -> None:
        super().__init__(f"{path}: {code}")
        self.path, self.code, self.ctx = path, code, ctx


class NotReady(RuntimeError):
    pass


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


@dataclass(slots=True)
class ComponentStatus:
    ready: bool
    detail: str
    required: bool = True


class SearchEngine:
    """Owns the loaded index, the models and the retriever thread pool."""

    def __init__(self, settings: Settings, embedder: Embedder | None = None) -> None:
        self.settings = settings
        self._embedder = embedder
        self._index: LoadedIndex | None = None
        self._reload_lock = threading.Lock()
        self._stop = threading.Event()
        self._failed_target: str | None = None
        self._rerankers = RerankerPool()
        self._pool = ThreadPoolExecutor(max_workers=settings.search_threads, thread_name_prefix="retriever")
        self.components: dict[str, ComponentStatus] = {
            "index": ComponentStatus(False, "not loaded"),
            "embedder": ComponentStatus(False, "not loaded"),
        }

    # -- lifecycle
    def start(self) -> None:
        """Load models and the index; failures are recorded per component, never raised."""
        if self.settings.blas_threads:
            from threadpoolctl import threadpool_limits

            # Process-wide by nature (BLAS has one pool); measured: semantic search at 100k chunks 73 -> 47 ms.
            threadpool_limits(limits=self.settings.blas_threads, user_api="blas")
        if self.settings.load_embedder and self._embedder is None:
            try:
                self._embedder = load_embedder(self.settings.embedding_model)
                self._embedder.embed_queries(["warm-up"])
                self.components["embedder"] = ComponentStatus(True, f"{self.settings.embedding_model} loaded")
            except (ModelUnavailable, OSError, ValueError) as exc:
                self.components["embedder"] = ComponentStatus(False, str(exc))
        elif self._embedder is not None:
            self.components["embedder"] = ComponentStatus(True, f"{self._embedder.name} loaded")
        else:
            self.components["embedder"] = ComponentStatus(True, "disabled by configuration")
        try:
            self._rerankers.get(self.settings.rerank_model)
            self.components["reranker"] = ComponentStatus(True, f"{self.settings.rerank_model} loaded", False)
        except RerankerUnavailable as exc:
            # Optional: searches still work, and say in their notes that rerank was skipped and why.
            self.components["reranker"] = ComponentStatus(False, str(exc), False)
        self.reload()

    def reload(self) -> bool:
        """(Re)open the current index version; the previous one keeps serving if this fails.

        Searches in flight keep the version they started with (they hold a reference to it), so a switch
        never mixes versions within one response; the old version's files are released with its last search.
        """
        with self._reload_lock:
            try:
                loaded = load_index(self.settings.index_dir, self.settings.embedding_model, self._embedder)
            except store.IndexUnavailable as exc:
                log.error("index unavailable: %s", exc)
                self._failed_target = store.current_target(self.settings.index_dir)
                if self._index is None:
                    self.components["index"] = ComponentStatus(False, str(exc))
                return False
            self._failed_target = None
            self._index = loaded
        self.components["index"] = ComponentStatus(
            True,
            f"version {loaded.version_name}: {len(loaded.documents)} documents, {len(loaded.chunks)} chunks",
        )
        log.info("index loaded", extra={"index_version": loaded.version_name})
        return True

    def reload_if_switched(self) -> bool:
        """Reload when `current` points at another version than the one served (and not one that failed)."""
        target = store.current_target(self.settings.index_dir)
        served = self._index.version_name if self._index is not None else None
        if target is None or target == served or target == self._failed_target:
            return False
        return self.reload()

    def watch(self, interval_s: float) -> None:
        """Poll `current` every `interval_s` seconds in a daemon thread until `close()`."""

        def loop() -> None:
            while not self._stop.wait(interval_s):
                try:
                    self.reload_if_switched()
                except Exception:  # the watcher must outlive any one bad version
                    log.exception("index reload failed")

        threading.Thread(target=loop, name="index-watch", daemon=True).start()

    def close(self) -> None:
        self._stop.set()
        self._pool.shutdown(wait=False, cancel_futures=True)

    @property
    def ready(self) -> bool:
        return all(c.ready for c in self.components.values() if c.required)

    @property
    def current_index(self) -> LoadedIndex | None:
        return self._index

    @property
    def index(self) -> LoadedIndex:
        index = self._index
        if index is None:
            raise NotReady(self.components["index"].detail)
        return index

    # -- search
    def rank(
        self,
        request: SearchRequest,
        deadline: float | None = None,
        min_depth: int = 0,
        index: LoadedIndex | None = None,
    ) -> Ranking:
        """Classify, retrieve concurrently, fuse and cut: everything of a search but the page and its items.

        Benchmarks call this directly so that they measure exactly what the service does. `index` pins a
        loaded version (a batch answers every sub-query from one version even if a swap happens meanwhile).
        """
        if deadline is None:
            deadline = time.perf_counter() + self.settings.search_budget_s
        index = index or self.index
        classification = QueryClassifier(index.analyzer).classify(request.text)
        weights = (
            request.options.weights
            if "weights" in request.options.model_fields_set
            else classification.suggested_weights
        )
        notes: list[StageNote] = []
        active = []
        for name in strategy_names(request.options.strategies):
            if name in index.retrievers:
                active.append(name)
            else:
                reason = index.unavailable.get(name, "not available")
                notes.append(StageNote(stage=name, status="skipped", reason=reason))
        vector = self._query_vector(request, index)
        weight_map = {name: getattr(weights, name) for name in active}
        if active and sum(weight_map.values()) <= 0:
            # Every running strategy has weight 0: rank by them equally rather than return nothing.
            weight_map = dict.fromkeys(active, 1.0)
            notes.append(StageNote(stage="fusion", status="degraded", reason="all active weights were 0"))
        k = request.rrf_config.k
        normalize = request.rrf_config.normalize_scores
        depth = max(min_depth, self._depth(request, weight_map, k, normalize))
        qtype = request.type or classification.type
        if (
            vector is None
            and self._embedder is not None
            and ("semantic" in active or ("graph" in active and qtype in ("global", "hybrid")))
        ):
            # One query embedding serves the semantic retriever and the graph's community search.
            vector = self._embedder.embed_queries([request.text])[0]
        query = RetrievalQuery(
            request.text,
            _chunk_filters(request),
            vector,
            query_type=qtype,
            entities=tuple(classification.extracted_entities),
        )
        retrieved, timings = self._run_retrievers(index, active, query, depth, deadline, notes)
        rankings = {name: [c.id for c in r.candidates] for name, r in retrieved.items()}
        evidence = None
        if (request.fusion or self.settings.fusion) == "score-rrf":
            # Keyword and semantic lists are ranked by one score each; the graph's list interleaves chunks,
            # entities and communities on different scales by design, so its terms stay rank-only.
            evidence = {
                name: score_evidence([c.raw_score for c in r.candidates])
                for name, r in retrieved.items()
                if name in SCORED_STRATEGIES
            }
        fused = (
            weighted_rrf(
                rankings, {n: weight_map[n] for n in rankings}, k=k, normalize=normalize, evidence=evidence
            )
            if rankings
            else []
        )
        kept = [f for f in fused if f.score >= request.filters.min_relevance]
        total = len(kept)
        if len(rankings) == 1 and kept and len(kept) == len(fused):
            # Everything one strategy returned passed the cut: its own match count is the honest total.
            only = next(iter(retrieved.values()))
            if len(only.candidates) >= depth:
                total = max(total, only.total)
        return Ranking(
            index=index,
            classification=classification,
            query_type=qtype,
            weights=weights,
            notes=notes,
            retrieved=retrieved,
            timings=timings,
            kept=kept,
            total=total,
        )

    def rerank(self, request: SearchRequest, ranking: Ranking, deadline: float) -> dict[str, float]:
        """Reorder the top `rerankConfig.topK` of `ranking.kept` by a cross-encoder; returns the scores.

        When no model is available, or the time budget is spent, the order stays and a note says why.
        """
        if not (request.options.rerank_enabled and request.rerank_config.enabled) or not ranking.kept:
            return {}
        name = (
            request.rerank_config.model
            if "model" in request.rerank_config.model_fields_set
            else self.settings.rerank_model
        )
        if time.perf_counter() >= deadline:
            ranking.notes.append(StageNote(stage="rerank", status="skipped", reason="time budget exceeded"))
            return {}
        try:
            reranker = self._rerankers.get(name)
        except RerankerUnavailable as exc:
            ranking.notes.append(StageNote(stage="rerank", status="skipped", reason=str(exc)))
            return {}
        top = ranking.kept[: request.rerank_config.top_k]
        texts = [self._text_of(ranking.index, f.id) for f in top]
        scores = reranker.score(request.text, texts, request.rerank_config.batch_size)
        order = sorted(range(len(top)), key=lambda i: (-float(scores[i]), i))
        ranking.kept[: len(top)] = [top[i] for i in order]
        return {top[i].id: _unit(float(scores[i])) for i in range(len(top))}

    def _crag(
        self, request: SearchRequest, ranking: Ranking, items: list[SearchResultItem], reranked: bool
    ) -> CRAGScore:
        """Per-chunk CRAG verdicts (set on each item) and the overall verdict of the page."""
        refined = crag.refined_query(ranking.classification)
        if reranked:
            source = "rerank"
        elif "semantic" in ranking.retrieved:
            source = self.settings.embedding_model
        else:
            source = "keyword"
            ranking.notes.append(
                StageNote(stage="crag", status="degraded", reason="no semantic evidence; keyword scores used")
            )
        thresholds = crag.thresholds_for(source)
        verdicts = []
        for item in items:
            if item.type != "chunk":
                continue
            evidence = {"rerank": item.relevance.rerank or 0.0, "keyword": item.relevance.keyword}.get(
                source, item.relevance.semantic
            )
            item.relevance.crag = crag.verdict(evidence, thresholds, refined)
            verdicts.append(item.relevance.crag)
        return crag.overall(verdicts, refined)

    @staticmethod
    def _text_of(index: LoadedIndex, item_id: str) -> str:
        chunk = index.chunks.get(item_id)
        if chunk is not None:
            title = index.documents[chunk.doc_id].title
            return f"{title}\n{chunk.text}" if title else chunk.text
        graph = index.retrievers["graph"].graph  # type: ignore[attr-defined]
        if item_id in graph.entity_index:
            e = graph.entities[graph.entity_index[item_id]]
            return f"{e.name}: {e.description}"
        return str(graph.community_by_id[item_id].report)

    def search(
        self, request: SearchRequest, request_id: str | None = None, index: LoadedIndex | None = None
    ) -> SearchResult:
        started = time.perf_counter()
        ranking = self.rank(request, started + self.settings.search_budget_s, index=index)
        rerank_scores = self.rerank(request, ranking, started + self.settings.search_budget_s)
        index, retrieved, timings, kept = ranking.index, ranking.retrieved, ranking.timings, ranking.kept
        by_strategy = {name: {c.id: c for c in r.candidates} for name, r in retrieved.items()}
        page = kept[request.options.offset : request.options.offset + request.options.limit]
        query_tokens = set(index.keyword.query_terms(request.text)[0])
        items = [self._item(index, f, by_strategy, query_tokens, request) for f in page]
        for item in items:
            if item.id in rerank_scores:
                # Reranked items are ordered by the cross-encoder, so their score is its probability.
                item.relevance.rerank = item.score = rerank_scores[item.id]
        crag_overall = (
            self._crag(request, ranking, items, bool(rerank_scores)) if request.options.crag_enabled else None
        )
        metrics = {
            name: StrategyMetric(
                enabled=name in retrieved,
                result_count=len(retrieved[name].candidates) if name in retrieved else 0,
                processing_time=round(timings.get(name, 0.0), 3),
                top_score=max((c.score for c in retrieved[name].candidates), default=0.0)
                if name in retrieved
                else 0.0,
            )
            for name in STRATEGIES
        }
        effective_options = request.options.model_copy(
            update={"weights": SearchWeights.model_validate(ranking.weights.model_dump())}
        )
        return SearchResult(
            query=SearchQuery(
                text=request.text,
                type=ranking.query_type,
                embedding=request.embedding,
                filters=request.filters,
                options=effective_options,
            ),
            results=items,
            total_count=ranking.total,
            processing_time=round((time.perf_counter() - started) * 1000, 3),
            strategies=SearchStrategyMetrics(**metrics),
            classification=ranking.classification,
            crag=crag_overall,
            notes=ranking.notes,
            index_version=index.version_name,
            request_id=request_id,
            schema_version=SCHEMA_VERSION,
        )

    def _query_vector(self, request: SearchRequest, index: LoadedIndex) -> np.ndarray | None:
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

    @staticmethod
    def _depth(request: SearchRequest, weights: dict[str, float], k: int, normalize: bool) -> int:
        """How deep each strategy fetches: enough for the page, and enough that the relevance cut is exact."""
        need = request.options.offset + request.options.limit
        depth = max(MIN_DEPTH, need)
        min_rel = request.filters.min_relevance
        if weights and min_rel > 0:
            while depth < MAX_DEPTH and max_unseen_score(weights, depth, k, normalize) >= min_rel:
                depth = min(MAX_DEPTH, depth * 2)
        return min(depth, MAX_DEPTH) if need <= MAX_DEPTH else need

    def _run_retrievers(
        self,
        index: LoadedIndex,
        active: list[str],
        query: RetrievalQuery,
        depth: int,
        deadline: float,
        notes: list[StageNote],
    ) -> tuple[dict[str, Retrieved], dict[str, float]]:
        timings: dict[str, float] = {}

        def timed(name: str) -> Retrieved:
            t0 = time.perf_counter()
            try:
                return index.retrievers[name].retrieve(query, depth)
            finally:
                timings[name] = (time.perf_counter() - t0) * 1000

        futures: dict[str, Future[Retrieved]] = {name: self._pool.submit(timed, name) for name in active}
        out: dict[str, Retrieved] = {}
        for name, fut in futures.items():
            try:
                out[name] = fut.result(timeout=max(0.0, deadline - time.perf_counter()))
            except FutureTimeout:
                fut.cancel()
                notes.append(StageNote(stage=name, status="skipped", reason="time budget exceeded"))
            except Exception as exc:  # one failing retriever must not fail the whole search
                log.exception("retriever %s failed", name)
                notes.append(StageNote(stage=name, status="failed", reason=f"{type(exc).__name__}: {exc}"))
        return out, timings

    @staticmethod
    def _chunk_sources(index: LoadedIndex, chunk_id: str, file_id: str) -> SearchResultSources:
        """The chunk's entities, their most common community and the relations among them."""
        retriever = index.retrievers.get("graph")
        if retriever is None:
            return SearchResultSources(
                chunk_id=chunk_id, file_id=file_id, entity_ids=[], community_id=None, relation_ids=[]
            )
        graph = retriever.graph  # type: ignore[attr-defined]
        entity_ids = graph.entities_of_chunk.get(chunk_id, [])[:20]
        communities = Counter(graph.community_of[e] for e in entity_ids if e in graph.community_of)
        community = min(communities, key=lambda c: (-communities[c], c)) if communities else None
        relation_ids = [
            rid
            for e in entity_ids
            for rid in graph.relations_of.get(e, [])
            if chunk_id in graph.relation_chunks.get(rid, ())
        ]
        return SearchResultSources(
            chunk_id=chunk_id,
            file_id=file_id,
            entity_ids=entity_ids,
            community_id=community,
            relation_ids=list(dict.fromkeys(relation_ids))[:20],
        )

    def _graph_item(
        self,
        index: LoadedIndex,
        fused: FusedItem,
        by_strategy: dict[str, dict[str, Candidate]],
        request: SearchRequest,
    ) -> SearchResultItem:
        """An entity or community result: readable content and its sources in the graph."""
        retriever = index.retrievers["graph"]
        graph = retriever.graph  # type: ignore[attr-defined]
        candidate = by_strategy.get("graph", {}).get(fused.id)
        graph_score = candidate.score if candidate else 0.0
        kind: Literal["entity", "community"]
        if fused.id in graph.entity_index:
            e = graph.entities[graph.entity_index[fused.id]]
            relation_ids = graph.relations_of.get(e.id, [])[:10]
            content = SearchResultContent(
                text=f"{e.name} ({e.type}): {e.description}",
                summary=e.description,
                context_before=None,
                context_after=None,
            )
            sources = SearchResultSources(
                chunk_id=None,
                file_id=e.file_ids[0] if e.file_ids else None,
                entity_ids=[e.id],
                community_id=graph.community_of.get(e.id),
                relation_ids=relation_ids,
            )
            meta: dict[str, Any] = {
                "title": e.name,
                "entityType": e.type,
                "aliases": e.aliases,
                "mentions": e.mentions,
                "chunkIds": e.chunk_ids[:20],
                "fileIds": e.file_ids,
            }
            kind = "entity"
        else:
            c = graph.community_by_id[fused.id]
            content = SearchResultContent(
                text=c.report, summary=c.title, context_before=None, context_after=None
            )
            sources = SearchResultSources(
                chunk_id=None,
                file_id=None,
                entity_ids=c.entity_ids[:20],
                community_id=c.id,
                relation_ids=c.relation_ids[:20],
            )
            meta = {
                "title": c.title,
                "level": c.level,
                "entities": len(c.entity_ids),
                "chunkIds": c.chunk_ids[:20],
                "fileIds": c.file_ids,
            }
            kind = "community"
        meta["ranks"] = dict(fused.ranks)
        return SearchResultItem(
            id=fused.id,
            type=kind,
            score=_unit(fused.score),
            relevance=_relevance(fused.score, graph_score),
            content=content,
            highlights=[],
            sources=sources,
            metadata=meta if request.options.include_metadata else None,
        )

    def _item(
        self,
        index: LoadedIndex,
        fused: FusedItem,
        by_strategy: dict[str, dict[str, Candidate]],
        query_tokens: set[str],
        request: SearchRequest,
    ) -> SearchResultItem:
        chunk_id, score = fused.id, fused.score
        if chunk_id not in index.chunks:
            return self._graph_item(index, fused, by_strategy, request)
        chunk = index.chunks[chunk_id]
        doc = index.documents[chunk.doc_id]
        per = {name: (by_strategy.get(name, {}).get(chunk_id)) for name in STRATEGIES}
        matches = term_matches(chunk.text, query_tokens, index.analyzer) if query_tokens else []
        highlights = []
        if request.options.include_highlights and matches:
            highlights.append(
                Highlight(
                    field="text",
                    fragment=fragment(chunk.text, matches),
                    offsets=[HighlightOffset(start=m.start, end=m.end) for m in matches],
                )
            )
        before = doc.text[max(0, chunk.start - CONTEXT_CHARS) : chunk.start].strip() or None
        after = doc.text[chunk.end : chunk.end + CONTEXT_CHARS].strip() or None
        metadata = None
        if request.options.include_metadata:
            metadata = {
                "docId": doc.doc_id,
                "title": doc.title,
                "url": doc.url or f"{self.settings.base_url}/v1/documents/{doc.doc_id}",
                "sourceUrl": doc.url,
                "date": doc.date,
                "language": chunk.language,
                "position": chunk.position,
                "start": chunk.start,
                "end": chunk.end,
                "ranks": dict(fused.ranks),
            }
        return SearchResultItem(
            id=chunk_id,
            type="chunk",
            score=_unit(score),
            relevance=RelevanceScore(
                combined=_unit(score),
                keyword=_unit(per["keyword"].score) if per["keyword"] else 0.0,
                semantic=_unit(per["semantic"].score) if per["semantic"] else 0.0,
                graph=_unit(per["graph"].score) if per["graph"] else 0.0,
                rerank=None,
                crag=None,
            ),
            content=SearchResultContent(
                text=chunk.text,
                summary=best_sentence(chunk.text, matches),
                context_before=before,
                context_after=after,
            ),
            highlights=highlights,
            sources=self._chunk_sources(index, chunk_id, chunk.file_id),
            metadata=metadata,
        )


def _relevance(score: float, graph: float) -> RelevanceScore:
    return RelevanceScore(
        combined=_unit(score), keyword=0.0, semantic=0.0, graph=_unit(graph), rerank=None, crag=None
    )


def _unit(x: float) -> float:
    return float(min(1.0, max(0.0, x)))


def _chunk_filters(request: SearchRequest) -> ChunkFilters:
    f = request.filters
    date_range = f.date_range
    return ChunkFilters(
        file_ids=f.file_ids,
        entity_types=f.entity_types,
        date_start=naive_utc(date_range.start) if date_range else None,
        date_end=naive_utc(date_range.end) if date_range else None,
    )
