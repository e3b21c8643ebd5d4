"""One index version loaded for serving: tables memory-mapped, stores opened, retrievers built.

A search takes a reference to one `LoadedIndex` at its start and uses nothing else, so a version switch
during a search never mixes two versions in one response.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from hybridrag.indexing.analysis.analyzers import Analyzer
from hybridrag.indexing.models.embedders import NO_EMBEDDING_MODEL, Embedder
from hybridrag.indexing.stores import versions
from hybridrag.indexing.stores.filters import ChunkColumns, parse_date
from hybridrag.indexing.stores.graph import GraphData
from hybridrag.indexing.stores.graph_delta import GraphDelta
from hybridrag.indexing.stores.graph_index import GraphIndex
from hybridrag.indexing.stores.keyword import KeywordIndex
from hybridrag.indexing.stores.mapped import ChunkTable, DocumentTable
from hybridrag.indexing.stores.memory_maps import RELEASE_EVERY, Mappings
from hybridrag.indexing.stores.tables import CHUNKS, DOCUMENTS
from hybridrag.indexing.stores.vectors import PROJECTED_MIN_ROWS, VectorIndex
from hybridrag.pipeline.graph_retriever import GraphRetriever
from hybridrag.pipeline.graph_walk import FANOUT, SEED_FANOUT
from hybridrag.pipeline.retrievers import KeywordRetriever, Retriever, SemanticRetriever


@dataclass(slots=True)
class LoadedIndex:
    """A version's stores, typed (`keyword`, `vectors`, `graph`: None where the version has none or the
    service does not serve it), and its retrievers by strategy name."""

    version: versions.IndexVersion
    analyzer: Analyzer
    documents: DocumentTable
    chunks: ChunkTable
    keyword: KeywordIndex
    retrievers: dict[str, Retriever]
    unavailable: dict[str, str] = field(default_factory=dict)
    # The version's memory maps: a search counts itself here, and every few the pages it touched are released.
    mappings: Mappings = field(default_factory=Mappings)
    vectors: VectorIndex | None = None
    graph: GraphIndex | None = None
    graph_retriever: GraphRetriever | None = None
    # The chunk table's filter columns in its row order (with a graph: what its retriever's are taken from).
    chunk_columns: ChunkColumns | None = None

    @property
    def graph_delta(self) -> GraphDelta | None:
        """The passages written since the graph was built, linked to it (None: none, or no graph)."""
        return self.graph_retriever.delta if self.graph_retriever is not None else None

    @property
    def version_name(self) -> str:
        return self.version.version

    def graph_freshness(self) -> dict[str, Any] | None:
        """How far writes are ahead of the graph (None without one): the version its graph was built for,
        chunks written since that it does not hold yet, chunks it holds that were deleted since (never
        returned). Both are 0 once a merge has caught up (`builds.merge`)."""
        graph = self.graph
        if graph is None:
            return None
        built_for = (self.version.manifest.get("graph") or {}).get("builtFor", self.version.version)
        live = graph.live
        held = len(graph.chunks) if live is None else int(live.sum())
        delta = self.graph_delta
        return {
            "builtFor": built_for,
            "chunksAhead": len(self.chunks) - held,
            "chunksGone": 0 if live is None else int((~live).sum()),
            # Of those ahead, the ones linked to its entities (the walk reaches them one step out).
            "chunksLinked": 0 if delta is None else delta.linked_count,
        }

    @property
    def dim(self) -> int | None:
        """The dimension of the version's vectors, when it serves semantic search."""
        return self.vectors.dim if self.vectors is not None and "semantic" in self.retrievers else None


