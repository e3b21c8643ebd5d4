"""Building and updating an index: sources -> documents -> chunks -> keyword + vector stores -> new version.

Every operation (full build, add, delete, regraph, a documents-API batch) writes a new version in a staging
directory, stage by stage (`builds.stages`), and publishes it with an atomic switch of "current" (see
`stores.versions`). Rebuilding the same input gives the same document and chunk ids, so builds are idempotent.
"""

from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from hybridrag.indexing.builds.config import BuildConfig, BuildSummary, NothingToIndex
from hybridrag.indexing.builds.merge import merge_graph
from hybridrag.indexing.builds.passages import (
    PassageEngine,
    Passages,
    WrittenVectors,
    embedding_text,
    make_chunks,
    pages_of,
)
from hybridrag.indexing.builds.stages import Stages, VersionWrite, no_progress, write_version
from hybridrag.indexing.documents.sources import Document, SkippedItem, SourceReport, iter_documents
from hybridrag.indexing.models.embedders import Embedder, load_embedder
from hybridrag.indexing.stores import versions
from hybridrag.indexing.stores.mapped import DocumentTable
from hybridrag.indexing.stores.tables import DOCUMENTS

__all__ = [
    "BuildConfig",
    "BuildSummary",
    "IndexBuilder",
    "NothingToIndex",
    "PassageEngine",
    "Passages",
    "WrittenVectors",
    "embedding_text",
    "make_chunks",
    "pages_of",
    "tqdm_progress",
]

log = logging.getLogger("hybridrag.indexing")


def tqdm_progress(enabled: bool | None = None) -> Callable[..., Iterable[Any]]:
    """Progress bars on a terminal only (CI logs stay clean)."""
    show = sys.stderr.isatty() if enabled is None else enabled

    def wrap(items: Iterable[Any], desc: str, total: int | None = None) -> Iterable[Any]:
        if not show:
            return items
        from tqdm import tqdm

        return tqdm(items, desc=desc, total=total, unit="it", dynamic_ncols=True, leave=True)

    return wrap


