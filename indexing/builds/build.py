"""Building and updating an index: sources -> documents -> chunks -> keyword + vector stores -> new version.

Every operation (full build, add, delete) writes a new version in a staging directory and publishes it with
an atomic switch of "current" (see `indexing.store`). Rebuilding the same input gives the same document and
chunk ids, so builds are idempotent.
"""

from __future__ import annotations

import bisect
import logging
import shutil
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from importlib import metadata as importlib_metadata
from pathlib import Path
from typing import Any, Protocol, TypeVar

import numpy as np

from hybridrag.indexing.analysis.analyzers import Analyzer
from hybridrag.indexing.analysis.entities import EntityExtractor, Mention, chunk_types
from hybridrag.indexing.analysis.text import chunk_text, content_hash
from hybridrag.indexing.documents.sources import Document, SkippedItem, SourceReport, iter_documents
from hybridrag.indexing.models.embedders import DEFAULT_EMBEDDING_MODEL, Embedder, load_embedder
from hybridrag.indexing.stores import versions
from hybridrag.indexing.stores.filters import naive_utc
from hybridrag.indexing.stores.graph import (
    GRAPH_FORMAT,
    GRAPH_JSON,
    ChunkMentions,
    Entity,
    GraphData,
    build_graph,
    synonym_pairs,
)
from hybridrag.indexing.stores.graph_arrays import FOLDER as GRAPH_ARRAYS
from hybridrag.indexing.stores.graph_arrays import GraphArrays, ListOrder
from hybridrag.indexing.stores.keyword import KeywordIndexWriter, KeywordRow
from hybridrag.indexing.stores.mapped import write_keys
from hybridrag.indexing.stores.tables import (
    CHUNK_SCHEMA,
    CHUNKS,
    DOCUMENT_SCHEMA,
    DOCUMENTS,
    MENTIONS,
    Chunk,
    chunk_from_row,
    chunk_row,
    document_from_row,
    document_row,
    read_mentions,
    read_table,
    write_mentions,
    write_table,
)
from hybridrag.indexing.stores.vectors import VectorIndexWriter

log = logging.getLogger("hybridrag.indexing")
T = TypeVar("T")
# Chunks extracted together: the name tagger reads their case-less sentences in one batched pass.
EXTRACT_BATCH = 256


@dataclass(frozen=True, slots=True)
class BuildConfig:
    """Settings recorded in the manifest; `add` reuses the manifest's settings, never new ones."""

    chunk_size: int = 800
    chunk_overlap: int = 120
    embedding_model: str | None = DEFAULT_EMBEDDING_MODEL
    sudachi_mode: str = "B"
    japanese_tokens: bool = True
    bigram_weight: float = 0.3
    embed_batch_size: int = 32
    graph: bool = True
    # Synonym edges between entities with close embedded names (graph.SYNONYM_THRESHOLD). Off by default: on
    # the dev sets they changed nothing measurable and cost an embedding per entity (benchmarks/README.md).
    graph_synonyms: bool = False
    # How passages are embedded: "torch", "onnx" (the model's export from `hybridrag models install`; an
    # error without one) or "auto" (the export when installed). The manifest's `embedding.encoder` records
    # which one ran; queries by any encoder search the index (cosine >= 0.99 between them). `index build`
    # defaults to auto; the library keeps torch so that existing configs (and cached indexes) mean what they did.
    encoder: str = "torch"

    @classmethod
    def from_manifest(cls, manifest: dict[str, Any]) -> BuildConfig:
        known = {f for f in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in manifest.get("config", {}).items() if k in known})


class NothingToIndex(ValueError):
    """The source held no readable document; `report.skipped` says what was found and why it was skipped."""

    def __init__(self, report: SourceReport) -> None:
        super().__init__(f"nothing to index: no readable document ({len(report.skipped)} item(s) skipped)")
        self.report = report


@dataclass(slots=True)
class BuildSummary:
    version: str
    path: str
    documents: int
    chunks: int
    added_documents: int = 0
    deleted_documents: int = 0
    skipped: list[str] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)
    bytes_on_disk: int = 0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


ProgressFactory = Callable[[Iterable[T], str, int | None], Iterable[T]]


