"""Merging the graph: a graph that writes left behind, rebuilt off the write path and attached to the newest
version.

A write through the documents API (or `index add --defer-graph`) keeps its base's graph as it is
(`stages.VersionWrite._carry_graph`): the new passages are searchable by keyword and meaning at once, and join
the graph (its entities, relations, Leiden communities and reports) at the next merge. A merge runs in three
steps so that writes wait for its publish only:

1. `GraphMerge.take` (writer's lock held, milliseconds): the current version hard-linked into
   `.merge-<version>` (a write's cleanup leaves it alone), so later writes and cleanups cannot take it away.
2. `GraphMerge.build` (no lock): the graph built from that copy's chunks and mentions, exactly as a full
   build of the same documents builds it, written into the copy.
3. `GraphMerge.attach` (writer's lock held): the newest version cloned, its graph replaced by the merged one,
   published. Writes made during the build are still behind the merged graph (it keeps its own chunk order,
   `stores.graph_arrays`), and the next merge takes them.

Step 2 also compacts the copy's tables and vector serving files (the segments and tombstones writes added,
`stores.segments`, `stores.vector_segments`), and step 3 takes them too when no write came in between: a
pause in writes leaves every store as a full build writes it.
"""

from __future__ import annotations

import contextlib
import fcntl
import multiprocessing
import os
import shutil
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow.compute as pc

from hybridrag.indexing.builds.config import BuildConfig, BuildSummary
from hybridrag.indexing.builds.shards import build_collections
from hybridrag.indexing.builds.stages import Stages, VersionWrite, disk_bytes, no_progress
from hybridrag.indexing.models.embedders import Embedder
from hybridrag.indexing.stores import quantized, segments, vector_segments, versions
from hybridrag.indexing.stores.graph_delta import DELTA, read_delta
from hybridrag.indexing.stores.tables import (
    CHUNKS,
    DOCUMENTS,
    MENTIONS,
    chunk_from_row,
    mention_segments,
    read_all_mentions,
    read_version_table,
    table_segments,
)
from hybridrag.indexing.stores.vectors import LANCE_FOLDER, compact_table, vector_table

MERGE_PREFIX = ".merge-"
MERGE_LOCK = ".merge.lock"


def graph_behind(version: versions.IndexVersion) -> bool:
    """Whether the version's graph was built for an earlier version (writes since left it behind)."""
    graph = version.manifest.get("graph") or {}
    built_for = graph.get("builtFor")
    return bool(graph) and built_for is not None and built_for != version.version


def pending_share(version: versions.IndexVersion) -> float:
    """The share of the version's passages its graph does not hold yet (written since the graph was built
    and linked to it, `stores.graph_delta`): 0.0 when the graph holds them all."""
    if not graph_behind(version):
        return 0.0
    chunks = int((version.manifest.get("counts") or {}).get("chunks") or 0)
    links = read_delta(version.path / "graph")
    if not chunks or not links.num_rows:
        return 0.0
    return min(1.0, pc.count_distinct(links.column("chunk_id")).as_py() / chunks)


@contextlib.contextmanager
def merge_lock(index_dir: Path) -> Iterator[bool]:
    """One merge at a time on an index (the service's merger, `index merge`): yields False when another
    holds it. Copies an earlier merge left behind (a crash) are removed by the one that gets it."""
    index_dir.mkdir(parents=True, exist_ok=True)
    with open(index_dir / MERGE_LOCK, "w") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        try:
            for stale in index_dir.glob(f"{MERGE_PREFIX}*"):
                shutil.rmtree(stale, ignore_errors=True)
            yield True
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def merge_graph(
    index_dir: Path,
    embedder: Callable[[BuildConfig], Embedder | None],
    progress: Callable[..., Iterable[Any]],
    lock_wait_s: float = 0.0,
    build: Callable[[GraphMerge], None] | None = None,
    held: Callable[[], contextlib.AbstractContextManager[object]] = contextlib.nullcontext,
) -> tuple[GraphMerge, BuildSummary] | None:
    """One merge, start to end: the merge lock, `take`, the build without the writer's lock (`build`:
    `GraphMerge.build` unless given, e.g. in a child process), `attach`, and the copy discarded whatever
    happened. `held`: what the caller holds around `take` and `attach` (the service's writer: its
    workspace). None when the graph is not behind, another merge runs or a newer graph was published."""
    with merge_lock(index_dir) as mine:
        if not mine:
            return None
        with held():
            merge = GraphMerge.take(index_dir, embedder, progress, lock_wait_s)
        if merge is None:
            return None
        try:
            (build or GraphMerge.build)(merge)
            with held():
                summary = merge.attach()
        finally:
            merge.discard()
    return None if summary is None else (merge, summary)


