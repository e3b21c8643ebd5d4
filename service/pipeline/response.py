"""Response building: a fused candidate becomes a result item (chunk, entity or community) with highlights,
context, per-strategy relevance and its sources in the graph.

Reads a pinned `LoadedIndex` only; never imports the HTTP layer.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import quote

import numpy as np

from hybridrag.indexing.stores.graph_index import GraphIndex
from hybridrag.indexing.stores.tables import Chunk, DocumentHead
from hybridrag.pipeline.fusion import FusedItem
from hybridrag.pipeline.highlight import best_sentence, fragment, term_matches
from hybridrag.pipeline.loaded_index import LoadedIndex
from hybridrag.pipeline.ranking import STRATEGIES
from hybridrag.pipeline.retrievers import Candidate
from hybridrag.schemas.search import (
    Highlight,
    HighlightOffset,
    RelevanceScore,
    SearchRequest,
    SearchResultContent,
    SearchResultItem,
    SearchResultSources,
)

CONTEXT_CHARS = 300


Sources = tuple[list[str], str | None, list[str]]


@dataclass(slots=True)
class PageRows:
    """What one page of results reads from the index, read ahead in a batch per table: its chunks, their
    documents and their sources in the graph (any other id is read from the index when asked for)."""

    chunks: Mapping[str, Chunk]
    #: The page's chunks' documents, without their texts (`DocumentTable.around`).
    documents: Mapping[str, DocumentHead]
    sources: dict[str, Sources] = field(default_factory=dict)
    #: The page's chunks' node rows in the graph (its chunk nodes are the chunk table's rows, so the rows
    #: just read need no second lookup); empty when the graph follows another order.
    graph_rows: dict[str, int] = field(default_factory=dict)
    #: Each of the page's chunks' context: up to `CONTEXT_CHARS` of its document before it and after it.
    context: dict[str, tuple[str, str]] = field(default_factory=dict)

    @classmethod
    def read(cls, index: LoadedIndex, ids: Sequence[str]) -> PageRows:
        chunks = index.chunks.prefetch(ids)
        chunk_ids = [i for i in ids if i in chunks]
        documents, context = index.documents.around([chunks[c] for c in chunk_ids], CONTEXT_CHARS)
        graph = index.graph
        sources: dict[str, Sources] = {}
        graph_rows: dict[str, int] = {}
        if graph is not None and chunk_ids:
            if graph.chunks is index.chunks:
                graph_rows = chunks.rows
            known = all(c in graph_rows for c in chunk_ids)
            rows = [graph_rows[c] for c in chunk_ids] if known else None
            many = graph.sources_of_many(chunk_ids, rows=rows)
            sources = dict(zip(chunk_ids, many, strict=True))
            delta = index.graph_delta
            if delta is not None:  # passages written since the graph: the entities they are linked to
                for chunk_id, at in zip(chunk_ids, delta.position(chunk_ids).tolist(), strict=True):
                    if at >= 0:
                        sources[chunk_id] = (delta.entity_ids_of(graph, at), None, [])
        return cls(chunks, documents, sources, graph_rows, context)


def document_url(base_url: str, doc_id: str) -> str:
    """This service's URL of a document (`GET /v1/documents/{id}`): where a result without a source URL
    points, and what a chunk's `documentUrl` is."""
    return f"{base_url}/v1/documents/{quote(doc_id, safe='')}"


def text_of(index: LoadedIndex, item_id: str, rows: PageRows | None = None) -> str:
    """What a cross-encoder reads of a result: a chunk with its document's title, an entity's description,
    a community's report. `rows`: rows read ahead (`PageRows`), used when they hold the item."""
    chunk = rows.chunks.get(item_id) if rows is not None else index.chunks.get(item_id)
    if chunk is not None:
        head = rows.documents.get(chunk.doc_id) if rows is not None else None
        title = (head or index.documents.heads([chunk.doc_id])[chunk.doc_id]).title
        return f"{title}\n{chunk.text}" if title else chunk.text
    graph = index.graph
    if graph is None:
        raise KeyError(item_id)
    row = graph.arrays.entity_row(item_id)
    if row is not None:
        e = graph.arrays.entity_head(row)
        return f"{e['name']}: {e['description']}"
    row = graph.arrays.community_row(item_id)
    if row is None:
        raise KeyError(item_id)
    return str(graph.arrays.community_head(row)["report"])