def tqdm_progress(enabled: bool | None = None) -> Callable[..., Iterable[Any]]:
    """Progress bars on a terminal only (CI logs stay clean)."""
    show = sys.stderr.isatty() if enabled is None else enabled

    def wrap(items: Iterable[Any], desc: str, total: int | None = None) -> Iterable[Any]:
        if not show:
            return items
        from tqdm import tqdm

        return tqdm(items, desc=desc, total=total, unit="it", dynamic_ncols=True, leave=True)

    return wrap


def _no_progress(items: Iterable[Any], desc: str, total: int | None = None) -> Iterable[Any]:
    return items


def make_chunks(doc: Document, config: BuildConfig) -> list[Chunk]:
    page_starts = doc.metadata.get("pageStarts") or []
    spans = chunk_text(doc.text, config.chunk_size, config.chunk_overlap, breaks=page_starts)
    return [
        Chunk(
            chunk_id="c-" + content_hash(doc.doc_id, str(span.start), span.text),
            doc_id=doc.doc_id,
            file_id=doc.file_id,
            position=span.position,
            start=span.start,
            end=span.end,
            text=span.text,
            language=doc.language,
            pages=pages_of(page_starts, span.start, span.end),
        )
        for span in spans
    ]


def pages_of(page_starts: list[int], start: int, end: int) -> list[int]:
    """The 1-based pages that the span [start, end) lies on, given where each page starts."""
    if not page_starts:
        return []
    first = bisect.bisect_right(page_starts, start)
    last = bisect.bisect_right(page_starts, max(start, end - 1))
    return list(range(max(1, first), max(1, last) + 1))


def parse_date(value: str | None) -> datetime | None:
    if not value:
        return None
    return naive_utc(datetime.fromisoformat(value))


def embedding_text(title: str, text: str) -> str:
    """What a chunk is embedded as: its document title gives short chunks their topic."""
    return f"{title}\n{text}" if title else text


class _Stages:
    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    def timed(self, name: str) -> _Timer:
        return _Timer(self.seconds, name)


class _Timer:
    def __init__(self, sink: dict[str, float], name: str) -> None:
        self._sink, self._name = sink, name

    def __enter__(self) -> None:
        self._t0 = time.perf_counter()

    def __exit__(self, *exc: object) -> None:
        self._sink[self._name] = self._sink.get(self._name, 0.0) + time.perf_counter() - self._t0


@dataclass(slots=True)
class WrittenVectors:
    """The vector table of a new version, written by the passage engine itself straight to the index's
    object store (by the Ray workers, committed once by the driver) instead of handed to the builder.

    `fetch(dest)` copies the committed table into `dest` (the local staging version's ``vectors/``),
    checking what the workers wrote, and returns every file of it on the store with its size and sha256
    (paths relative to the version), so the upload of the version skips them.
    """

    rows: int
    fetch: Callable[[Path], dict[str, dict[str, Any]]]


@dataclass(slots=True)
class Passages:
    """What a passage engine made of new documents: chunks in document order, one vector per chunk (or
    `written` when the engine wrote the table itself), and entity mentions per chunk id when it extracted
    them (None: the builder extracts)."""

    chunks: list[Chunk]
    vectors: np.ndarray | None = None
    mentions: dict[str, list[Mention]] | None = None
    written: WrittenVectors | None = None


class PassageEngine(Protocol):
    """Chunks documents and embeds their chunks: in this process (the default) or on a cluster (Ray).

    Whatever runs it, the result is the same: `make_chunks` gives the chunks, `embedding_text` what each is
    embedded as, a chunk's entities are its title's mentions then its text's, and the vectors come from the
    configured model, one row per chunk in the same order. `version` is given for a complete new version (no
    base): an engine that writes the vector table itself writes it for that version.
    """

    name: str

    def chunk_and_embed(
        self,
        docs: Sequence[Document],
        config: BuildConfig,
        embedder: Embedder | None,
        version: str | None = None,
    ) -> Passages: ...


def _batched(items: Sequence[T], size: int) -> Iterator[Sequence[T]]:
    for i in range(0, len(items), size):
        yield items[i : i + size]


