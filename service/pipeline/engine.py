"""The search engine: classify, retrieve concurrently, fuse, filter, page, explain.

`SearchEngine` is cheap to construct; `start()` (from `IndexLifecycle`) loads the index and models once
(warm-up) and only then reports ready. CPU-heavy work happens in `search()`, which callers run off the event
loop. The steps live beside it: `ranking` (depth, vector, retrievers), `response` (result items), `crag`.
This package never imports the HTTP layer.
"""

from __future__ import annotations

import time

import numpy as np

from hybridrag.pipeline import crag
from hybridrag.pipeline.classifier import QueryClassifier, suggested_weights
from hybridrag.pipeline.fusion import EVIDENCE_FLOOR, score_evidence, weighted_rrf
from hybridrag.pipeline.lifecycle import ComponentStatus, IndexLifecycle, NotReady
from hybridrag.pipeline.loaded_index import LoadedIndex
from hybridrag.pipeline.ranking import (
    STRATEGIES,
    InvalidSearch,
    Ranking,
    chunk_filters,
    fetch_depth,
    query_vector,
    run_retrievers,
)
from hybridrag.pipeline.rerank import RerankerUnavailable
from hybridrag.pipeline.response import PageRows, result_item, text_of, unit
from hybridrag.pipeline.retrievers import RetrievalQuery, Retrieved, strategy_names
from hybridrag.schemas.base import SCHEMA_VERSION
from hybridrag.schemas.search import (
    CRAGScore,
    SearchQuery,
    SearchRequest,
    SearchResult,
    SearchResultItem,
    SearchStrategyMetrics,
    SearchWeights,
    StageNote,
    StrategyMetric,
)

__all__ = ["ComponentStatus", "InvalidSearch", "NotReady", "Ranking", "SearchEngine"]


def embeds_query(strategies: list[str]) -> bool:
    """Whether these strategies need the query's embedding: semantic, and the graph (its seed passages,
    entities matched by meaning, community search)."""
    return "semantic" in strategies or "graph" in strategies


