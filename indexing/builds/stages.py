"""The one write path, a stage at a time: a new version made in a staging directory, then published.

`VersionWrite` holds what the stages share (the base version, the documents and chunks the new version
keeps, their mentions) and runs them in order: chunk (and embed, when a passage engine does both), entities,
keyword, vectors, graph, tables, publish. Every build, update, delete, regraph and documents-API batch goes
through it, so they all write the same thing for the same documents. A large write (`shards.shard_workers`)
writes its keyword index in a child process and finishes its vector files on a thread while the graph is
built: the three depend only on the chunks and their entity types, and write apart. A write that builds its
graph anew embeds the community reports on a thread while the graph's arrays are derived.
"""

from __future__ import annotations

import contextlib
import shutil
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from importlib import metadata as importlib_metadata
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from hybridrag.indexing.analysis.analyzers import Analyzer
from hybridrag.indexing.analysis.entities import EntityExtractor, Mention, chunk_types
from hybridrag.indexing.builds.config import BuildConfig, BuildSummary
from hybridrag.indexing.builds.graph_build import build_graph, delta_links, synonym_pairs
from hybridrag.indexing.builds.passages import PassageEngine, WrittenVectors, embedding_text, make_chunks
from hybridrag.indexing.builds.shards import Aside, Shards, build_collections, shard_workers
from hybridrag.indexing.documents.sources import Document, SourceReport
from hybridrag.indexing.models.embedders import Embedder
from hybridrag.indexing.stores import segments, versions
from hybridrag.indexing.stores.filters import parse_date
from hybridrag.indexing.stores.graph import GRAPH_FORMAT, ChunkMentions, Entity, GraphData
from hybridrag.indexing.stores.graph_arrays import FOLDER as GRAPH_ARRAYS
from hybridrag.indexing.stores.graph_arrays import GraphArrays, entity_ids
from hybridrag.indexing.stores.graph_delta import DELTA, read_delta, write_delta
from hybridrag.indexing.stores.graph_order import ListOrder
from hybridrag.indexing.stores.keyword import KeywordIndexWriter, KeywordRow
from hybridrag.indexing.stores.mapped import ChunkTable, DocumentTable, write_keys
from hybridrag.indexing.stores.tables import (
    CHUNK_SCHEMA,
    CHUNKS,
    DOCUMENT_SCHEMA,
    DOCUMENTS,
    MENTIONS,
    Chunk,
    chunk_from_row,
    chunk_row,
    deleted_path,
    document_from_row,
    document_row,
    live_row_count,
    mention_segment,
    mention_segments,
    read_all_mentions,
    read_version_table,
    table_segments,
    write_mentions,
    write_table,
)
from hybridrag.indexing.stores.vectors import VectorIndexWriter

# Chunks extracted together: the name tagger reads their case-less sentences in one batched pass.
EXTRACT_BATCH = 256


def extract_texts(
    texts: Sequence[str], sudachi_mode: str, tagger_types: bool, batch: int
) -> tuple[str, list[list[Mention]]]:
    """A shard's mentions by a build's extractor (`VersionWrite.entities`) in batches of `batch` texts, and
    the extractor's version (run in a child process, `shards`)."""
    return _extracted(EntityExtractor(Analyzer(sudachi_mode), tagger_types=tagger_types), texts, batch)


def _extracted(
    extractor: EntityExtractor, texts: Sequence[str], batch: int, progress: Progress | None = None
) -> tuple[str, list[list[Mention]]]:
    """`texts`' mentions by `extractor` in batches of `batch` texts (shown by `progress`), and its version."""
    batches = [texts[i : i + batch] for i in range(0, len(texts), batch)]
    read = batches if progress is None else progress(batches, "entities", len(batches))
    return extractor.version, [found for piece in read for found in extractor.extract_many(piece)]


