"""The search engine: classify, retrieve concurrently, fuse, filter, page, explain.

`SearchEngine` is cheap to construct; `start()` (from `IndexLifecycle`) loads the index and models once
(warm-up) and only then reports ready. CPU-heavy work happens in `search()`, which callers run off the event
loop. The steps live beside it: `ranking` (depth, vector, retrievers), `response` (result items), `crag`.
This package never imports the HTTP layer.
"""

from __future__ import annotations

import time
from concurrent.futures import Future
from dataclasses import replace

import numpy as np

from hybridrag.pipeline import crag
from hybridrag.pipeline.batching import BatchingEmbedder
from hybridrag.pipeline.classifier import QueryClassifier
from hybridrag.pipeline.errors import InvalidSearch, NotReady
from hybridrag.pipeline.fusion import (
    GRAPH_LED,
    SUPPORT_DEPTH,
    SUPPORT_SHARE,
    FusedItem,
    deepest_passing_rank,
    list_evidence,
    regularized,
    weighted_rrf,
)
from hybridrag.pipeline.lifecycle import ComponentStatus, IndexLifecycle
from hybridrag.pipeline.loaded_index import LoadedIndex
from hybridrag.pipeline.ranking import (
    READS_VECTOR,
    STRATEGIES,
    Ranking,
    SearchPlan,
    chunk_filters,
    fetch_depth,
    query_vector,
    run_retrievers,
)
from hybridrag.pipeline.relevance import query_evidence
from hybridrag.pipeline.rerank import RerankerUnavailable
from hybridrag.pipeline.response import PageRows, clamp01, result_item, text_of
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
    """Whether these strategies need the query's embedding (`ranking.READS_VECTOR`)."""
    return not READS_VECTOR.isdisjoint(strategies)