class IndexBuilder:
    """Builds, extends and prunes the index in `index_dir`. Models load lazily, once."""

    def __init__(
        self,
        index_dir: Path,
        config: BuildConfig | None = None,
        embedder: Embedder | None = None,
        progress: Callable[..., Iterable[Any]] | None = None,
        passages: PassageEngine | None = None,
    ) -> None:
        self.index_dir = index_dir
        self.config = config or BuildConfig()
        self._embedder = embedder
        self._progress = progress or _no_progress
        self._passages = passages
        self._tasks: list[str] = []

    @property
    def embedder(self) -> Embedder | None:
        """The passage embedder, once loaded (a caller making many versions can hand it to the next builder)."""
        return self._embedder

    def _get_embedder(self) -> Embedder | None:
        if self.config.embedding_model is None:
            return None
        if self._embedder is None:
            self._embedder = load_embedder(self.config.embedding_model, self.config.encoder)
        elif self._embedder.name != self.config.embedding_model:
            # The manifest records the configured model: vectors of another model would be mislabelled.
            raise ValueError(
                f"embedder {self._embedder.name!r} does not match the configured model {self.config.embedding_model!r}"
            )
        return self._embedder

    def _entity_vectors(
        self, base: versions.IndexVersion | None, entities: Sequence[Entity], embedder: Embedder
    ) -> np.ndarray:
        """Name vectors of `entities`, reusing the base version's for entities it already had (ids are
        content hashes of the normalised name, so an id names the same entity in both versions)."""
        known: dict[str, np.ndarray] = {}
        if base is not None and (base.path / "graph" / GRAPH_JSON).is_file():
            old_vectors = GraphData.load_entity_vectors(base.path / "graph")
            if old_vectors is not None:
                old, _ = GraphData.load(base.path / "graph")
                if len(old.entities) == len(old_vectors):
                    known = {e.id: old_vectors[i] for i, e in enumerate(old.entities)}
        missing = [e for e in entities if e.id not in known]
        if missing:
            fresh = embedder.embed_passages([e.name for e in missing])
            known.update({e.id: fresh[i] for i, e in enumerate(missing)})
        return np.stack([known[e.id] for e in entities]).astype(np.float32)

    # -- public operations
    def build(self, source: Path) -> BuildSummary:
        """A complete new version from `source`."""
        with versions.writer_lock(self.index_dir):
            versions.cleanup(self.index_dir)
            report = SourceReport()
            stages = _Stages()
            with stages.timed("read"):
                docs = _unique(self._progress(iter_documents(source, report), "read", None), report)
            if not docs:
                # An empty version would replace what is served with nothing: refuse, and say why.
                raise NothingToIndex(report)
            return self._write(None, docs, set(), report, stages)

    def add(self, source: Path) -> BuildSummary:
        """A new version with the documents of `source` added (a document with the same id is replaced)."""
        with versions.writer_lock(self.index_dir):
            versions.cleanup(self.index_dir)
            base = versions.current_version(self.index_dir)
            self.config = BuildConfig.from_manifest(base.manifest)
            report = SourceReport()
            stages = _Stages()
            with stages.timed("read"):
                docs = _unique(iter_documents(source, report), report)
            if not docs:
                raise NothingToIndex(report)
            return self._write(base, docs, {d.doc_id for d in docs}, report, stages)

    def delete(self, doc_ids: Sequence[str]) -> BuildSummary:
        """A new version without the given documents; unknown ids are an error (nothing is changed)."""
        with versions.writer_lock(self.index_dir):
            versions.cleanup(self.index_dir)
            base = versions.current_version(self.index_dir)
            self.config = BuildConfig.from_manifest(base.manifest)
            known = set(read_table(base.path / DOCUMENTS).column("doc_id").to_pylist())
            missing = [d for d in doc_ids if d not in known]
            if missing:
                raise KeyError(f"no such document id(s): {', '.join(missing[:10])}")
            return self._write(base, [], set(doc_ids), SourceReport(), _Stages())

    def apply(
        self, new_docs: Sequence[Document], delete_ids: Sequence[str], tasks: Sequence[str] = ()
    ) -> BuildSummary:
        """One new version with `new_docs` added (replacing documents of the same id) and `delete_ids`
        removed: the documents API's batch of writes, published at once. The manifest lists `tasks` (the
        ids of the writes it holds), so after a crash a write can be told applied or not by the versions."""
        with versions.writer_lock(self.index_dir):
            versions.cleanup(self.index_dir)
            base = versions.current_version(self.index_dir)
            self.config = BuildConfig.from_manifest(base.manifest)
            known = set(read_table(base.path / DOCUMENTS).column("doc_id").to_pylist())
            remove = {d for d in delete_ids if d in known} | {d.doc_id for d in new_docs}
            if not new_docs and not remove & known:
                raise NothingToIndex(SourceReport())
            self._tasks = list(tasks)
            try:
                return self._write(base, list(new_docs), remove, SourceReport(), _Stages())
            finally:
                self._tasks = []

    def regraph(self, synonyms: bool | None = None, reextract: bool = False) -> BuildSummary:
        """A new version whose graph is rebuilt from the stored entity mentions (and, with `synonyms`, name
        vectors and synonym edges turned on or off): what an index built by an older release needs to get
        this release's graph. Chunks, keyword index and passage vectors are carried over unchanged.

        With `reextract`, every chunk's mentions are extracted again by this release's extractor (its
        entity types, say): the chunk table and the keyword index are written with the new types, and the
        vector table's rows whose types changed are updated (their vectors are kept, not re-embedded)."""
        with versions.writer_lock(self.index_dir):
            versions.cleanup(self.index_dir)
            base = versions.current_version(self.index_dir)
            self.config = BuildConfig.from_manifest(base.manifest)
            if not self.config.graph:
                raise ValueError("the index was built without a knowledge graph")
            if synonyms is not None:
                self.config = replace(self.config, graph_synonyms=synonyms)
            return self._write(base, [], set(), SourceReport(), _Stages(), reextract=reextract)

    # -- the one write path
    def _write(
        self,
        base: versions.IndexVersion | None,
        new_docs: list[Document],
        remove_ids: set[str],
        report: SourceReport,
        stages: _Stages,
        reextract: bool = False,
    ) -> BuildSummary:
        version = versions.new_version_name()
        if base is None:
            staging = versions.staging_dir(self.index_dir, version)
            old_docs: list[Document] = []
            old_chunks: list[Chunk] = []
        else:
            staging = versions.clone_into_staging(self.index_dir, base.path, version)
            old_docs = [document_from_row(r) for r in read_table(base.path / DOCUMENTS).to_pylist()]
            old_chunks = [chunk_from_row(r) for r in read_table(base.path / CHUNKS).to_pylist()]
        try:
            summary = self._write_staging(
                staging, base, version, old_docs, old_chunks, new_docs, remove_ids, report, stages, reextract
            )
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        versions.cleanup(self.index_dir)
        return summary

    def _write_staging(
        self,
        staging: Path,
        base: versions.IndexVersion | None,
        version: str,
        old_docs: list[Document],
        old_chunks: list[Chunk],
        new_docs: list[Document],
        remove_ids: set[str],
        report: SourceReport,
        stages: _Stages,
        reextract: bool = False,
    ) -> BuildSummary:
        config = self.config
        create = base is None
        embedder = self._get_embedder()
        new_vectors: np.ndarray | None = None
        given_mentions: dict[str, list[Mention]] | None = None
        written: WrittenVectors | None = None
        written_files: dict[str, dict[str, Any]] = {}
        if self._passages is not None and new_docs:
            with stages.timed("chunk+embed"):
                made = self._passages.chunk_and_embed(
                    new_docs, config, embedder, version=version if create else None
                )
            new_chunks, new_vectors, given_mentions, written = (
                made.chunks,
                made.vectors,
                made.mentions,
                made.written,
            )
        else:
            with stages.timed("chunk"):
                new_chunks = []
                for doc in self._progress(new_docs, "chunk", len(new_docs)):
                    new_chunks.extend(make_chunks(doc, config))
        removed = [d for d in old_docs if d.doc_id in remove_ids]
        docs = [d for d in old_docs if d.doc_id not in remove_ids] + new_docs
        chunks = [c for c in old_chunks if c.doc_id not in remove_ids] + new_chunks
        titles = {d.doc_id: d.title for d in docs}
        dates = {d.doc_id: parse_date(d.date) for d in docs}

        analyzer = Analyzer(config.sudachi_mode)
        mentions: dict[str, list[Mention]] = {}
        # Kept chunks whose entity types a re-extraction changed: given them in the vector table.
        retyped: list[Chunk] = []
        extraction = base_extraction = _extraction(base)
        if config.graph:
            if base is not None and (base.path / MENTIONS).is_file() and not reextract:
                mentions = read_mentions(base.path / MENTIONS, {c.chunk_id for c in chunks})
            extract = chunks if reextract else new_chunks
            with stages.timed("entities"):
                extractor = EntityExtractor(analyzer)
                if given_mentions is not None:  # the engine extracted them (on the cluster)
                    mentions.update((c.chunk_id, given_mentions[c.chunk_id]) for c in new_chunks)
                else:
                    title_docs = {c.doc_id for c in extract}
                    title_mentions = {
                        d.doc_id: extractor.extract_title(d.title) for d in docs if d.doc_id in title_docs
                    }
                    pieces = [extract[i : i + EXTRACT_BATCH] for i in range(0, len(extract), EXTRACT_BATCH)]
                    for piece in self._progress(pieces, "entities", len(pieces)):
                        found = extractor.extract_many([c.text for c in piece])
                        for c, chunk_mentions in zip(piece, found, strict=True):
                            mentions[c.chunk_id] = title_mentions[c.doc_id] + chunk_mentions
                for c in extract:
                    types = chunk_types(mentions[c.chunk_id])
                    if reextract and types != list(c.entity_types):
                        retyped.append(c)
                    c.entity_types = types
            # What extracted the stored mentions: kept while nothing is extracted; "mixed" once another
            # extractor adds to them (a regraph with `reextract` makes them one extractor's again).
            if base is None or reextract or (extract and base_extraction == extractor.version):
                extraction = extractor.version
            elif extract:
                extraction = "mixed"
        with stages.timed("keyword"):
            # A re-extraction writes the keyword index anew, in the chunks' order: deleting and re-adding the
            # re-typed chunks would leave the deleted copies in tantivy's term statistics (BM25) until a
            # merge, so scores would drift from a fresh build's.
            if reextract:
                shutil.rmtree(staging / "keyword", ignore_errors=True)
            kw = KeywordIndexWriter(staging / "keyword", analyzer, create=create or reextract)
            if removed and not reextract:
                kw.delete_documents(d.doc_id for d in removed)
            rows = chunks if reextract else new_chunks
            kw.add(
                KeywordRow(
                    c.chunk_id, c.doc_id, c.file_id, titles[c.doc_id], c.text, dates[c.doc_id], c.entity_types
                )
                for c in self._progress(rows, "keyword", len(rows))
            )
            kw.commit()

        embedding: dict[str, Any] | None = None
        if embedder is not None:
            if base is not None and base.manifest.get("embedding", {}).get("dim") not in (None, embedder.dim):
                raise versions.IndexUnavailable("embedding dimension differs from the index being updated")
            if written is not None:
                with stages.timed("vectors"):
                    # The workers wrote the table on the object store; the local version gets a checked copy.
                    written_files = written.fetch(staging / "vectors")
                if written.rows != len(new_chunks):
                    raise ValueError(f"the engine wrote {written.rows} vectors for {len(new_chunks)} chunks")
            vw = VectorIndexWriter(staging / "vectors", embedder.dim, create=create and written is None)
            if removed:
                vw.delete_documents([d.doc_id for d in removed])
            batches = [] if written is not None else list(_batched(range(len(new_chunks)), 256))
            for rows in self._progress(batches, "embed", len(batches)):
                batch = [new_chunks[i] for i in rows]
                if new_vectors is not None:
                    vectors = new_vectors[rows[0] : rows[-1] + 1]
                else:
                    with stages.timed("embed"):
                        vectors = embedder.embed_passages(
                            [embedding_text(titles[c.doc_id], c.text) for c in batch]
                        )
                with stages.timed("vectors"):
                    vw.add(
                        {
                            "chunk_id": [c.chunk_id for c in batch],
                            "doc_id": [c.doc_id for c in batch],
                            "file_id": [c.file_id for c in batch],
                            "date": [dates[c.doc_id] for c in batch],
                            "entity_types": [c.entity_types for c in batch],
                        },
                        vectors,
                    )
            with stages.timed("vectors"):
                vw.set_entity_types({c.chunk_id: c.entity_types for c in retyped})
                ann = vw.finish()
            embedding = {
                "model": config.embedding_model,
                "name": embedder.name,
                "dim": embedder.dim,
                # Which runtime embedded the passages (torch or onnx-int8); any of them can query the index.
                "encoder": getattr(embedder, "encoder", "torch"),
                **ann,
            }
            if written is not None:
                embedding["writtenBy"] = self._passages.name if self._passages is not None else "local"

        graph_counts: dict[str, Any] | None = None
        if config.graph:
            with stages.timed("graph"):
                graph = build_graph(
                    ChunkMentions(
                        c.chunk_id, c.file_id, c.text, mentions.get(c.chunk_id, ()), titles[c.doc_id]
                    )
                    for c in chunks
                )
                write_mentions(staging / MENTIONS, mentions, [c.chunk_id for c in chunks])
            community_vectors = entity_vectors = None
            if embedder is not None and graph.communities:
                with stages.timed("embed"):
                    community_vectors = embedder.embed_passages([cm.report for cm in graph.communities])
            if embedder is not None and config.graph_synonyms and graph.entities:
                with stages.timed("synonyms"):
                    entity_vectors = self._entity_vectors(base, graph.entities, embedder)
                    graph.synonyms = synonym_pairs(graph.entities, entity_vectors)
            graph.save(staging / "graph", community_vectors, entity_vectors)
            with stages.timed("graph"):
                # What the service maps: the walk's matrices against the chunk table's row order.
                GraphArrays.derive(graph, ListOrder([c.chunk_id for c in chunks])).save(
                    staging / "graph" / GRAPH_ARRAYS
                )
            graph_counts = {
                "format": GRAPH_FORMAT,
                "extraction": extraction,
                "entities": len(graph.entities),
                "relations": len(graph.relations),
                "communities": len(graph.communities),
                "synonyms": len(graph.synonyms),
            }

        with stages.timed("tables"):
            write_table(staging / DOCUMENTS, [document_row(d) for d in docs], DOCUMENT_SCHEMA, "uncompressed")
            write_table(
                staging / CHUNKS,
                [chunk_row(c, dates[c.doc_id]) for c in chunks],
                CHUNK_SCHEMA,
                "uncompressed",
            )
            write_keys(staging / DOCUMENTS, [d.doc_id for d in docs], "doc_id")
            write_keys(staging / CHUNKS, [c.chunk_id for c in chunks], "chunk_id")
            write_keys(staging / CHUNKS, [c.doc_id for c in chunks], "doc_id")

        manifest: dict[str, Any] = {
            "version": version,
            "createdAt": datetime.now(UTC).isoformat(),
            "parent": base.version if base else None,
            "hybridragVersion": _package_version(),
            "config": asdict(config),
            "analyzer": analyzer.settings(),
            "embedding": embedding,
            "counts": {"documents": len(docs), "chunks": len(chunks)},
            "graph": graph_counts,
            "stageSeconds": {k: round(v, 3) for k, v in stages.seconds.items()},
            "engine": self._passages.name if self._passages is not None else "local",
        }
        if written is not None:
            # Files already on the object store, byte for byte (remote.RemoteIndex.upload skips them).
            manifest[versions.WRITTEN_TO_STORE] = written_files
        if self._tasks:
            manifest["tasks"] = list(self._tasks)
        with stages.timed("publish"):
            published = versions.publish(self.index_dir, staging, manifest)
        return BuildSummary(
            version=version,
            path=str(published.path),
            documents=len(docs),
            chunks=len(chunks),
            added_documents=len(new_docs),
            deleted_documents=len(removed),
            skipped=[str(s) for s in report.skipped],
            seconds={k: round(v, 3) for k, v in stages.seconds.items()},
            bytes_on_disk=_du(published.path),
        )


def _extraction(base: versions.IndexVersion | None) -> str:
    """What extracted a version's stored mentions (`EntityExtractor.version`); "rules" for a version from
    before the manifest said (its English names were typed by the word-list rules)."""
    if base is None:
        return ""
    return str((base.manifest.get("graph") or {}).get("extraction", "rules"))


def _unique(docs: Iterable[Document], report: SourceReport) -> list[Document]:
    """Keep the first document of each id; a repeated id is reported, not silently merged."""
    seen: dict[str, Document] = {}
    for doc in docs:
        if doc.doc_id in seen:
            report.skipped.append(SkippedItem(doc.file_id, None, f"duplicate document id {doc.doc_id!r}"))
            continue
        seen[doc.doc_id] = doc
    return list(seen.values())


def _du(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def _package_version() -> str:
    try:
        return importlib_metadata.version("hybridrag")
    except importlib_metadata.PackageNotFoundError:
        return "0+unknown"