@dataclass(slots=True)
class GraphMerge:
    """One merge of the graph (see the module's docstring); `discard` removes its copy whatever happened."""

    index_dir: Path
    snapshot: versions.IndexVersion  # the hard-linked copy of the version the graph is built for
    embedder: Embedder | None
    progress: Callable[..., Iterable[Any]]
    lock_wait_s: float = 0.0
    stages: Stages = field(default_factory=Stages)
    counts: dict[str, Any] | None = None

    @classmethod
    def take(
        cls,
        index_dir: Path,
        embedder: Callable[[BuildConfig], Embedder | None],
        progress: Callable[..., Iterable[Any]],
        lock_wait_s: float = 0.0,
    ) -> GraphMerge | None:
        """Step 1: a copy of the current version when its graph is behind (None when it is not)."""
        with versions.writer_lock(index_dir, lock_wait_s):
            current = versions.current_version(index_dir)
            if not graph_behind(current):
                return None
            copy = versions.clone_into_staging(index_dir, current.path, current.version, prefix=MERGE_PREFIX)
        config = BuildConfig.from_manifest(current.manifest)
        return cls(
            index_dir, versions.IndexVersion(copy, current.manifest), embedder(config), progress, lock_wait_s
        )

    @property
    def version(self) -> str:
        """The version whose documents the merged graph holds."""
        return self.snapshot.version

    def build(self) -> None:
        """Step 2: the graph of the copy's chunks, as a full build makes it, written into the copy."""
        with build_collections():
            self._build()

    def _build(self) -> None:
        path, manifest = self.snapshot.path, self.snapshot.manifest
        config = BuildConfig.from_manifest(manifest)
        docs = read_version_table(path, DOCUMENTS).select(["doc_id", "title"]).to_pylist()
        chunks = [chunk_from_row(r) for r in read_version_table(path, CHUNKS).to_pylist()]
        write = VersionWrite(
            self.index_dir,
            path,
            self.snapshot,
            self.version,
            config,
            self.embedder,
            self.progress,
            stages=self.stages,
        )
        write.loaded, write.chunks = True, chunks
        write.titles = {d["doc_id"]: d["title"] for d in docs}
        write.mentions = read_all_mentions(path, {c.chunk_id for c in chunks})
        write.extraction = str((manifest.get("graph") or {}).get("extraction", ""))
        self.counts = write.graph()
        with self.stages.timed("compact"):
            for name in (DOCUMENTS, CHUNKS):
                segments.compact(path, name)
            dim = (manifest.get("embedding") or {}).get("dim")
            if dim is not None and quantized.present(path / "vectors"):
                table = vector_table(path / "vectors")
                # The fragments and versions every write appended to LanceDB, folded and dropped (in
                # the copy: the versions it was linked from keep theirs).
                compact_table(table)
                vector_segments.compact(path / "vectors", table, int(dim))

    def build_in_subprocess(self, cancel: threading.Event | None = None) -> None:
        """`build` in a child process at low priority: the service's writes and searches keep their
        interpreter (a thread building a graph would hold the GIL half the time: writes took ~40 s instead of
        ~10 at 100k chunks while one ran). The child dies with the service (a daemon process, and it exits
        when its parent goes); `cancel` (the writer closing) stops it."""
        context = multiprocessing.get_context("spawn")
        receive, send = context.Pipe(duplex=False)
        args = (send, str(self.index_dir), str(self.snapshot.path), self.snapshot.manifest)
        child = context.Process(target=_build_child, args=args, name="graph-merge", daemon=True)
        child.start()
        send.close()
        try:
            while not receive.poll(0.5):
                if not child.is_alive():
                    raise RuntimeError(
                        f"the merge's process ended without a graph (exit code {child.exitcode})"
                    )
                if cancel is not None and cancel.is_set():
                    raise RuntimeError("the merge was cancelled")
            ok, payload = receive.recv()
        finally:
            if child.is_alive():
                child.kill()
            child.join()
            receive.close()
        if not ok:
            raise RuntimeError(f"the merge failed in its process: {payload}")
        counts, seconds = payload
        self.counts = counts
        for name, value in seconds.items():
            self.stages.seconds[name] = self.stages.seconds.get(name, 0.0) + value

    def attach(self) -> BuildSummary | None:
        """Step 3: the newest version with the merged graph, published; None when a graph at least as new
        was published meanwhile (another merge, a full build)."""
        if self.counts is None:
            raise RuntimeError("attach before build")
        with versions.writer_lock(self.index_dir, self.lock_wait_s):
            current = versions.current_version(self.index_dir)
            graph = current.manifest.get("graph") or {}
            if not graph or str(graph.get("builtFor", current.version)) >= self.version:
                return None
            version = versions.new_version_name()
            staging = versions.clone_into_staging(self.index_dir, current.path, version)
            try:
                with self.stages.timed("publish"):
                    pending = staging / "graph" / DELTA
                    if current.version != self.version and pending.is_file():
                        # Links of passages written during the build: the merged graph does not hold them.
                        os.replace(pending, self.snapshot.path / "graph" / DELTA)
                    shutil.rmtree(staging / "graph")
                    os.rename(self.snapshot.path / "graph", staging / "graph")
                    if current.version == self.version:
                        # The same chunks: the writes' segments folded too (mentions, tables, vectors).
                        self._adopt_compacted(staging)
                    manifest = {
                        **current.manifest,
                        "version": version,
                        "parent": current.version,
                        "createdAt": datetime.now(UTC).isoformat(),
                        # Built for the chunks of the version it copied: when no write came since, those
                        # are this version's own.
                        "graph": {
                            **self.counts,
                            "builtFor": version if current.version == self.version else self.version,
                        },
                        "stageSeconds": {k: round(v, 3) for k, v in self.stages.seconds.items()},
                        "merge": {"graphOf": self.version},
                    }
                    manifest.pop("tasks", None)
                    published = versions.publish(self.index_dir, staging, manifest)
            except BaseException:
                shutil.rmtree(staging, ignore_errors=True)
                raise
            versions.cleanup(self.index_dir)
        counts = manifest.get("counts") or {}
        return BuildSummary(
            version=version,
            path=str(published.path),
            documents=int(counts.get("documents", 0)),
            chunks=int(counts.get("chunks", 0)),
            added_documents=0,
            deleted_documents=0,
            skipped=[],
            seconds={k: round(v, 3) for k, v in self.stages.seconds.items()},
            bytes_on_disk=disk_bytes(published.path),
        )

    def _adopt_compacted(self, staging: Path) -> None:
        copy = self.snapshot.path
        for segment in mention_segments(staging):
            segment.unlink()
        os.replace(copy / MENTIONS, staging / MENTIONS)
        for name in (DOCUMENTS, CHUNKS):
            if not table_segments(copy, name):
                segments.adopt_compacted(copy, staging, name)
        if quantized.present(copy / "vectors") and not vector_segments.segment_names(copy / "vectors"):
            vector_segments.adopt_compacted(copy / "vectors", staging / "vectors")
            shutil.rmtree(staging / "vectors" / LANCE_FOLDER)
            os.rename(copy / "vectors" / LANCE_FOLDER, staging / "vectors" / LANCE_FOLDER)

    def discard(self) -> None:
        shutil.rmtree(self.snapshot.path, ignore_errors=True)


