"""The BM25 keyword index (tantivy) over chunks.

Tokens are produced by `indexing.analyzers` and stored in whitespace-tokenized fields, so the index needs
no custom tantivy analyzer (which would have to be registered again on every open). Filters (file ids,
entity types, date range) are clauses of the same query, so they apply before ranking (prefilter) and
a count is the true number of matches. A search counts only when asked and `KeywordIndex.count` counts
afterwards, up to a bound where one is enough (`totalCount` under a relevance cut). The Python binding
scores every match of every query term even for the top hits alone (it collects through a multi-collector,
which tantivy's block-max pruning does not serve: a top 10 of one term held by all of 1M chunks takes as
long as the scan, benchmarks/docs/scale.md "Keyword search at scale"), so a search costs what its terms'
postings hold, and a count adds a second pass as long.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import tantivy

from hybridrag.indexing.analysis.analyzers import Analyzer
from hybridrag.indexing.analysis.text import has_japanese
from hybridrag.indexing.stores.filters import ChunkFilters

WHITESPACE = "whitespace"
# tantivy's BM25 parameters (fixed in the library).
BM25_K1 = 1.2


@dataclass(frozen=True, slots=True)
class KeywordHit:
    chunk_id: str
    score: float


@dataclass(frozen=True, slots=True)
class KeywordSearch:
    """A search's hits (best first), how many chunks matched, and the query's BM25 ceilings.

    `ceiling`: the best attainable score over the query terms the corpus holds (sum of boost * idf * (k1 + 1),
    each term's limit as its frequency grows); `absent`: the same sum over the terms it does not hold, each
    at the idf of a term in no chunk. A hit's score over `ceiling` says how much of what the corpus could
    match it matches; over `ceiling + absent`, how much of the query itself.
    """

    hits: list[KeywordHit]
    total: int  # matches counted, or without a count the hits returned (at least that many matched)
    ceiling: float
    absent: float
    counted: bool = True


@dataclass(frozen=True, slots=True)
class KeywordRow:
    """What the keyword index needs of a chunk."""

    chunk_id: str
    doc_id: str
    file_id: str
    title: str
    text: str
    date: datetime | None
    entity_types: Sequence[str] = ()


def build_schema() -> tantivy.Schema:
    sb = tantivy.SchemaBuilder()
    sb.add_text_field("chunk_id", stored=True, tokenizer_name="raw", index_option="basic", fast=True)
    sb.add_text_field("doc_id", stored=False, tokenizer_name="raw", index_option="basic")
    sb.add_text_field("file_id", stored=False, tokenizer_name="raw", index_option="basic")
    sb.add_text_field("entity_type", stored=False, tokenizer_name="raw", index_option="basic")
    sb.add_text_field("tokens", stored=False, tokenizer_name=WHITESPACE, index_option="freq")
    sb.add_text_field("bigrams", stored=False, tokenizer_name=WHITESPACE, index_option="freq")
    sb.add_date_field("date", stored=False, indexed=True, fast=True)
    return sb.build()


class KeywordIndexWriter:
    """Adds and deletes chunks; `commit` makes the changes durable in one step."""

    def __init__(self, path: Path, analyzer: Analyzer, create: bool, heap_bytes: int = 128_000_000) -> None:
        path.mkdir(parents=True, exist_ok=True)
        self._index = tantivy.Index(build_schema(), path=str(path), reuse=not create)
        self._writer = self._index.writer(heap_size=heap_bytes, num_threads=1)
        self._analyzer = analyzer

    def add(self, rows: Iterable[KeywordRow]) -> int:
        n = 0
        for row in rows:
            body = f"{row.title}\n{row.text}" if row.title else row.text
            doc = tantivy.Document(
                chunk_id=row.chunk_id,
                doc_id=row.doc_id,
                file_id=row.file_id,
                tokens=" ".join(self._analyzer.tokens(body)),
                bigrams=" ".join(self._analyzer.bigrams(body)),
            )
            for et in row.entity_types:
                doc.add_text("entity_type", et)
            if row.date is not None:
                doc.add_date("date", row.date)
            self._writer.add_document(doc)
            n += 1
        return n

    def delete_documents(self, doc_ids: Iterable[str]) -> None:
        for doc_id in doc_ids:
            self._writer.delete_documents_by_term("doc_id", doc_id)

    def commit(self) -> None:
        self._writer.commit()
        self._writer.wait_merging_threads()


class KeywordIndex:
    """Read side: BM25 search with prefilters. Safe to share across threads."""

    def __init__(self, path: Path, analyzer: Analyzer, bigram_weight: float, japanese_tokens: bool) -> None:
        self._index = tantivy.Index.open(str(path))
        self._schema = self._index.schema
        self._searcher = self._index.searcher()
        self._deleted = _deleted_documents(path, self.num_chunks)
        self._analyzer = analyzer
        self.bigram_weight = bigram_weight
        self.japanese_tokens = japanese_tokens

    @property
    def num_chunks(self) -> int:
        return int(self._searcher.num_docs)

    def query_terms(self, text: str) -> tuple[list[str], list[str]]:
        """The (tokens, bigrams) a query text is searched with."""
        japanese = has_japanese(text)
        tokens = self._analyzer.tokens(text) if (self.japanese_tokens or not japanese) else []
        if japanese and not self.japanese_tokens:
            # Bigram-only mode still matches the ASCII words of a Japanese query.
            tokens = [t for t in self._analyzer.tokens(text) if t.isascii()]
        bigrams = self._analyzer.bigrams(text) if japanese and self.bigram_weight > 0 else []
        return tokens, bigrams

    def search(
        self,
        text: str,
        limit: int,
        filters: ChunkFilters | None = None,
        analysed: tuple[Sequence[str], Sequence[str]] | None = None,
        count: bool = True,
    ) -> KeywordSearch:
        """Top `limit` chunks by BM25, the number of matching chunks (without `count`, the hits' number: at
        least that many match) and the query's ceilings. `analysed`: the text's `query_terms` when the caller
        has them."""
        query, ceiling, absent, _widest = self._query(text, filters, analysed)
        if query is None:
            return KeywordSearch([], 0, 0.0, absent, counted=True)
        # No more hits than chunks: tantivy sizes its top-k heap by the limit, and a deep page's offset
        # (unbounded in the contract) would overflow it.
        result = self._searcher.search(query, limit=max(1, min(limit, self.num_chunks)), count=count)
        hits = []
        for score, address in result.hits:
            stored = self._searcher.doc(address)
            hits.append(KeywordHit(stored["chunk_id"][0], float(score)))
        total = int(getattr(result, "count", 0) or 0) if count else len(hits)
        return KeywordSearch(hits, total, ceiling, absent, counted=count)

    def count(
        self,
        text: str,
        filters: ChunkFilters | None = None,
        analysed: tuple[Sequence[str], Sequence[str]] | None = None,
        at_most: int | None = None,
    ) -> int:
        """How many chunks match `text` under `filters` (what `search` counts when asked); with `at_most`,
        `at_most` where at least that many do.

        A query's terms are alternatives, so without filters every chunk holding its most frequent term
        matches: where that term's chunks (less any deleted ones not yet merged away, which the term's
        frequency still counts) reach `at_most`, no pass over the matches is needed.
        """
        query, _ceiling, _absent, widest = self._query(text, filters, analysed)
        if query is None:
            return 0
        if (
            at_most is not None
            and (filters is None or not filters.active)
            and self._deleted is not None
            and widest - self._deleted >= at_most
        ):
            return at_most
        found = int(getattr(self._searcher.search(query, limit=1, count=True), "count", 0) or 0)
        return found if at_most is None else min(found, at_most)

    def _query(
        self,
        text: str,
        filters: ChunkFilters | None,
        analysed: tuple[Sequence[str], Sequence[str]] | None,
    ) -> tuple[tantivy.Query | None, float, float, int]:
        """The query for `text` under `filters` (None: no term of it is in the corpus), its ceiling and
        absent sums (`KeywordSearch`), and the largest number of chunks one of its terms is in (deleted ones
        not yet merged away included)."""
        tokens, bigrams = self.query_terms(text) if analysed is None else analysed
        clauses: list[tuple[tantivy.Occur, tantivy.Query]] = []
        ceiling = absent = 0.0
        widest = 0
        for field, terms, boost in (("tokens", tokens, 1.0), ("bigrams", bigrams, self.bigram_weight)):
            for term in terms:
                df = self._searcher.doc_freq(field, term)
                if df == 0:
                    absent += boost * self._idf(0) * (BM25_K1 + 1.0)
                    continue
                widest = max(widest, df)
                q = tantivy.Query.term_query(self._schema, field, term)
                clauses.append(
                    (tantivy.Occur.Should, q if boost == 1.0 else tantivy.Query.boost_query(q, boost))
                )
                ceiling += boost * self._idf(df) * (BM25_K1 + 1.0)
        if not clauses:
            return None, 0.0, absent, 0
        query = tantivy.Query.boolean_query(clauses)
        filter_query = self._filter_query(filters)
        if filter_query is not None:
            query = tantivy.Query.boolean_query(
                [
                    (tantivy.Occur.Must, query),
                    (tantivy.Occur.Must, tantivy.Query.const_score_query(filter_query, 0.0)),
                ]
            )
        return query, ceiling, absent, widest

    def _idf(self, df: int) -> float:
        n = max(1, self.num_chunks)
        return math.log(1.0 + (n - df + 0.5) / (df + 0.5))

    def _filter_query(self, filters: ChunkFilters | None) -> tantivy.Query | None:
        if filters is None or not filters.active:
            return None
        musts: list[tuple[tantivy.Occur, tantivy.Query]] = []
        for field, values in (
            ("file_id", filters.file_ids),
            ("entity_type", filters.entity_types),
            ("chunk_id", filters.chunk_ids),
        ):
            if values is not None:
                musts.append(
                    (tantivy.Occur.Must, tantivy.Query.term_set_query(self._schema, field, list(values)))
                )
        if filters.date_start is not None or filters.date_end is not None:
            date_query = tantivy.Query.range_query(
                self._schema, "date", tantivy.FieldType.Date, filters.date_start, filters.date_end
            )
            musts.append((tantivy.Occur.Must, date_query))
        if not musts:
            return None
        return tantivy.Query.boolean_query(musts)


def _deleted_documents(path: Path, live: int) -> int | None:
    """How many deleted documents the index's segments still hold (a term's frequency counts them until a
    merge drops them): the segments' documents in tantivy's `meta.json` less the `live` ones. None where
    the file cannot be read as expected."""
    try:
        meta = json.loads((path / "meta.json").read_text("utf-8"))
        held = sum(int(segment["max_doc"]) for segment in meta["segments"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return max(0, held - live)