EMBED_BATCH = 256
# Rows the vector table is written in: each `VectorIndexWriter.add` is a LanceDB fragment, version and
# transaction file (~8 ms of the build's thread apiece, one per embedding batch: 3,900 at 1M chunks), and a
# new table's fragments are all rewritten by its compaction anyway (benchmarks/docs/scale.md, "Ten million").
VECTOR_WRITE_ROWS = 65_536
# What the keyword index gets of a chunk, as `KeywordRow`'s fields (a tuple pickles in C, a dataclass does not).
KeywordFields = tuple[str, str, str, str, str, datetime | None, list[str]]


def write_keyword(
    rows: Sequence[KeywordFields],
    sudachi_mode: str,
    path: Path,
    create: bool,
    reset: bool,
    deleted: list[str],
) -> float:
    """`_write_keyword` with a fresh analyzer (run in a child process beside the graph, `shards.Aside`);
    returns its seconds."""
    t0 = time.perf_counter()
    _write_keyword(Analyzer(sudachi_mode), rows, path, create, reset, deleted)
    return time.perf_counter() - t0


def _write_keyword(
    analyzer: Analyzer,
    rows: Iterable[KeywordFields],
    path: Path,
    create: bool,
    reset: bool,
    deleted: list[str],
) -> None:
    """The keyword index at `path`: anew with `reset`, the documents `deleted` taken out, `rows` added."""
    if reset:
        shutil.rmtree(path, ignore_errors=True)
    kw = KeywordIndexWriter(path, analyzer, create=create or reset)
    if deleted:
        kw.delete_documents(deleted)
    kw.add(KeywordRow(*row) for row in rows)
    kw.commit()


class Stages:
    """Seconds spent per stage (`with stages.timed("graph"): ...`), summed over repeats."""

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


Progress = Callable[..., Iterable[Any]]


def no_progress(items: Iterable[Any], desc: str = "", total: int | None = None) -> Iterable[Any]:
    """A `Progress` that shows nothing (the service, tests, a merge's child process)."""
    return items


