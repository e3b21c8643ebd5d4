"""Retrievers behind one small protocol, registered in a plain dict by strategy name.

Each retriever returns chunk candidates best first with a raw score and a 0..1 normalised score, plus the
number of chunks that matched (for an honest `totalCount`), or a way to count them when that is read.
Filters are applied inside each store.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from hybridrag.indexing.models.embedders import Embedder
from hybridrag.indexing.stores.filters import ChunkFilters
from hybridrag.indexing.stores.keyword import KeywordIndex, KeywordSearch
from hybridrag.indexing.stores.vectors import VectorIndex


@dataclass(frozen=True, slots=True)
class RetrievalQuery:
    text: str
    filters: ChunkFilters
    vector: np.ndarray | None = None  # the query embedding (the caller's, or computed once per search)
    query_type: str = "local"
    entities: tuple[str, ...] = ()
    # Passages (chunk id, raw score) other retrievers of this search already found, best first, by retriever
    # name: the graph seeds its walk with them instead of searching again. None: nobody did.
    seed_passages: Mapping[str, tuple[tuple[str, float], ...]] | None = None
    # The query's keyword terms (tokens, bigrams), analysed once per search; None: the keyword index does it.
    terms: tuple[tuple[str, ...], tuple[str, ...]] | None = None


@dataclass(frozen=True, slots=True)
class Candidate:
    id: str
    raw_score: float
    score: float  # normalised to 0..1
    # What the candidate is: "chunk", or "entity" / "community" (the graph's list holds all three, each kind
    # scored on its own scale).
    kind: str = "chunk"


@dataclass(slots=True)
class Retrieved:
    candidates: list[Candidate]
    # The chunks that matched; with `counter`, the candidates' number (at least that many matched).
    total: int
    notes: list[str] = field(default_factory=list)
    # What a retriever can say afterwards about how it reached a candidate (the graph's walk); optional.
    trace: Any = None
    # True when each candidate's `score` is its raw score over the best of its kind, on a scale with a natural
    # zero (the graph's PageRank mass): fusion then weighs it as such instead of min-max over the list.
    ratio_scores: bool = False
    # Counts the matches when the total is read (`matched`; its argument: the most the reader needs to
    # know of): counting is a pass over every match that ranking does not need, and only a search that one
    # strategy alone answers reads it.
    counter: Callable[[int | None], int] | None = None
    # What the retriever learned about the query as a whole, on absolute scales (the relevance model's
    # inputs, `pipeline.relevance`): keyword "coverage", semantic "top".
    evidence: dict[str, float] = field(default_factory=dict)

    def matched(self, at_most: int | None = None) -> int:
        """How many chunks matched (`total`, or counted now); with `at_most`, that many where at least that
        many did."""
        found = self.counter(at_most) if self.counter is not None else self.total
        return found if at_most is None else min(found, at_most)


class Retriever(Protocol):
    """Finds chunks for a query; `limit` is the depth wanted (over-fetching is the caller's choice)."""

    name: str

    def retrieve(self, query: RetrievalQuery, limit: int) -> Retrieved: ...


class KeywordRetriever:
    """BM25 over the tantivy index; scores normalised by the query's best attainable BM25 score."""

    name = "keyword"

    def __init__(self, index: KeywordIndex) -> None:
        self._index = index

    def retrieve(self, query: RetrievalQuery, limit: int) -> Retrieved:
        # Not counted here: the count costs a pass over every match of every term (it grows with the corpus,
        # the top hits need not), and only `totalCount` of a search keyword alone answers reads it.
        found = self._index.search(query.text, limit, query.filters, query.terms, count=False)
        ceiling = found.ceiling
        index = self._index
        full = len(found.hits) >= limit
        return Retrieved(
            [
                Candidate(h.chunk_id, h.score, min(1.0, h.score / ceiling) if ceiling > 0 else 0.0)
                for h in found.hits
            ],
            found.total,
            evidence=keyword_evidence(found),
            # A list shorter than asked holds every match: nothing more to count.
            counter=(lambda at_most: index.count(query.text, query.filters, query.terms, at_most))
            if full
            else None,
        )


def keyword_evidence(found: KeywordSearch) -> dict[str, float]:
    """How much of the query the best hit matches: its BM25 score over the query's whole ceiling, the terms
    the corpus lacks counted at the idf of a word in no chunk."""
    whole = found.ceiling + found.absent
    best = found.hits[0].score if found.hits else 0.0
    return {"coverage": min(1.0, best / whole) if whole > 0 else 0.0}


#: How deep a seeder that is not fused itself is searched: the relevance evidence reads the first ten of each
#: list (their agreement), the graph the first three.
EVIDENCE_DEPTH = 10


def semantic_evidence(similarities: Sequence[float]) -> dict[str, float]:
    """The best cosine similarity."""
    return {"top": float(similarities[0])} if similarities else {}


class SemanticRetriever:
    """Cosine similarity over the LanceDB vectors; the normalised score is the similarity clipped to 0..1."""

    name = "semantic"

    def __init__(self, index: VectorIndex, embedder: Embedder) -> None:
        self._index = index
        self._embedder = embedder

    @property
    def dim(self) -> int:
        return self._index.dim

    def retrieve(self, query: RetrievalQuery, limit: int) -> Retrieved:
        vector = query.vector
        if vector is None:
            vector = self._embedder.embed_queries([query.text])[0]
        else:
            norm = float(np.linalg.norm(vector))
            vector = vector / norm if norm > 0 else vector
        hits, total = self._index.search(vector, limit, query.filters)
        return Retrieved(
            [Candidate(h.chunk_id, h.similarity, min(1.0, max(0.0, h.similarity))) for h in hits],
            total if total is not None else len(hits),
            evidence=semantic_evidence([h.similarity for h in hits]),
        )


def strategy_names(requested: Sequence[str]) -> list[str]:
    """Expand "hybrid" into the concrete strategies, keeping a stable order and no duplicates."""
    order = ("keyword", "semantic", "graph")
    wanted: set[str] = set()
    for name in requested:
        wanted.update(order if name == "hybrid" else (name,))
    return [n for n in order if n in wanted]