class IndexBuilder:
    """Builds, extends and prunes the index in `index_dir`. Models load lazily, once."""

    def __init__(
        self,
        index_dir: Path,
        config: BuildConfig | None = None,
        embedder: Embedder | None = None,
        progress: Callable[..., Iterable[Any]] | None = None,
        passages: PassageEngine | None = None,
        device: str = "cpu",
        lock_wait_s: float = 0.0,
    ) -> None:
        self.index_dir = index_dir
        # How long an update waits for another writer (a merge's publish) before it gives up.
        self.lock_wait_s = lock_wait_s
        self.config = config or BuildConfig()
        # Where passages are embedded (`embedders.DEVICES`): a property of this run, not of the index.
        self.device = device
        self._embedder = embedder
        self._progress = progress or no_progress
        self._passages = passages

    @property
    def embedder(self) -> Embedder | None:
        """The passage embedder, once loaded (a caller making many versions can hand it to the next builder)."""
        return self._embedder

    def _get_embedder(self) -> Embedder | None:
        if self.config.embedding_model is None:
            return None
        if self._embedder is None:
            self._embedder = load_embedder(
                self.config.embedding_model, self.config.encoder, device=self.device
            )
        elif self._embedder.name != self.config.embedding_model:
            # The manifest records the configured model: vectors of another model would be mislabelled.
            raise ValueError(
                f"embedder {self._embedder.name!r} does not match the configured model {self.config.embedding_model!r}"
            )
        return self._embedder

    # -- public operations
    def build(self, source: Path) -> BuildSummary:
        """A complete new version from `source`."""
        with versions.writer_lock(self.index_dir):
            versions.cleanup(self.index_dir)
            report = SourceReport()
            stages = Stages()
            with stages.timed("read"):
                docs = _unique(self._progress(iter_documents(source, report), "read", None), report)
            if not docs:
                # An empty version would replace what is served with nothing: refuse, and say why.
                raise NothingToIndex(report)
            return self._write(None, docs, set(), report, stages)

    def add(self, source: Path, defer_graph: bool = False) -> BuildSummary:
        """A new version with the documents of `source` added (a document with the same id is replaced).
        `defer_graph`: keep the current graph; the documents join it at the next merge (`merge_graph`)."""
        with self._on_current() as base:
            report = SourceReport()
            stages = Stages()
            with stages.timed("read"):
                docs = _unique(iter_documents(source, report), report)
            if not docs:
                raise NothingToIndex(report)
            return self._write(base, docs, {d.doc_id for d in docs}, report, stages, defer_graph=defer_graph)

    def delete(self, doc_ids: Sequence[str], defer_graph: bool = False) -> BuildSummary:
        """A new version without the given documents; unknown ids are an error (nothing is changed)."""
        with self._on_current() as base:
            known = DocumentTable(base.path / DOCUMENTS)
            missing = [d for d in doc_ids if d not in known]
            if missing:
                raise KeyError(f"no such document id(s): {', '.join(missing[:10])}")
            return self._write(base, [], set(doc_ids), SourceReport(), Stages(), defer_graph=defer_graph)

    def apply(
        self,
        new_docs: Sequence[Document],
        delete_ids: Sequence[str],
        tasks: Sequence[str] = (),
        defer_graph: bool = False,
    ) -> BuildSummary:
        """One new version with `new_docs` added (replacing documents of the same id) and `delete_ids`
        removed: the documents API's batch of writes, published at once. The manifest lists `tasks` (the
        ids of the writes it holds), so after a crash a write can be told applied or not by the versions."""
        with self._on_current() as base:
            known = DocumentTable(base.path / DOCUMENTS)  # mapped: the ids are looked up, not read
            remove = {d for d in delete_ids if d in known} | {d.doc_id for d in new_docs}
            if not new_docs and not remove:
                raise NothingToIndex(SourceReport())
            return self._write(
                base, list(new_docs), remove, SourceReport(), Stages(), tasks=tasks, defer_graph=defer_graph
            )

    def regraph(self, synonyms: bool | None = None, reextract: bool = False) -> BuildSummary:
        """A new version whose graph is rebuilt from the stored entity mentions (and, with `synonyms`, name
        vectors and synonym edges turned on or off): what an index built by an older release needs to get
        this release's graph. Chunks, keyword index and passage vectors are carried over unchanged.

        With `reextract`, every chunk's mentions are extracted again by this release's extractor (its
        entity types, say): the chunk table and the keyword index are written with the new types, and the
        vector table's rows whose types changed are updated (their vectors are kept, not re-embedded)."""
        with self._on_current() as base:
            if not self.config.graph:
                raise ValueError("the index was built without a knowledge graph")
            if synonyms is not None:
                self.config = replace(self.config, graph_synonyms=synonyms)
            return self._write(base, [], set(), SourceReport(), Stages(), reextract=reextract)

    def merge_graph(self) -> BuildSummary | None:
        """Bring a graph that deferred writes left behind up to date (`builds.merge`): built without the
        writer's lock, attached to the newest version. None when it is not behind or another merge runs."""
        versions.current_version(self.index_dir)  # no index there: IndexUnavailable, and nothing created
        done = merge_graph(self.index_dir, self._merge_embedder, self._progress, self.lock_wait_s)
        return None if done is None else done[1]

    def _merge_embedder(self, config: BuildConfig) -> Embedder | None:
        self.config = config
        return self._get_embedder()

    @contextlib.contextmanager
    def _on_current(self) -> Iterator[versions.IndexVersion]:
        """Every update's start: the writer's lock held, abandoned staging removed, the current version
        read and its recorded settings adopted (an update never changes how the index was built)."""
        versions.current_version(self.index_dir)  # no index there: IndexUnavailable, and nothing created
        with versions.writer_lock(self.index_dir, self.lock_wait_s):
            versions.cleanup(self.index_dir)
            base = versions.current_version(self.index_dir)
            self.config = BuildConfig.from_manifest(base.manifest)
            yield base

    # -- the one write path
    def _write(
        self,
        base: versions.IndexVersion | None,
        new_docs: list[Document],
        remove_ids: set[str],
        report: SourceReport,
        stages: Stages,
        reextract: bool = False,
        tasks: Sequence[str] = (),
        defer_graph: bool = False,
    ) -> BuildSummary:
        version = versions.new_version_name()
        if base is None:
            staging = versions.staging_dir(self.index_dir, version)
        else:
            staging = versions.clone_into_staging(self.index_dir, base.path, version)
        write = VersionWrite(
            self.index_dir,
            staging,
            base,
            version,
            self.config,
            self._get_embedder(),
            self._progress,
            passages=self._passages,
            reextract=reextract,
            defer_graph=defer_graph,
            tasks=tasks,
            stages=stages,
        )
        summary = write_version(write, new_docs, remove_ids, report)
        versions.cleanup(self.index_dir)
        return summary


def _unique(docs: Iterable[Document], report: SourceReport) -> list[Document]:
    """Keep the first document of each id; a repeated id is reported, not silently merged."""
    seen: dict[str, Document] = {}
    for doc in docs:
        if doc.doc_id in seen:
            report.skipped.append(SkippedItem(doc.file_id, None, f"duplicate document id {doc.doc_id!r}"))
            continue
        seen[doc.doc_id] = doc
    return list(seen.values())