class SearchEngine(IndexLifecycle):
    """Owns the loaded index, the models and the retriever thread pool, and answers searches."""

    def rank(
        self,
        request: SearchRequest,
        deadline: float | None = None,
        min_depth: int = 0,
        index: LoadedIndex | None = None,
        precomputed: np.ndarray | Future[np.ndarray] | None = None,
    ) -> Ranking:
        """Classify, retrieve concurrently, fuse and cut: everything of a search but the page and its items.

        `precomputed` is the query's embedding when the caller already has it (a batch encodes all its
        sub-queries in one call), or will have it (a future: `search` starts the encoding before it waits
        for a slot); the request's own `embedding` still wins.

        Benchmarks call this directly so that they measure exactly what the service does. `index` pins a
        loaded version (a batch answers every sub-query from one version even if a swap happens meanwhile).
        """
        if deadline is None:
            deadline = time.perf_counter() + self.search_settings.search_budget_s
        plan = self._plan(request, index or self.index, min_depth, precomputed)
        retrieved, timings, probes = run_retrievers(
            self._pool, plan.index, plan.active, plan.query, plan.depth, deadline, plan.notes, plan.pending
        )
        fused = self._fuse(request, retrieved, plan.weight_map, plan.index)
        evidence = query_evidence({**probes, **retrieved})
        probability = (
            None  # it asks about the collection as a whole: its words need not be the corpus' own
            if plan.query.query_type == "global"
            else self._relevance.probability(self.search_settings.embedding_model, evidence)
        )
        top = fused[0].score if fused else 0.0
        min_rel = request.filters.min_relevance
        cut = self._relevance.threshold(probability if probability is not None else 1.0, top, min_rel)
        kept = [f for f in fused if f.score >= cut]
        if probability is None:
            relevance = {f.id: clamp01(f.score) for f in kept}
        else:
            scores = self._relevance.scores(probability, [f.score for f in kept], top)
            relevance = {f.id: clamp01(r) for f, r in zip(kept, scores, strict=True)}
        return Ranking(
            index=plan.index,
            classification=plan.classification,
            query_type=plan.query.query_type,  # type: ignore[arg-type]
            weights=plan.weights,
            notes=plan.notes,
            retrieved=retrieved,
            timings=timings,
            kept=kept,
            total=_total(
                kept,
                fused,
                retrieved,
                plan.depth,
                cut,
                request.rrf_config.k,
                self._score_weighted(request),
            ),
            evidence=evidence,
            probability=probability,
            relevance=relevance,
            query_terms=plan.query.terms[0] if plan.query.terms else (),
        )

    def _plan(
        self,
        request: SearchRequest,
        index: LoadedIndex,
        min_depth: int,
        precomputed: np.ndarray | Future[np.ndarray] | None,
    ) -> SearchPlan:
        """What a search will run: its classification and weights, the strategies the index serves, the
        query (terms and vector computed once, for every retriever), and how deep each list is fetched."""
        names_in = index.graph_retriever.names_in if index.graph_retriever is not None else None
        classification, why = QueryClassifier(index.analyzer, names_in).classify_explained(request.text)
        notes: list[StageNote] = []
        requested = strategy_names(request.options.strategies)
        if "weights" in request.options.model_fields_set:
            weights = request.options.weights
        else:
            weights = classification.suggested_weights
            if why and len(requested) > 1:
                notes.append(StageNote(stage="fusion", status="weighted", reason=why))
        active = []
        for name in requested:
            if name in index.retrievers:
                active.append(name)
            else:
                reason = index.unavailable.get(name, "not available")
                notes.append(StageNote(stage=name, status="skipped", reason=reason))
        weight_map = {name: getattr(weights, name) for name in active}
        if active and sum(weight_map.values()) <= 0:
            # Every running strategy has weight 0: rank by them equally rather than return nothing.
            weight_map = dict.fromkeys(active, 1.0)
            notes.append(StageNote(stage="fusion", status="degraded", reason="all active weights were 0"))
        depth = fetch_depth(request, min_depth)
        vector = query_vector(request, index)
        pending = None
        if isinstance(precomputed, Future):
            pending = precomputed if vector is None else None
        elif vector is None:
            vector = precomputed
        if vector is None and pending is None and self._embedder is not None and embeds_query(active):
            # One query embedding serves the semantic retriever and the graph (seeds, communities).
            pending = self._encoding(request.text)
        tokens, bigrams = index.keyword.query_terms(request.text)
        query = RetrievalQuery(
            request.text,
            chunk_filters(request),
            vector,
            query_type=request.type or classification.type,
            entities=tuple(classification.extracted_entities),
            terms=(tuple(tokens), tuple(bigrams)),
        )
        return SearchPlan(index, classification, weights, notes, active, weight_map, query, depth, pending)

    def _fuse(
        self,
        request: SearchRequest,
        retrieved: dict[str, Retrieved],
        weight_map: dict[str, float],
        index: LoadedIndex,
    ) -> list[FusedItem]:
        """The fused list, best first."""
        # A strategy that found nothing (the graph on text that names nothing) takes no part in the fusion:
        # its weight kept in the normaliser would only shrink every score.
        rankings = {name: [c.id for c in r.candidates] for name, r in retrieved.items() if r.candidates}
        evidence = None
        if self._score_weighted(request):
            evidence = {
                name: list_evidence(retrieved[name].candidates, retrieved[name].ratio_scores)
                for name in rankings
            }
        used = {n: weight_map[n] for n in rankings}
        if sum(used.values()) <= 0:
            return []
        k, normalize = request.rrf_config.k, request.rrf_config.normalize_scores
        unseen = _ahead_of_graph(index, rankings)
        fused = weighted_rrf(rankings, used, k=k, normalize=normalize, evidence=evidence, unseen=unseen)
        graph = index.graph_retriever
        graph_share = used.get("graph", 0.0) / sum(used.values())
        # Plain RRF (rank-only terms) stays the textbook's: the support was measured on the score-weighted
        # fusion, and on plain RRF's flat scores it cost SciFact 0.02 nDCG@10.
        if graph is None or evidence is None or len(rankings) < 2 or not 0 < graph_share < GRAPH_LED:
            return fused
        # The graph also re-weighs the fused list: a passage whose neighbours the list ranks high gains
        # (benchmarks/docs/concepts.md, "Neighbours' support"). Where the graph's own list leads (an English
        # question about named things) the fused list is the walk's already; elsewhere its say shrinks as its
        # list's weight grows.
        head = fused[:SUPPORT_DEPTH]
        ids = [f.id for f in head]
        support = graph.support(ids, [f.score for f in head], _one_article_apart(index, ids))
        return regularized(fused, support, SUPPORT_SHARE * (1.0 - graph_share), SUPPORT_DEPTH)

    def _score_weighted(self, request: SearchRequest) -> bool:
        """Whether the fusion weighs each rank by its score evidence (score-weighted RRF)."""
        return (request.fusion or self.search_settings.fusion) == "score-rrf"

    def _check_rerank_model(self, request: SearchRequest) -> None:
        """A request may name only a cross-encoder from the server's allow-list."""
        allowed = self.search_settings.rerank_sources
        if "model" in request.rerank_config.model_fields_set and request.rerank_config.model not in allowed:
            raise InvalidSearch(
                "rerankConfig.model", "rerank_model_not_allowed", {"allowed": ", ".join(sorted(allowed))}
            )

    def _rerank_model(self, request: SearchRequest) -> str:
        if "model" in request.rerank_config.model_fields_set:
            return request.rerank_config.model
        return self.search_settings.rerank_model

    @staticmethod
    def _rerank_asked(request: SearchRequest) -> bool:
        return request.options.rerank_enabled and request.rerank_config.enabled

    def _reranks(self, request: SearchRequest) -> bool:
        """Whether a search asks for a rerank that may run: not when its model is known to be missing."""
        return self._rerank_asked(request) and not self._rerankers.failed(self._rerank_model(request))

    def rerank(
        self, request: SearchRequest, ranking: Ranking, deadline: float, rows: PageRows | None = None
    ) -> dict[str, float]:
        """Reorder the top `rerankConfig.topK` of `ranking.kept` by a cross-encoder; returns the scores.

        When no model is available, or the time budget is spent, the order stays and a note says why.
        `rows`: the candidates' rows when the caller has read them (the page is built from the same rows).
        """
        if not self._rerank_asked(request) or not ranking.kept:
            return {}
        name = self._rerank_model(request)
        if time.perf_counter() >= deadline:
            ranking.notes.append(StageNote(stage="rerank", status="skipped", reason="time budget exceeded"))
            return {}
        try:
            reranker = self._rerankers.get(name, self.search_settings.rerank_sources.get(name))
        except RerankerUnavailable as exc:
            ranking.notes.append(StageNote(stage="rerank", status="skipped", reason=str(exc)))
            return {}
        top = ranking.kept[: request.rerank_config.top_k]
        texts = [text_of(ranking.index, f.id, rows) for f in top]
        scores = reranker.score(request.text, texts, request.rerank_config.batch_size)
        order = sorted(range(len(top)), key=lambda i: (-float(scores[i]), i))
        ranking.kept[: len(top)] = [top[i] for i in order]
        return {top[i].id: clamp01(float(scores[i])) for i in range(len(top))}

    def _crag(
        self, request: SearchRequest, ranking: Ranking, items: list[SearchResultItem], reranked: bool
    ) -> CRAGScore:
        """Per-chunk CRAG verdicts (set on each item) and the overall verdict of the page."""
        refined = crag.refined_query(ranking.classification)
        if reranked:
            source = "rerank"
        elif "semantic" in ranking.retrieved:
            source = self.search_settings.embedding_model
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

    def _encoding(self, text: str) -> Future[np.ndarray]:
        """`text`'s query vector, to come: the search goes on meanwhile (its keyword retrieval runs beside
        the encoder; benchmarks/docs/scale.md, "Ten million")."""
        embedder = self._embedder
        if embedder is None:
            raise NotReady("no embedding model is loaded")
        if isinstance(embedder, BatchingEmbedder):
            rows = embedder.submit_queries([text])
        else:  # an engine used before `start()` wrapped its embedder: encoded now
            rows = Future()
            rows.set_result(embedder.embed_queries([text]))
        vector: Future[np.ndarray] = Future()
        rows.add_done_callback(lambda done: _first_row(done, vector))
        return vector

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
        pending: np.ndarray | Future[np.ndarray] | None = precomputed
        if precomputed is None and self.needs_vector(request):
            # Encoded while this search waits for its slot and runs its keyword retrieval.
            pending = self._encoding(request.text)
        deadline = started + self.search_settings.search_budget_s
        with self._admission.held(max(0.0, deadline - time.perf_counter())):
            return self._answer(request, request_id, index, pending, started, deadline)

    def _answer(
        self,
        request: SearchRequest,
        request_id: str | None,
        index: LoadedIndex | None,
        precomputed: np.ndarray | Future[np.ndarray] | None,
        started: float,
        deadline: float,
    ) -> SearchResult:
        ranking = self.rank(request, deadline, index=index, precomputed=precomputed)
        index, retrieved, timings, kept = ranking.index, ranking.retrieved, ranking.timings, ranking.kept
        start, end = request.options.offset, request.options.offset + request.options.limit
        # The rows of the page and of what a rerank reads, in one batch: a rerank only reorders its top, so
        # the page after it lies among these. Not the rerank's rows when its model is known to be missing:
        # reranking is asked for by default, and reading its 50 rows for nothing was most of a page's cost.
        wanted = dict.fromkeys(f.id for f in kept[start:end])
        if self._reranks(request):
            wanted.update(dict.fromkeys(f.id for f in kept[: request.rerank_config.top_k]))
        rows = PageRows.read(index, list(wanted))
        rerank_scores = self.rerank(request, ranking, deadline, rows)
        by_strategy = {name: {c.id: c for c in r.candidates} for name, r in retrieved.items()}
        trace = retrieved["graph"].trace if "graph" in retrieved else None
        # Each result is scored by its relevance (`pipeline.relevance`), in the fused order.
        page = [replace(f, score=ranking.relevance.get(f.id, f.score)) for f in kept[start:end]]
        query_tokens = set(ranking.query_terms)
        items = [
            result_item(
                index, rows, f, by_strategy, query_tokens, request, self.search_settings.base_url, trace
            )
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


def _first_row(rows: Future[np.ndarray], vector: Future[np.ndarray]) -> None:
    """Hands on the first row of an encoder call's result (or its failure)."""
    error = rows.exception()
    if error is not None:
        vector.set_exception(error)
    else:
        vector.set_result(rows.result()[0])


def _one_article_apart(index: LoadedIndex, ids: list[str]) -> np.ndarray:
    """Pairs of `ids` from different documents with the same title: one article's paragraphs stored apart,
    which its title's node links whatever they say. They give each other no support (JaQuAD's paragraphs:
    benchmarks/docs/concepts.md, "Neighbours' support"); one document's chunks do."""
    rows = index.chunks.rows(ids)
    found = rows >= 0
    docs = np.array([""] * len(ids), dtype=object)
    docs[found] = index.chunks.column("doc_id").take(rows[found]).to_pylist()
    heads = index.documents.heads(list(dict.fromkeys(docs[found].tolist())))
    titles = [(heads[d].title or "") if d in heads else "" for d in docs.tolist()]
    apart = np.zeros((len(ids), len(ids)), dtype=bool)
    by_title: dict[str, list[int]] = {}
    for i, title in enumerate(titles):
        if title:
            by_title.setdefault(title, []).append(i)
    for group in by_title.values():
        if len(group) > 1:
            at = np.array(group)
            apart[np.ix_(at, at)] = docs[at][:, None] != docs[at][None, :]
    return apart


def _ahead_of_graph(index: LoadedIndex, rankings: dict[str, list[str]]) -> dict[str, set[str]] | None:
    """The other lists' passages the graph cannot rank yet (written after it was built by a release that did
    not link them to it, `stores.graph_delta`; None when it holds every passage): the fusion leaves the
    graph's weight out of their scores."""
    graph = index.graph
    if graph is None or not graph.lagging or "graph" not in rankings:
        return None
    ids = list(dict.fromkeys(i for name, ranked in rankings.items() if name != "graph" for i in ranked))
    ahead = (graph.chunks.rows(ids) < 0) & (index.chunks.rows(ids) >= 0)  # passages, not entities or reports
    delta = index.graph_delta
    if delta is not None:  # linked to the graph's entities: the walk could have ranked them
        ahead &= ~delta.linked(ids)
    return {"graph": {i for i, a in zip(ids, ahead.tolist(), strict=True) if a}}


def _total(
    kept: list[FusedItem],
    fused: list[FusedItem],
    retrieved: dict[str, Retrieved],
    depth: int,
    cut: float,
    k: int,
    weighted: bool,
) -> int:
    """How many results pass the cut: the kept count, or, when one strategy alone answered and everything
    it returned passed, what deeper pages would keep too: its matches down to the deepest rank the cut can
    let through (`deepest_passing_rank`), or all its matches when nothing is cut. A count of every match of
    a search whose cut stops a few hundred deep would promise more than any page can show."""
    rankings = [r for r in retrieved.values() if r.candidates]
    if len(rankings) != 1 or not kept or len(kept) != len(fused) or len(rankings[0].candidates) < depth:
        return len(kept)
    alone = rankings[0]
    first = next(f.score for f in fused if f.id == alone.candidates[0].id)
    deepest = deepest_passing_rank(alone.candidates, alone.ratio_scores, weighted, first, cut, k)
    if deepest is None:
        return max(len(kept), alone.matched())
    return max(len(kept), min(deepest, alone.matched(at_most=deepest)))