def _build_child(send: Any, index_dir: str, path: str, manifest: dict[str, Any]) -> None:
    """The merge's child process: builds, sends (True, (counts, seconds)) or (False, the error)."""
    threading.Thread(target=_exit_with_parent, args=(os.getppid(),), daemon=True).start()
    try:
        result: tuple[bool, Any] = (True, _build_copy(index_dir, path, manifest))
    except BaseException as exc:  # reported to the parent, which logs it
        result = (False, f"{type(exc).__name__}: {exc}")
    send.send(result)
    send.close()


def _exit_with_parent(parent: int) -> None:
    """A service killed with -9 leaves no merge running: the child goes when it is handed to another parent."""
    while os.getppid() == parent:
        time.sleep(1.0)
    os._exit(1)


def _build_copy(
    index_dir: str, path: str, manifest: dict[str, Any]
) -> tuple[dict[str, Any] | None, dict[str, float]]:
    """`GraphMerge.build` of a merge's copy, in a child process (`build_in_subprocess`)."""
    with contextlib.suppress(OSError):
        os.nice(10)  # the service's writes and searches first
    from hybridrag.indexing.models.embedders import load_embedder

    config = BuildConfig.from_manifest(manifest)
    embedder = load_embedder(config.embedding_model, config.encoder) if config.embedding_model else None
    merge = GraphMerge(Path(index_dir), versions.IndexVersion(Path(path), manifest), embedder, no_progress)
    merge.build()
    return merge.counts, merge.stages.seconds