@dataclass(slots=True)
class VersionWrite:
    """One new version, written stage by stage into `staging` (see the module's docstring)."""

    index_dir: Path
    staging: Path
    base: versions.IndexVersion | None
    version: str
    config: BuildConfig
    embedder: Embedder | None
    progress: Progress
    passages: PassageEngine | None = None
    reextract: bool = False
    # Leave the base's graph as it is (new chunks join it, deleted ones leave it, at the next merge).
    defer_graph: bool = False
    tasks: Sequence[str] = ()
    stages: Stages = field(default_factory=Stages)
    # What the stages share, filled in as they run.
    new_docs: list[Document] = field(default_factory=list)
    remove_ids: set[str] = field(default_factory=set)
    removed: list[Document] = field(default_factory=list)
    removed_chunks: list[str] | None = None  # their passages' ids (`_removed_chunk_ids`)
    # Every document and chunk the new version keeps, as objects: only what needs them reads them
    # (`load_all`: a full graph build, a re-extraction, a table written anew); a deferred write does not.
    loaded: bool = False
    docs: list[Document] = field(default_factory=list)
    chunks: list[Chunk] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    new_chunks: list[Chunk] = field(default_factory=list)
    new_vectors: np.ndarray | None = None
    given_mentions: dict[str, list[Mention]] | None = None
    written: WrittenVectors | None = None
    titles: dict[str, str] = field(default_factory=dict)
    dates: dict[str, datetime | None] = field(default_factory=dict)
    mentions: dict[str, list[Mention]] = field(default_factory=dict)
    retyped: list[Chunk] = field(default_factory=list)  # kept chunks whose types a re-extraction changed
    extraction: str = ""
    manifest: dict[str, Any] = field(default_factory=dict)
    manifest_extra: dict[str, Any] = field(default_factory=dict)

    @property
    def create(self) -> bool:
        return self.base is None

    @property
    def indexed_chunks(self) -> list[Chunk]:
        """The chunks this write extracts and indexes anew: every chunk on a re-extraction, else the new."""
        return self.chunks if self.reextract else self.new_chunks

    def run(self, new_docs: list[Document], remove_ids: set[str]) -> BuildSummary:
        """Every stage in order, then publish; returns what the new version holds."""
        with build_collections():
            return self._run(new_docs, remove_ids)

    def _run(self, new_docs: list[Document], remove_ids: set[str]) -> BuildSummary:
        self.chunk(new_docs, remove_ids)
        analyzer = Analyzer(self.config.sudachi_mode)
        self.entities(analyzer)
        beside = shard_workers(len(self.indexed_chunks)) > 1
        # The pool's exit waits for the vector files even when the graph fails: the staging directory is
        # removed only after.
        with contextlib.ExitStack() as stack, ThreadPoolExecutor(1, "vectors") as pool:
            keyword = self.keyword(analyzer, beside)
            if keyword is not None:
                stack.enter_context(keyword)
            finish = self.vectors()
            finishing = pool.submit(finish) if beside else None
            embedding = finish() if finishing is None else None
            graph_counts = self.graph(analyzer)
            if finishing is not None:
                embedding = finishing.result()
            if keyword is not None:
                self.stages.seconds["keyword"] = keyword.result()
        self.tables()
        self.manifest = {
            "version": self.version,
            "createdAt": datetime.now(UTC).isoformat(),
            "parent": self.base.version if self.base else None,
            "hybridragVersion": _package_version(),
            "config": asdict(self.config),
            "analyzer": analyzer.settings(),
            "embedding": embedding,
            "counts": self.counts,
            "graph": graph_counts,
            "stageSeconds": {k: round(v, 3) for k, v in self.stages.seconds.items()},
            "engine": self.passages.name if self.passages is not None else "local",
        }
        return self.publish()

    def chunk(self, new_docs: list[Document], remove_ids: set[str]) -> None:
        """The new documents' chunks (and vectors and mentions, when the passage engine makes them), and the
        documents the write removes (`remove_ids` held by the base: deleted or replaced)."""
        self.new_docs, self.remove_ids = new_docs, remove_ids
        if self.passages is not None and new_docs:
            with self.stages.timed("chunk+embed"):
                made = self.passages.chunk_and_embed(
                    new_docs, self.config, self.embedder, version=self.version if self.create else None
                )
            self.new_chunks, self.new_vectors = made.chunks, made.vectors
            self.given_mentions, self.written = made.mentions, made.written
        else:
            with self.stages.timed("chunk"):
                for doc in self.progress(new_docs, "chunk", len(new_docs)):
                    self.new_chunks.extend(make_chunks(doc, self.config))
        if self.base is not None and remove_ids:
            held = DocumentTable(self.base.path / DOCUMENTS).prefetch(sorted(remove_ids))
            self.removed = [held[i] for i in sorted(remove_ids) if i in held]
        self.titles = {d.doc_id: d.title for d in new_docs}
        self.dates = {d.doc_id: parse_date(d.date) for d in new_docs}
        if self.base is None:
            self.loaded, self.docs, self.chunks = True, list(new_docs), list(self.new_chunks)

    def load_all(self) -> None:
        """Every document and chunk the new version keeps as objects, with their titles and dates: the
        base's (its table and segments) that the write does not remove, then the new ones."""
        if self.loaded:
            return
        self.loaded = True
        assert self.base is not None
        gone = self.remove_ids
        old_chunks = read_version_table(self.base.path, CHUNKS).to_pylist()
        self.chunks = [chunk_from_row(r) for r in old_chunks if r["doc_id"] not in gone] + self.new_chunks
        by_doc = _by_document(self.chunks)

        def parts(doc_id: str) -> list[tuple[int, str]]:
            return [(c.start, c.text) for c in by_doc.get(doc_id, [])]

        old_docs = read_version_table(self.base.path, DOCUMENTS).to_pylist()
        self.docs = [document_from_row(r, parts) for r in old_docs if r["doc_id"] not in gone] + self.new_docs
        self.titles = {d.doc_id: d.title for d in self.docs}
        self.dates = {d.doc_id: parse_date(d.date) for d in self.docs}

    def entities(self, analyzer: Analyzer) -> None:
        """Mentions of the new chunks (every chunk's with `reextract`), the kept chunks' from the base, and
        each extracted chunk's entity types."""
        base_extraction = self.extraction = _extraction(self.base)
        if not self.config.graph:
            return
        base = self.base
        if self.reextract:
            self.load_all()
        # A write that leaves the graph behind needs the new chunks' mentions only.
        if base is not None and not self.reextract and not self.carries_graph:
            self.load_all()
            self.mentions = read_all_mentions(base.path, {c.chunk_id for c in self.chunks})
        extract = self.indexed_chunks
        with self.stages.timed("entities"):
            extractor = EntityExtractor(analyzer, tagger_types=self.config.name_typing == "tagger")
            if self.given_mentions is not None:  # the engine extracted them (on the cluster)
                self.mentions.update((c.chunk_id, self.given_mentions[c.chunk_id]) for c in self.new_chunks)
            else:
                self._extract(extractor, extract)
            for c in extract:
                types = chunk_types(self.mentions[c.chunk_id])
                if self.reextract and types != list(c.entity_types):
                    self.retyped.append(c)
                c.entity_types = types
        # What extracted the stored mentions: kept while nothing is extracted; "mixed" once another
        # extractor adds to them (a regraph with `reextract` makes them one extractor's again).
        if base is None or self.reextract or (extract and base_extraction == extractor.version):
            self.extraction = extractor.version
        elif extract:
            self.extraction = "mixed"

    def _extract(self, extractor: EntityExtractor, extract: list[Chunk]) -> None:
        """The chunks' mentions, over shards of them side by side (`shards`: a large write's extraction is
        single-threaded Python but for the tagger), each by an extractor of the same version."""
        title_docs = sorted({c.doc_id for c in extract})
        read = extractor.extract_titles([self.titles[doc_id] for doc_id in title_docs])
        title_mentions = dict(zip(title_docs, read, strict=True))

        texts, batch = [c.text for c in extract], EXTRACT_BATCH
        # Shards cut where the batches do: the tagger reads a batch's sentences together.
        with Shards(texts, shard_workers(len(texts)), align=batch) as shards:
            # This process' shard runs on its share of the cores, as the children do.
            ours = extractor if shards.cores is None else extractor.on_cores(shards.cores)

            def here(texts: Sequence[str], *_settings: Any) -> tuple[str, list[list[Mention]]]:
                return _extracted(ours, texts, batch, self.progress)

            tagger_types = self.config.name_typing == "tagger"
            parts = shards.map(extract_texts, self.config.sudachi_mode, tagger_types, batch, here=here)
        if any(version != extractor.version for version, _found in parts):
            raise RuntimeError(f"a shard's extractor is not {extractor.version}: {[v for v, _f in parts]}")
        found = [mentions for _version, part in parts for mentions in part]
        for c, chunk_mentions in zip(extract, found, strict=True):
            self.mentions[c.chunk_id] = title_mentions[c.doc_id] + chunk_mentions

    def keyword(self, analyzer: Analyzer, beside: bool = False) -> Aside | None:
        """The keyword index; with `beside`, written by a child process while this one goes on (returned:
        its `result()` is the stage's seconds)."""
        chunks = self.indexed_chunks
        titles, dates = self.titles, self.dates
        rows = [
            (c.chunk_id, c.doc_id, c.file_id, titles[c.doc_id], c.text, dates[c.doc_id], list(c.entity_types))
            for c in chunks
        ]
        # A re-extraction writes the keyword index anew, in the chunks' order: deleting and re-adding the
        # re-typed chunks would leave the deleted copies in tantivy's term statistics (BM25) until a
        # merge, so scores would drift from a fresh build's.
        deleted = [] if self.reextract else [d.doc_id for d in self.removed]
        path, create, reset = self.staging / "keyword", self.create, self.reextract
        if beside:
            return Aside(write_keyword, rows, self.config.sudachi_mode, path, create, reset, deleted)
        with self.stages.timed("keyword"):
            _write_keyword(analyzer, self.progress(rows, "keyword", len(rows)), path, create, reset, deleted)
        return None

    def vectors(self) -> Callable[[], dict[str, Any] | None]:
        """The vector table (embedded here); returns what finishes the stage, the serving files (native code
        mostly: `run` may call it on a thread), which returns the manifest's `embedding` (None: no model)."""
        embedder, base, written = self.embedder, self.base, self.written
        if embedder is None:
            return lambda: None
        if base is not None and base.manifest.get("embedding", {}).get("dim") not in (None, embedder.dim):
            raise versions.IndexUnavailable("embedding dimension differs from the index being updated")
        written_files: dict[str, dict[str, Any]] = {}
        if written is not None:
            with self.stages.timed("vectors"):
                # The workers wrote the table on the object store; the local version gets a checked copy.
                written_files = written.fetch(self.staging / "vectors")
            if written.rows != len(self.new_chunks):
                raise ValueError(f"the engine wrote {written.rows} vectors for {len(self.new_chunks)} chunks")
        vw = VectorIndexWriter(self.staging / "vectors", embedder.dim, create=self.create and written is None)
        if self.removed:
            vw.delete_documents([d.doc_id for d in self.removed], self._removed_chunk_ids())
        if written is None:
            self._embed_new_chunks(vw, embedder)
        return lambda: self._finish_vectors(vw, embedder, written_files)

    def _finish_vectors(
        self, vw: VectorIndexWriter, embedder: Embedder, written_files: dict[str, dict[str, Any]]
    ) -> dict[str, Any]:
        base, written = self.base, self.written
        with self.stages.timed("vectors"):
            vw.set_entity_types({c.chunk_id: c.entity_types for c in self.retyped})
            # An update's rows go into a segment of the serving files (rows the engine wrote are not known
            # here: those files are written anew).
            segment = self.version if base is not None and written is None else None
            # A new table (a fragment per batch added) is compacted before it is served, and so is one whose
            # rows were retyped (the update leaves deleted rows behind, and the serving files could then not
            # read the vectors in place but would copy them all as float32); one the engine's workers wrote
            # to the object store is left as they wrote it (compacting would upload it again: the first merge
            # folds it).
            compact = written is None and (base is None or bool(self.retyped))
            ann = vw.finish(segment=segment, compact=compact)
        embedding = {
            "model": self.config.embedding_model,
            "name": embedder.name,
            "dim": embedder.dim,
            # Which runtime embedded the passages (torch or onnx-int8); any of them can query the index.
            "encoder": getattr(embedder, "encoder", "torch"),
            "device": getattr(embedder, "device", "cpu"),
            **ann,
        }
        if written is not None:
            embedding["writtenBy"] = self.passages.name if self.passages is not None else "local"
            # Files already on the object store, byte for byte (remote.RemoteIndex.upload skips them).
            self.manifest_extra[versions.WRITTEN_TO_STORE] = written_files
        return embedding

    def _removed_chunk_ids(self) -> list[str]:
        """The base's passages of the documents this write removes (looked up, not scanned; once a write:
        the vectors and the graph's links both drop them)."""
        if self.removed_chunks is None:
            assert self.base is not None
            table = ChunkTable(self.base.path / CHUNKS)
            self.removed_chunks = [c.chunk_id for d in self.removed for c in table.of_doc(d.doc_id)]
        return self.removed_chunks

    def _embed_new_chunks(self, vw: VectorIndexWriter, embedder: Embedder) -> None:
        """The new chunks embedded `EMBED_BATCH` at a time and written `VECTOR_WRITE_ROWS` at a time."""
        chunks = self.new_chunks
        firsts = range(0, len(chunks), EMBED_BATCH)  # each embedding batch's first row
        start, held, rows = 0, list[np.ndarray](), 0
        for first in self.progress(firsts, "embed", len(firsts)):
            if self.new_vectors is not None:
                vectors = self.new_vectors[first : first + EMBED_BATCH]
            else:
                with self.stages.timed("embed"):
                    vectors = embedder.embed_passages(
                        [
                            embedding_text(self.titles[c.doc_id], c.text)
                            for c in chunks[first : first + EMBED_BATCH]
                        ]
                    )
            expected = min(EMBED_BATCH, len(chunks) - first)
            if len(vectors) != expected:  # the rows are matched to the chunks by count: never misaligned
                raise RuntimeError(f"the embedder returned {len(vectors)} vectors for {expected} passages")
            held.append(vectors)
            rows += len(vectors)
            if rows >= VECTOR_WRITE_ROWS:
                self._write_vectors(vw, start, held)
                start, held, rows = start + rows, [], 0
        self._write_vectors(vw, start, held)

    def _write_vectors(self, vw: VectorIndexWriter, start: int, held: list[np.ndarray]) -> None:
        """One add of the new chunks' rows from `start` on, as many as `held`'s vectors (batches in order)."""
        if not held:
            return
        with self.stages.timed("vectors"):
            vectors = held[0] if len(held) == 1 else np.concatenate(held)
            batch = self.new_chunks[start : start + len(vectors)]
            vw.add(
                {
                    "chunk_id": [c.chunk_id for c in batch],
                    "doc_id": [c.doc_id for c in batch],
                    "file_id": [c.file_id for c in batch],
                    "date": [self.dates[c.doc_id] for c in batch],
                    "entity_types": [c.entity_types for c in batch],
                },
                vectors,
            )

    def graph(self, analyzer: Analyzer | None = None) -> dict[str, Any] | None:
        """The graph, its record and the arrays the service maps; returns the manifest's `graph` counts."""
        if not self.config.graph:
            return None
        if self.carries_graph:
            return self._carry_graph(analyzer or Analyzer(self.config.sudachi_mode))
        self.load_all()
        chunks, embedder = self.chunks, self.embedder
        with self.stages.timed("graph"):
            graph = build_graph(
                ChunkMentions(
                    c.chunk_id, c.file_id, c.text, self.mentions.get(c.chunk_id, ()), self.titles[c.doc_id]
                )
                for c in chunks
            )
            write_mentions(self.staging / MENTIONS, self.mentions, [c.chunk_id for c in chunks])
            # Written, and nothing after this reads them: the Python objects of the arrays and tables below
            # (a large build's last steps, near its memory's peak) reuse their memory instead of new heap.
            self.mentions, self.given_mentions = {}, None
            for segment in mention_segments(self.staging):  # folded into mentions.arrow
                segment.unlink()
            # The graph holds every passage: no link waits for it.
            (self.staging / "graph" / DELTA).unlink(missing_ok=True)
        community_vectors = entity_vectors = None
        if embedder is not None and self.config.graph_synonyms and graph.entities:
            # Before the arrays: the walk's matrices hold the synonym edges.
            with self.stages.timed("synonyms"):
                entity_vectors = entity_name_vectors(self.base, graph.entities, embedder)
                graph.synonyms = synonym_pairs(graph.entities, entity_vectors)
        # The reports' vectors are embedded beside the arrays' derivation, which reads neither them nor the
        # embedder: a build's last steps ran one after the other on one core (benchmarks/docs/scale.md, "Ten
        # million"). The pool's exit waits for the embedding when the arrays fail.
        with ThreadPoolExecutor(1, "reports") as pool:
            reports = (
                pool.submit(self._embed_reports, embedder, [cm.report for cm in graph.communities])
                if embedder is not None and graph.communities
                else None
            )
            with self.stages.timed("graph"):
                # What the service maps: the walk's matrices against the chunk table's row order.
                order = ListOrder([c.chunk_id for c in chunks])
                GraphArrays.derive(graph, order).save(self.staging / "graph" / GRAPH_ARRAYS)
            if reports is not None:
                community_vectors = reports.result()
        graph.save_vectors(self.staging / "graph", community_vectors, entity_vectors)
        return {
            "format": GRAPH_FORMAT,
            "extraction": self.extraction,
            "builtFor": self.version,
            "entities": len(graph.entities),
            "relations": len(graph.relations),
            "communities": len(graph.communities),
            "synonyms": len(graph.synonyms),
        }

    def _embed_reports(self, embedder: Embedder, reports: list[str]) -> np.ndarray:
        with self.stages.timed("embed"):
            return embedder.embed_passages(reports)

    @property
    def carries_graph(self) -> bool:
        """Whether this write keeps the base's graph as it is (`defer_graph`, and a base whose graph can
        serve a later chunk table: arrays of format 5 or later)."""
        base = self.base
        if not (self.defer_graph and self.config.graph) or base is None or self.reextract:
            return False
        if not self.new_chunks and not self.removed:
            return False
        arrays = base.path / "graph" / GRAPH_ARRAYS
        return GraphArrays.present(arrays) and (GraphArrays.format_of(arrays) or 0) >= 5

    def _carry_graph(self, analyzer: Analyzer) -> dict[str, Any]:
        """The base's graph kept as it is (already in the staging copy): the write's cost follows what it
        writes, not the corpus. Its chunk nodes keep the order they were built in (`graph_arrays`), so the
        service serves it beside the new table: chunks deleted since are ruled out of results, chunks added
        since are linked to its entities (`stores.graph_delta`: the walk reaches them one step from there)
        and join the graph at the next merge (`builds.merge`), which reads their mentions from this write's
        own segment."""
        base = self.base
        assert base is not None
        counts = base.manifest.get("graph") or {}
        arrays = self.staging / "graph" / GRAPH_ARRAYS
        with self.stages.timed("graph"):
            if GraphArrays.chunk_order(arrays) is None:
                ids = read_version_table(base.path, CHUNKS, memory_map=True, live=False).column("chunk_id")
                GraphArrays.add_chunk_order(arrays, ids)
            if self.new_chunks:
                segment = mention_segment(self.staging, self.version)
                write_mentions(segment, self.mentions, [c.chunk_id for c in self.new_chunks])
            folder = self.staging / "graph"
            added = delta_links(
                GraphArrays.open(arrays),
                [
                    ChunkMentions(
                        c.chunk_id,
                        c.file_id,
                        c.text,
                        self.mentions.get(c.chunk_id, ()),
                        self.titles[c.doc_id],
                    )
                    for c in self.new_chunks
                ],
                analyzer,
            )
            removed = self._removed_chunk_ids() if self.removed else []
            kept, own = read_delta(folder), GraphArrays.chunk_order(arrays)
            if kept.num_rows and own is not None:  # passages a merge brought into the graph since
                held = np.asarray(own.rows(kept.column("chunk_id").to_pylist())) >= 0
                kept = kept.filter(pa.array(~held))
            write_delta(folder, kept, added, removed)
        return {
            **counts,
            "extraction": self.extraction,
            "builtFor": counts.get("builtFor", base.version),
        }

    def tables(self) -> None:
        """The documents and chunks tables: the base's with this write's rows appended as a segment and the
        rows it removes marked deleted (`stores.segments`); written whole from the objects for
        a new index, a re-extraction (types of kept chunks change) or a base table of an older schema."""
        staging, dates = self.staging, self.dates
        with self.stages.timed("tables"):
            whole = (
                self.base is None
                or self.reextract
                or not segments.appendable(staging, DOCUMENTS, DOCUMENT_SCHEMA)
                or not segments.appendable(staging, CHUNKS, CHUNK_SCHEMA)
            )
            if whole:
                self._whole_tables()
            else:
                gone = sorted(d.doc_id for d in self.removed)  # held by the base: no scan when none
                by_doc = _by_document(self.new_chunks)
                rows = [document_row(d, by_doc.get(d.doc_id, [])) for d in self.new_docs]
                new_docs = pa.Table.from_pylist(rows, DOCUMENT_SCHEMA)
                segments.update_table(staging, DOCUMENTS, new_docs, self.version, "doc_id", gone)
                rows = [chunk_row(c, dates[c.doc_id]) for c in self.new_chunks]
                new_chunks = pa.Table.from_pylist(rows, CHUNK_SCHEMA)
                segments.update_table(staging, CHUNKS, new_chunks, self.version, "doc_id", gone)
            self.counts = {
                "documents": live_row_count(staging, DOCUMENTS),
                "chunks": live_row_count(staging, CHUNKS),
            }

    def _whole_tables(self) -> None:
        self.load_all()
        docs, chunks, dates, staging = self.docs, self.chunks, self.dates, self.staging
        for name in (DOCUMENTS, CHUNKS):
            for path in table_segments(staging, name):
                path.unlink()
            deleted_path(staging, name).unlink(missing_ok=True)
        by_doc = _by_document(chunks)
        rows = [document_row(d, by_doc.get(d.doc_id, [])) for d in docs]
        write_table(staging / DOCUMENTS, rows, DOCUMENT_SCHEMA, "uncompressed")
        rows = [chunk_row(c, dates[c.doc_id]) for c in chunks]
        write_table(staging / CHUNKS, rows, CHUNK_SCHEMA, "uncompressed")
        write_keys(staging / DOCUMENTS, [d.doc_id for d in docs], "doc_id")
        write_keys(staging / CHUNKS, [c.chunk_id for c in chunks], "chunk_id")
        write_keys(staging / CHUNKS, [c.doc_id for c in chunks], "doc_id")

    def publish(self) -> BuildSummary:
        """The manifest written last, the version renamed into place and `current` switched."""
        manifest = {**self.manifest, **self.manifest_extra}
        if self.tasks:
            manifest["tasks"] = list(self.tasks)
        with self.stages.timed("publish"):
            published = versions.publish(self.index_dir, self.staging, manifest)
        return BuildSummary(
            version=self.version,
            path=str(published.path),
            documents=self.counts.get("documents", 0),
            chunks=self.counts.get("chunks", 0),
            added_documents=len(self.new_docs),
            deleted_documents=len(self.removed),
            skipped=[],
            seconds={k: round(v, 3) for k, v in self.stages.seconds.items()},
            bytes_on_disk=disk_bytes(published.path),
        )


