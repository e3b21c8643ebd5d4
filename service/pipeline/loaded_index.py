"""One index version loaded for serving: tables in memory, stores opened, retrievers built.

A search takes a reference to one `LoadedIndex` at its start and uses nothing else, so a version switch
during a search never mixes two versions in one response.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from hybridrag.indexing import store
from hybridrag.indexing.analyzers import Analyzer
from hybridrag.indexing.build import BuildConfig, parse_date
from hybridrag.indexing.embedders import Embedder
from hybridrag.indexing.graph import GRAPH_JSON
from hybridrag.indexing.keyword import KeywordIndex
from hybridrag.indexing.sources import Document
from hybridrag.indexing.tables import CHUNKS, DOCUMENTS, Chunk, chunk_from_row, document_from_row, read_table
from hybridrag.indexing.vectors import PROJECTED_MIN_ROWS, VectorIndex
from hybridrag.pipeline.graph_retriever import GraphIndex, GraphRetriever
from hybridrag.pipeline.retrievers import KeywordRetriever, Retriever, SemanticRetriever


@dataclass(slots=True)
class LoadedIndex:
    version: store.IndexVersion
    analyzer: Analyzer
    documents: dict[str, Document]
    chunks: dict[str, Chunk]
    keyword: KeywordIndex
    retrievers: dict[str, Retriever]
    unavailable: dict[str, str] = field(default_factory=dict)
    chunks_by_doc: dict[str, list[Chunk]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for chunk in self.chunks.values():
            self.chunks_by_doc.setdefault(chunk.doc_id, []).append(chunk)
        for chunks in self.chunks_by_doc.values():
            chunks.sort(key=lambda c: c.position)

    @property
    def version_name(self) -> str:
        return self.version.version


def load_index(
    index_dir: Path,
    embedding_model: str,
    embedder: Embedder | None,
    projected_min_rows: int = PROJECTED_MIN_ROWS,
) -> LoadedIndex:
    """Open the current version of `index_dir`; raises `IndexUnavailable` with a clear message if unusable."""
    version = store.current_version(index_dir)
    config = BuildConfig.from_manifest(version.manifest)
    analyzer = Analyzer(config.sudachi_mode)
    try:
        documents = {
            d.doc_id: d
            for d in (document_from_row(r) for r in read_table(version.path / DOCUMENTS).to_pylist())
        }
        chunks = {
            c.chunk_id: c for c in (chunk_from_row(r) for r in read_table(version.path / CHUNKS).to_pylist())
        }
        keyword = KeywordIndex(
            version.path / "keyword", analyzer, config.bigram_weight, config.japanese_tokens
        )
    except (OSError, ValueError, KeyError) as exc:
        raise store.IndexUnavailable(f"index version {version.path} is damaged: {exc}") from exc
    retrievers: dict[str, Retriever] = {"keyword": KeywordRetriever(keyword)}
    unavailable: dict[str, str] = {}
    manifest_embedding = version.manifest.get("embedding")
    if manifest_embedding is None:
        unavailable["semantic"] = "the index was built without embeddings"
    elif manifest_embedding.get("model") != embedding_model:
        raise store.IndexUnavailable(
            f"the index was built with embedding model {manifest_embedding.get('model')!r} but the service is "
            f"configured for {embedding_model!r}: set HYBRIDRAG_EMBEDDING_MODEL={manifest_embedding.get('model')} "
            "or rebuild the index with the configured model"
        )
    elif embedder is None:
        unavailable["semantic"] = "the embedding model is not loaded (HYBRIDRAG_LOAD_EMBEDDER=false)"
    else:
        if embedder.dim != manifest_embedding.get("dim"):
            raise store.IndexUnavailable(
                f"embedding model gives {embedder.dim}-d vectors, the index holds {manifest_embedding.get('dim')}-d"
            )
        try:
            vectors = VectorIndex(
                version.path / "vectors", embedder.dim, projected_min_rows=projected_min_rows
            )
        except (OSError, ValueError, RuntimeError) as exc:
            raise store.IndexUnavailable(f"vector store of {version.path} is damaged: {exc}") from exc
        retrievers["semantic"] = SemanticRetriever(vectors, embedder)
    graph_dir = version.path / "graph"
    if (graph_dir / GRAPH_JSON).is_file():
        try:
            graph = GraphIndex.load(graph_dir, list(chunks))
        except (OSError, ValueError, KeyError) as exc:
            raise store.IndexUnavailable(f"graph of {version.path} is damaged: {exc}") from exc
        dates = {cid: parse_date(documents[c.doc_id].date) for cid, c in chunks.items()}
        seeders: dict[str, Retriever] = {n: retrievers[n] for n in ("semantic", "keyword") if n in retrievers}
        retrievers["graph"] = GraphRetriever(graph, chunks, dates, analyzer, seeders)
    else:
        unavailable["graph"] = "the index was built without a knowledge graph"
    return LoadedIndex(version, analyzer, documents, chunks, keyword, retrievers, unavailable)