def chunk_sources(index: LoadedIndex, rows: PageRows, chunk_id: str, file_id: str) -> SearchResultSources:
    """The chunk's entities, their most common community and the relations among them."""
    graph = index.graph
    if graph is None:
        return SearchResultSources(
            chunk_id=chunk_id, file_id=file_id, entity_ids=[], community_id=None, relation_ids=[]
        )
    found = rows.sources.get(chunk_id)
    entity_ids, community, relation_ids = graph.sources_of(chunk_id) if found is None else found
    return SearchResultSources(
        chunk_id=chunk_id,
        file_id=file_id,
        entity_ids=entity_ids,
        community_id=community,
        relation_ids=relation_ids,
    )


def graph_path(index: LoadedIndex, rows: PageRows, trace: Any, item_id: str) -> list[dict[str, Any]]:
    """The walk (seed -> entity -> passage ...) that brought a graph result, from the graph's trace."""
    graph = index.graph
    if trace is None or graph is None:
        return []
    path: list[dict[str, Any]] = trace.path(graph, item_id, rows.graph_rows.get(item_id))
    # Passages are named by their document's title, so a path reads without lookups; the documents of
    # passages off the page are read together.
    chunks = {s["id"]: rows.chunks.get(s["id"]) for s in path if s["type"] == "chunk"}
    docs = {c.doc_id for c in chunks.values() if c is not None}
    off_page = [d for d in sorted(docs) if d not in rows.documents]
    heads = {**rows.documents, **index.documents.heads(off_page)} if off_page else rows.documents
    for step in path:
        chunk = chunks.get(step["id"]) if step["type"] == "chunk" else None
        if chunk is not None and chunk.doc_id in heads:
            step["title"] = heads[chunk.doc_id].title
    return path


def _chunks_in_files(index: LoadedIndex, graph: GraphIndex, entity: int, files: Sequence[str]) -> np.ndarray:
    """Which of the entity's chunks (in its row's order) the index holds and come from one of `files`: their
    table rows from the graph's dictionary codes (`GraphIndex.entity_table_rows`), their files from the
    table's encoded file column (a hub entity lists tens of thousands; reading their file ids as strings
    took ~2.5 ms a result at 1M)."""
    rows = graph.entity_table_rows(entity)
    columns = index.chunk_columns
    if columns is None:  # a graph always comes with the table's columns (`loaded_index`)
        raise RuntimeError("the loaded index has a graph but no chunk columns")
    return columns.in_files(rows, files)


def graph_item(
    index: LoadedIndex,
    rows: PageRows,
    fused: FusedItem,
    by_strategy: dict[str, dict[str, Candidate]],
    request: SearchRequest,
    trace: Any = None,
) -> SearchResultItem:
    """An entity or community result: readable content and its sources in the graph."""
    graph = index.graph
    if graph is None:
        raise KeyError(fused.id)
    candidate = by_strategy.get("graph", {}).get(fused.id)
    graph_score = candidate.score if candidate else 0.0
    kind: Literal["entity", "community"]
    # Under a file filter a result is shown through the files that passed it, and only those; lists are
    # cut to their first `LIST_HEAD` ids (a hub entity or a community of a large corpus lists thousands).
    allowed = request.filters.file_ids
    row = graph.arrays.entity_row(fused.id)
    if row is not None:
        keep = kept = None
        if allowed is not None:
            keep = {"file_ids": allowed}
            kept = {"chunk_ids": _chunks_in_files(index, graph, row, allowed)}
        e = graph.arrays.entity_head(row, keep, kept)
        relation_ids = graph.arrays.relation_ids(graph.arrays.relations_of(row)[:10])
        content = SearchResultContent(
            text=f"{e['name']} ({e['type']}): {e['description']}",
            summary=e["description"],
            context_before=None,
            context_after=None,
        )
        sources = SearchResultSources(
            chunk_id=None,
            file_id=e["file_ids"][0] if e["file_ids"] else None,
            entity_ids=[e["id"]],
            community_id=e["community"],
            relation_ids=relation_ids,
        )
        meta: dict[str, Any] = {
            "title": e["name"],
            "entityType": e["type"],
            "aliases": e["aliases"],
            "mentions": e["mentions"],
            "chunkIds": e["chunk_ids"],
            "fileIds": e["file_ids"],
            "files": e["file_ids_count"],
        }
        kind = "entity"
    else:
        row = graph.arrays.community_row(fused.id)
        if row is None:
            raise KeyError(fused.id)
        c = graph.arrays.community_head(row, None if allowed is None else {"file_ids": allowed})
        content = SearchResultContent(
            text=c["report"], summary=c["title"], context_before=None, context_after=None
        )
        sources = SearchResultSources(
            chunk_id=None,
            file_id=None,
            entity_ids=c["entity_ids"],
            community_id=c["id"],
            relation_ids=c["relation_ids"],
        )
        meta = {
            "title": c["title"],
            "level": c["level"],
            "entities": c["entity_ids_count"],
            "chunks": c["chunk_ids_count"],
            "chunkIds": c["chunk_ids"],
            "fileIds": c["file_ids"],
            "files": c["file_ids_count"],
        }
        kind = "community"
    meta["ranks"] = dict(fused.ranks)
    if kind == "entity" and candidate is not None:
        meta["graphPath"] = graph_path(index, rows, trace, fused.id)
    return SearchResultItem(
        id=fused.id,
        type=kind,
        score=clamp01(fused.score),
        relevance=relevance(fused.score, graph_score),
        content=content,
        highlights=[],
        sources=sources,
        metadata=meta if request.options.include_metadata else None,
    )