def write_version(
    write: VersionWrite, new_docs: list[Document], remove_ids: set[str], report: SourceReport
) -> BuildSummary:
    """Run `write`; on any failure its staging directory is removed and nothing is published."""
    try:
        summary = write.run(new_docs, remove_ids)
    except BaseException:
        shutil.rmtree(write.staging, ignore_errors=True)
        raise
    summary.skipped = [str(s) for s in report.skipped]
    return summary


def entity_name_vectors(
    base: versions.IndexVersion | None, entities: Sequence[Entity], embedder: Embedder
) -> np.ndarray:
    """Name vectors of `entities`, reusing the base version's for entities it already had (ids are
    content hashes of the normalised name, so an id names the same entity in both versions)."""
    known: dict[str, np.ndarray] = {}
    if base is not None and GraphData.present(base.path / "graph"):
        old_vectors = GraphData.load_entity_vectors(base.path / "graph")
        if old_vectors is not None:
            ids = entity_ids(base.path / "graph")
            if len(ids) == len(old_vectors):
                known = {entity_id: old_vectors[i] for i, entity_id in enumerate(ids)}
    missing = [e for e in entities if e.id not in known]
    if missing:
        fresh = embedder.embed_passages([e.name for e in missing])
        known.update({e.id: fresh[i] for i, e in enumerate(missing)})
    return np.stack([known[e.id] for e in entities]).astype(np.float32)


def _extraction(base: versions.IndexVersion | None) -> str:
    """What extracted a version's stored mentions (`EntityExtractor.version`); "rules" for a version from
    before the manifest said (its English names were typed by the word-list rules)."""
    if base is None:
        return ""
    return str((base.manifest.get("graph") or {}).get("extraction", "rules"))


def disk_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def _package_version() -> str:
    try:
        return importlib_metadata.version("hybridrag")
    except importlib_metadata.PackageNotFoundError:
        return "0+unknown"


def _by_document(chunks: Sequence[Chunk]) -> dict[str, list[Chunk]]:
    """Chunks by document id: what holds each document's text (`tables.document_row`)."""
    out: dict[str, list[Chunk]] = defaultdict(list)
    for c in chunks:
        out[c.doc_id].append(c)
    return out