def load_index(
    index_dir: Path,
    embedding_model: str,
    embedder: Embedder | None,
    projected_min_rows: int = PROJECTED_MIN_ROWS,
    release_mapped_every: int = RELEASE_EVERY,
) -> LoadedIndex:
    """Open the current version of `index_dir`; raises `IndexUnavailable` with a clear message if unusable.

    `release_mapped_every`: searches between releases of the mapped pages they read (`Mappings`; 0: never).
    """
    version = versions.current_version(index_dir)
    manifest = version.record
    analyzer = Analyzer(manifest.sudachi_mode)
    maps = Mappings(release_mapped_every)
    try:
        chunks = ChunkTable(version.path / CHUNKS, maps)
        documents = DocumentTable(version.path / DOCUMENTS, maps, chunks)
        keyword = KeywordIndex(
            version.path / "keyword", analyzer, manifest.bigram_weight, manifest.japanese_tokens
        )
    except (OSError, ValueError, KeyError) as exc:
        raise versions.IndexUnavailable(f"index version {version.path} is damaged: {exc}") from exc
    retrievers: dict[str, Retriever] = {"keyword": KeywordRetriever(keyword)}
    unavailable: dict[str, str] = {}
    vectors: VectorIndex | None = None
    graph: GraphIndex | None = None
    graph_retriever: GraphRetriever | None = None
    manifest_embedding = manifest.embedding
    if manifest_embedding is None:
        unavailable["semantic"] = "the index was built without embeddings"
    elif embedding_model == NO_EMBEDDING_MODEL:
        unavailable["semantic"] = (
            "the service runs without an embedding model (HYBRIDRAG_EMBEDDING_MODEL=none)"
        )
    elif manifest_embedding.get("model") != embedding_model:
        raise versions.IndexUnavailable(
            f"the index was built with embedding model {manifest_embedding.get('model')!r} but the service is "
            f"configured for {embedding_model!r}: set HYBRIDRAG_EMBEDDING_MODEL={manifest_embedding.get('model')} "
            "or rebuild the index with the configured model"
        )
    elif embedder is None:
        unavailable["semantic"] = "the embedding model is not loaded (HYBRIDRAG_LOAD_EMBEDDER=false)"
    else:
        if embedder.dim != manifest_embedding.get("dim"):
            raise versions.IndexUnavailable(
                f"embedding model gives {embedder.dim}-d vectors, the index holds {manifest_embedding.get('dim')}-d"
            )
        try:
            vectors = VectorIndex(
                version.path / "vectors", embedder.dim, projected_min_rows=projected_min_rows, maps=maps
            )
        except (OSError, ValueError, RuntimeError) as exc:
            raise versions.IndexUnavailable(f"vector store of {version.path} is damaged: {exc}") from exc
        retrievers["semantic"] = SemanticRetriever(vectors, embedder)
    graph_dir = version.path / "graph"
    if GraphData.present(graph_dir):
        try:
            graph = GraphIndex.load(graph_dir, chunks, maps)
        except (OSError, ValueError, KeyError) as exc:
            raise versions.IndexUnavailable(f"graph of {version.path} is damaged: {exc}") from exc
        seeders: dict[str, Retriever] = {n: retrievers[n] for n in ("semantic", "keyword") if n in retrievers}
        columns = table_columns = _chunk_columns(chunks, documents)
        delta = None
        if graph.table_rows is not None:
            # A graph left behind by writes: its chunk nodes in its own order (a deleted chunk's row is
            # never read: `graph.live` rules it out of every result), and the passages written since linked
            # to its entities.
            try:
                delta = GraphDelta.load(graph_dir, graph, chunks, columns, FANOUT, SEED_FANOUT)
            except (OSError, ValueError, KeyError) as exc:
                raise versions.IndexUnavailable(f"graph of {version.path} is damaged: {exc}") from exc
            columns = columns.take(np.maximum(graph.table_rows, 0))
        graph_retriever = GraphRetriever(graph, columns, analyzer, seeders, delta)
        retrievers["graph"] = graph_retriever
    else:
        table_columns = None
        unavailable["graph"] = "the index was built without a knowledge graph"
    return LoadedIndex(
        version,
        analyzer,
        documents,
        chunks,
        keyword,
        retrievers,
        unavailable,
        maps,
        vectors=vectors,
        graph=graph,
        graph_retriever=graph_retriever,
        chunk_columns=table_columns,
    )


def _chunk_columns(chunks: ChunkTable, documents: DocumentTable) -> ChunkColumns:
    """The graph's filter columns, in the chunk table's row order: its own columns when it stores dates
    (mapped, no per-chunk Python), else from the chunk objects (a version written before)."""
    table = chunks.table
    if "date" in table.column_names:
        return ChunkColumns.from_arrow(
            table.column("file_id"), table.column("entity_types"), table.column("date")
        )
    doc_dates = {
        doc_id: parse_date(documents[doc_id].date) for doc_id in set(table.column("doc_id").to_pylist())
    }
    dates = {cid: doc_dates.get(c.doc_id) for cid, c in chunks.items()}
    return ChunkColumns.from_chunks(list(chunks), chunks, dates)