def result_item(
    index: LoadedIndex,
    rows: PageRows,
    fused: FusedItem,
    by_strategy: dict[str, dict[str, Candidate]],
    query_tokens: set[str],
    request: SearchRequest,
    base_url: str,
    trace: Any = None,
) -> SearchResultItem:
    """A result item for a fused candidate: a chunk with highlights and context, or a graph item.

    `rows` holds the page's rows read ahead (`PageRows.read`); `trace` is the graph retriever's account of its walk; a hit the graph found carries the path that
    reached it in `metadata.graphPath` (seed entity -> related entities -> the passage).
    """
    chunk_id, score = fused.id, fused.score
    chunk = rows.chunks.get(chunk_id)
    if chunk is None:
        return graph_item(index, rows, fused, by_strategy, request, trace)
    doc, context = rows.documents.get(chunk.doc_id), rows.context.get(chunk_id)
    if doc is None or context is None:  # not read ahead with the page
        heads, contexts = index.documents.around([chunk], CONTEXT_CHARS)
        doc, context = heads[chunk.doc_id], contexts[chunk_id]
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
    before = context[0].strip() or None
    after = context[1].strip() or None
    metadata: dict[str, Any] | None = None
    if request.options.include_metadata:
        url = doc.url or document_url(base_url, doc.doc_id)
        metadata = {
            "docId": doc.doc_id,
            "title": doc.title,
            # A paged document's hit points at its page (PDF viewers honour #page=N), so an agent can cite it.
            "url": f"{url}#page={chunk.pages[0]}" if chunk.pages else url,
            "sourceUrl": doc.url,
            "date": doc.date,
            "language": chunk.language,
            "position": chunk.position,
            "start": chunk.start,
            "end": chunk.end,
            "ranks": dict(fused.ranks),
        }
        if per["graph"] is not None:
            metadata["graphPath"] = graph_path(index, rows, trace, chunk_id)
        if chunk.pages:
            metadata["page"] = chunk.pages[0]
            metadata["pages"] = list(chunk.pages)
    return SearchResultItem(
        id=chunk_id,
        type="chunk",
        score=clamp01(score),
        relevance=RelevanceScore(
            combined=clamp01(score),
            keyword=clamp01(per["keyword"].score) if per["keyword"] else 0.0,
            semantic=clamp01(per["semantic"].score) if per["semantic"] else 0.0,
            graph=clamp01(per["graph"].score) if per["graph"] else 0.0,
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
        sources=chunk_sources(index, rows, chunk_id, chunk.file_id),
        metadata=metadata,
    )


def relevance(score: float, graph: float) -> RelevanceScore:
    return RelevanceScore(
        combined=clamp01(score), keyword=0.0, semantic=0.0, graph=clamp01(graph), rerank=None, crag=None
    )


def clamp01(x: float) -> float:
    return float(min(1.0, max(0.0, x)))