class SearchEngine(IndexLifecycle):
    """Owns the loaded index, the models and the retriever thread pool, and answers searches."""

    def rank(
        self,
        request: SearchRequest,
        deadline: float | None = None,
        min_depth: int = 0,
        index: LoadedIndex | None = None,
        precomputed: np.ndarray | None = None,
    ) -> Ranking:
        """Classify, retrieve concurrently, fuse and cut: everything of a search but the page and its items.

        `precomputed` is the query's embedding when the caller already has it (a batch encodes all its
        sub-queries in one call); the request's own `embedding` still wins.

        Benchmarks call this directly so that they measure exactly what the service does. `index` pins a
        loaded version (a batch answers every sub-query from one version even if a swap happens meanwhile).
        """
        if deadline is None:
            deadline = time.perf_counter() + self.settings.search_budget_s
        index = index or self.index
        graph = index.retrievers.get("graph")
        classification = QueryClassifier(index.analyzer, getattr(graph, "names_in", None)).classify(
            request.text
        )
        notes: list[StageNote] = []
        if "weights" in request.options.model_fields_set:
            weights = request.options.weights
        else:
            weights = classification.suggested_weights
            _w, why = suggested_weights(request.text, classification.type, classification.extracted_entities)
            if why and len(strategy_names(request.options.strategies)) > 1:
                notes.append(StageNote(stage="fusion", status="weighted", reason=why))
        active = []
        for name in strategy_names(request.options.strategies):
            if name in index.retrievers:
                active.append(name)
            else:
                reason = index.unavailable.get(name, "not available")
                notes.append(StageNote(stage=name, status="skipped", reason=reason))
        vector = query_vector(request, index)
        if vector is None:
            vector = precomputed
        weight_map = {name: getattr(weights, name) for name in active}
        if active and sum(weight_map.values()) <= 0:
            # Every running strategy has weight 0: rank by them equally rather than return nothing.
            weight_map = dict.fromkeys(active, 1.0)
            notes.append(StageNote(stage="fusion", status="degraded", reason="all active weights were 0"))
        k = request.rrf_config.k
        normalize = request.rrf_config.normalize_scores
        depth = max(min_depth, fetch_depth(request, weight_map, k, normalize))
        qtype = request.type or classification.type
        if vector is None and self._embedder is not None and embeds_query(active):
            # One query embedding serves the semantic retriever and the graph (seeds, communities).
            vector = self.embed_queries([request.text])[0]
        query = RetrievalQuery(
            request.text,
            chunk_filters(request),
            vector,
            query_type=qtype,
            entities=tuple(classification.extracted_entities),
        )
        retrieved, timings = run_retrievers(self._pool, index, active, query, depth, deadline, notes)
        # A strategy that found nothing (the graph on text that names nothing) takes no part in the fusion:
        # its weight kept in the normaliser would only shrink every score below the relevance cut.
        rankings = {name: [c.id for c in r.candidates] for name, r in retrieved.items() if r.candidates}
        evidence = None
        if (request.fusion or self.settings.fusion) == "score-rrf":
            evidence = {name: fusion_evidence(retrieved[name]) for name in rankings}
        used = {n: weight_map[n] for n in rankings}
        fused = (
            weighted_rrf(rankings, used, k=k, normalize=normalize, evidence=evidence)
            if sum(used.values()) > 0
            else []
        )
        kept = [f for f in fused if f.score >= request.filters.min_relevance]
        total = len(kept)
        if len(rankings) == 1 and kept and len(kept) == len(fused):
            # Everything one strategy returned passed the cut: its own match count is the honest total.
            only = retrieved[next(iter(rankings))]
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

    def _check_rerank_model(self, request: SearchRequest) -> None:
        """A request may name only a cross-encoder from the server's allow-list."""
        allowed = self.settings.rerank_sources
        if "model" in request.rerank_config.model_fields_set and request.rerank_config.model not in allowed:
            raise InvalidSearch(
                "rerankConfig.model", "rerank_model_not_allowed", {"allowed": ", ".join(sorted(allowed))}
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
            reranker = self._rerankers.get(name, self.settings.rerank_sources.get(name))
        except RerankerUnavailable as exc:
            ranking.notes.append(StageNote(stage="rerank", status="skipped", reason=str(exc)))
            return {}
        top = ranking.kept[: request.rerank_config.top_k]
        texts = [text_of(ranking.index, f.id) for f in top]
        scores = reranker.score(request.text, texts, request.rerank_config.batch_size)
        order = sorted(range(len(top)), key=lambda i: (-float(scores[i]), i))
        ranking.kept[: len(top)] = [top[i] for i in order]
        return {top[i].id: unit(float(scores[i])) for i in range(len(top))}

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

    def embed_queries(self, texts: list[str]) -> np.ndarray:
        """Query vectors for `texts` in one (micro-batched) encoder call; NotReady without an embedder."""
        if self._embedder is None:
            raise NotReady("no embedding model is loaded")
        return self._embedder.embed_queries(texts)

    def needs_vector(self, request: SearchRequest) -> bool:
        """Whether a search of `request` would embed its text (semantic or graph)."""
        if request.embedding is not None or self._embedder is None:
            return False
        return embeds_query(strategy_names(request.options.strategies))

    def search(
        self,
        request: SearchRequest,
        request_id: str | None = None,
        index: LoadedIndex | None = None,
        precomputed: np.ndarray | None = None,
    ) -> SearchResult:
        """Answer one search. Its query is encoded first (concurrent searches share encoder calls), then it
        waits for one of the engine's search slots (`max_concurrent_searches`, first come first served)
        for the rest; time spent waiting counts against its budget."""
        started = time.perf_counter()
        self._check_rerank_model(request)
        if precomputed is None and self.needs_vector(request):
            precomputed = self.embed_queries([request.text])[0]
        deadline = started + self.settings.search_budget_s
        with self._admission.held(max(0.0, deadline - time.perf_counter())):
            return self._answer(request, request_id, index, precomputed, started, deadline)

    def _answer(
        self,
        request: SearchRequest,
        request_id: str | None,
        index: LoadedIndex | None,
        precomputed: np.ndarray | None,
        started: float,
        deadline: float,
    ) -> SearchResult:
        ranking = self.rank(request, deadline, index=index, precomputed=precomputed)
        rerank_scores = self.rerank(request, ranking, deadline)
        index, retrieved, timings, kept = ranking.index, ranking.retrieved, ranking.timings, ranking.kept
        by_strategy = {name: {c.id: c for c in r.candidates} for name, r in retrieved.items()}
        trace = retrieved["graph"].trace if "graph" in retrieved else None
        page = kept[request.options.offset : request.options.offset + request.options.limit]
        query_tokens = set(index.keyword.query_terms(request.text)[0])
        rows = PageRows.read(index, [f.id for f in page])
        items = [
            result_item(index, rows, f, by_strategy, query_tokens, request, self.settings.base_url, trace)
            for f in page
        ]
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
        index.mappings.searched()
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


def fusion_evidence(retrieved: Retrieved) -> list[float]:
    """Score evidence of one retriever's list for score-weighted RRF.

    Keyword and semantic scores are min-max scaled against the list's own depth (`score_evidence`). The
    graph's passages are weighed by their PageRank mass over the top passage's (a natural zero: half the
    mass counts half); its entities and community reports, on other scales, keep rank-only terms.
    Measured against rank-only graph terms on the dev sets: benchmarks/README.md.
    """
    if not retrieved.ratio_scores:
        return score_evidence([c.raw_score for c in retrieved.candidates])
    return [
        EVIDENCE_FLOOR + (1.0 - EVIDENCE_FLOOR) * unit(c.score) if c.kind == "chunk" else 1.0
        for c in retrieved.candidates
    ]
