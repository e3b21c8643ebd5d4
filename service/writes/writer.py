"""Writes through the API: a task queue on disk and one writer that applies queued tasks as index versions.

A write (documents to add, files to extract, an id to delete) becomes a task: its JSON record and payload
are written to the task folder (fsynced) before the request is answered, so an acknowledged write survives
a crash. One writer thread takes queued tasks in order, up to `batch_max` documents or after `batch_wait_s`
(writes that come while a batch is applied make up the next one), and applies them with
`IndexBuilder.apply` as one new version (the same incremental add/delete and atomic publish as the CLI; to
the bucket too when the service follows one) without rebuilding the graph: the documents are searchable by
keyword and meaning at once, and by the graph through their links to it (`stores.graph_delta`), and join
the graph at the next merge, which a second thread runs once writes pause (`builds.merge`; writes wait for
its publish only). The version's manifest lists the tasks it holds:
after a crash, a task left `running` is `succeeded` if a version holds it, else queued again. A search
never sees half a batch: it reads one published version.

Per document, a task says what happened: added, replaced (same id, new content), unchanged (same id and
content already indexed: nothing is written), deleted, not_found, or refused with the reason (a file that
cannot be read, a document empty after extraction). One bad file never fails the others.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hybridrag.indexing.analysis.text import content_hash
from hybridrag.indexing.builds.build import BuildConfig, IndexBuilder, NothingToIndex
from hybridrag.indexing.builds.merge import graph_behind, merge_graph, pending_share
from hybridrag.indexing.builds.stages import no_progress
from hybridrag.indexing.documents.sources import (
    SUPPORTED_SUFFIXES,
    Document,
    SourceReport,
    iter_documents,
    make_document,
)
from hybridrag.indexing.stores import versions
from hybridrag.indexing.stores.manifest import Manifest
from hybridrag.indexing.stores.mapped import DocumentTable
from hybridrag.indexing.stores.tables import DOCUMENTS
from hybridrag.pipeline.lifecycle import IndexLifecycle
from hybridrag.pipeline.settings import IndexSettings, WriterSettings
from hybridrag.schemas.documents import DocumentIn, DocumentOutcome, WriteTask
from hybridrag.writes.tasks import TASKS_DIR, TaskStore, initial_outcomes, now, upload_name, write_atomic

log = logging.getLogger("hybridrag.writer")
API_FILE_ID = "api"
# How long a write waits for the index's writer lock (a merge holds it while it publishes).
LOCK_WAIT_S = 300.0
# How much nicer than the service the writer thread runs (its model's worker threads, started by it, inherit
# it): embedding a batch takes the cores searches wait for; at +10 a search's threads get ~90% of a contended
# core, and writes run at full speed when nothing searches.
WRITER_NICE = 10


def document_fingerprint(doc: Document) -> str:
    """What makes two versions of a document the same: title, text, url, date and metadata."""
    meta = json.dumps(doc.metadata, sort_keys=True, ensure_ascii=False)
    return content_hash(doc.title, doc.text, doc.url or "", doc.date or "", meta)


@dataclass(slots=True)
class PendingWrite:
    task: WriteTask
    adds: list[Document]
    deletes: list[str]


class DocumentWriter:
    """Queues write tasks and applies them, in batches, as new versions of the index.

    `workspace` yields the local folder to write in (the index directory, or the mirror of a bucket that is
    uploaded when the block ends); `published` is called after each new version (the engine reloads it).
    """

    def __init__(
        self,
        index_dir: Path,
        batch_max: int = 100,
        batch_wait_s: float = 0.1,
        workspace: Callable[[], contextlib.AbstractContextManager[Path]] | None = None,
        published: Callable[[], Any] | None = None,
        tasks_dir: Path | None = None,
        keep_tasks_s: float = 7 * 86400,
        merge_after_s: float | None = 2.0,
        applied: Callable[[], Iterable[Manifest]] | None = None,
        merge_share: float | None = 0.05,
        device: str = "cpu",
    ) -> None:
        """`merge_after_s`: how long writes must pause before the graph is merged (None: never, in the
        background; `IndexBuilder.merge_graph` or `hybridrag index merge` then does it). `merge_share`: the
        share of the index's passages waiting for the graph at which it is merged whether writes pause or
        not (None: only at a pause), so a stream of writes cannot leave it ever further behind. `applied`: the
        manifests of the versions whose writes count as done after a crash (default: those published in
        `index_dir`; a bucket's writer: those the bucket serves, not its local mirror's). `device`: where
        written passages are embedded (`embedders.DEVICES`)."""
        self.index_dir = index_dir
        self.store = TaskStore(tasks_dir or index_dir / TASKS_DIR)
        self.batch_max = batch_max
        self.batch_wait_s = batch_wait_s
        self.keep_tasks_s = keep_tasks_s
        self._workspace = workspace or self._local
        self._published = published
        self._wake = threading.Condition()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.merge_after_s = merge_after_s
        if merge_share is not None and not 0.0 < merge_share <= 1.0:
            raise ValueError(f"merge_share must be in (0, 1], got {merge_share!r}")
        self.merge_share = merge_share
        self._pending_share = 0.0  # of the passages, waiting for the graph after the last write or merge
        self._applied = applied or (lambda: versions.published(index_dir))
        self._merger: threading.Thread | None = None
        self._last_write = time.monotonic()
        self._merge_wanted = True  # checked once at start, then after each write
        # One workspace at a time (a bucket's mirror is synced and uploaded by each).
        self._workspace_lock = threading.Lock()
        # The passage model, loaded by the first batch and kept (a model load per batch would dominate it).
        self._embedders: dict[tuple[str, str], Any] = {}
        self.device = device

    @contextlib.contextmanager
    def _local(self) -> Iterator[Path]:
        yield self.index_dir

    # -- requests
    def submit_documents(self, documents: list[DocumentIn]) -> WriteTask:
        task = self._new("add")
        task.documents = [DocumentOutcome(id=d.id, status="pending") for d in documents]
        self.store.save(task, {"documents": [d.model_dump(mode="json", by_alias=True) for d in documents]})
        self._notify(task)
        return task

    def submit_files(self, files: list[tuple[str, bytes]], max_file_bytes: int | None = None) -> WriteTask:
        """`files`: (file name, content). Saved with the task and extracted by the writer, not the request; a
        file over `max_file_bytes` is refused in the task at once (the others go ahead)."""
        task = self._new("add")
        folder = self.store.payload_dir(task.task_id) / "files"
        folder.mkdir(parents=True)
        names = []
        for i, (sent, data) in enumerate(files):
            name = upload_name(sent)
            # One folder per file keeps its own name (a title may come from it) whatever the others are called.
            safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in name)[-120:] or "upload"
            entry: dict[str, Any] = {"name": name, "stored": f"{i:04d}/{safe}"}
            if max_file_bytes is not None and len(data) > max_file_bytes:
                entry["refused"] = f"file too large (more than {max_file_bytes:,} bytes)"
            else:
                (folder / f"{i:04d}").mkdir()
                write_atomic(folder / entry["stored"], data)
            names.append(entry)
        task.documents = initial_outcomes({"files": names})
        self.store.save(task, {"files": names})
        self._notify(task)
        return task

    def submit_delete(self, doc_id: str) -> WriteTask:
        task = self._new("delete")
        task.documents = [DocumentOutcome(id=doc_id, status="pending")]
        self.store.save(task, {"delete": [doc_id]})
        self._notify(task)
        return task

    def _new(self, kind: str) -> WriteTask:
        return WriteTask(task_id=uuid.uuid4().hex, kind=kind, status="queued", created_at=now())  # type: ignore[arg-type]

    def _notify(self, task: WriteTask | None = None) -> None:
        if task is not None:
            self.store.enqueue(task)
        with self._wake:
            self._wake.notify_all()

    # -- the writer
    def start(self) -> None:
        """In a daemon thread until `close`: take the writer's lock, recover the tasks a crash left behind,
        then apply queued tasks."""
        self._thread = threading.Thread(target=self._loop, name="document-writer", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        self._notify()

    def recover(self) -> None:
        """A task left `running` by a crash: succeeded when a published version lists it, else queued again
        (a version the crash left in a bucket's local mirror, never uploaded, does not count)."""
        applied = {task_id: m.version for m in self._applied() for task_id in m.tasks}
        for task in self.store.all():
            if task.status != "running":
                continue
            if task.task_id in applied:
                task.status, task.index_version, task.finished_at = "succeeded", applied[task.task_id], now()
                # Its outcomes were computed before the crash and saved with `running`.
            else:
                task.status, task.started_at = "queued", None
                task.documents = initial_outcomes(self.store.payload(task.task_id))
            self.store.save(task)
            if task.status == "queued":
                self.store.enqueue(task)

    def _queued(self) -> list[WriteTask]:
        tasks = [self.store.get(task_id) for task_id in self.store.queued_ids()]
        return [t for t in tasks if t is not None and t.status == "queued"]

    def _loop(self) -> None:
        import fcntl

        _lower_priority(WRITER_NICE)
        # With several worker processes on one index, one of them writes; the others wait here (and take
        # over if it goes away). Their requests queue tasks on disk all the same.
        self.store.folder.mkdir(parents=True, exist_ok=True)
        with open(self.store.folder / ".writer.lock", "w") as lock:
            while not self._stop.is_set():
                try:
                    fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    self._stop.wait(1.0)
            if self._stop.is_set():
                return
            try:
                self.recover()
            except Exception:
                log.exception("recovering write tasks failed")
            if self.merge_after_s is not None:  # the writing process merges what it wrote
                self._merger = threading.Thread(target=self._merge_loop, name="graph-merger", daemon=True)
                self._merger.start()
            self._write_loop()

    def _write_loop(self) -> None:
        pruned_at = 0.0
        while not self._stop.is_set():
            if time.monotonic() - pruned_at > 600:  # finished tasks are kept for a while, then forgotten
                pruned_at = time.monotonic()
                with contextlib.suppress(OSError, ValueError):
                    self.store.prune(self.keep_tasks_s)
            if not self.store.queued_ids():
                with self._wake:
                    self._wake.wait(timeout=0.5)
                continue
            # Let a batch gather: until `batch_max` documents are queued or `batch_wait_s` has passed.
            deadline = time.monotonic() + self.batch_wait_s
            while time.monotonic() < deadline and not self._stop.is_set():
                if sum(len(t.documents) for t in self._queued()) >= self.batch_max:
                    break
                with self._wake:
                    self._wake.wait(timeout=max(0.0, deadline - time.monotonic()))
            try:
                self.run_once()
            except Exception:  # the writer must outlive any one batch
                log.exception("document writer batch failed")

    def run_once(self) -> int:
        """Apply one batch of queued tasks as one version; returns how many tasks it settled."""
        batch: list[WriteTask] = []
        count = 0
        for task in self._queued():
            if batch and count + len(task.documents) > self.batch_max:
                break
            batch.append(task)
            count += len(task.documents)
        if not batch:
            return 0
        for task in batch:
            task.status, task.started_at = "running", now()
            self.store.save(task)
            self.store.dequeue(task.task_id)
        try:
            with self._held() as folder:
                version = self._apply(folder, batch)
                self._pending_share = pending_share(versions.current_version(folder))
            self._last_write, self._merge_wanted = time.monotonic(), True
            # Published (and uploaded, for a bucket). The engine serves it before any task says succeeded,
            # so a caller that waited for its task finds its documents in the very next search.
            if self._published is not None:
                with contextlib.suppress(Exception):
                    self._published()
            for task in batch:
                task.status, task.finished_at, task.index_version = "succeeded", now(), version
                self.store.save(task)
        except Exception as exc:
            log.exception("write batch of %d task(s) failed", len(batch))
            for task in batch:
                if task.status == "running":
                    task.status, task.finished_at = "failed", now()
                    task.error = f"the index was not changed: {type(exc).__name__}: {exc}"[:2000]
                    self.store.save(task)
        for task in batch:
            if task.status in ("succeeded", "failed"):
                self.store.drop_payload(task.task_id)
        return len(batch)

    def _apply(self, folder: Path, batch: list[WriteTask]) -> str:
        """Work out each task's outcomes and publish them as one version in `folder`; returns the version
        that holds the batch (the current one when nothing had to be written)."""
        base = versions.current_version(folder)
        config = BuildConfig.from_manifest(base.manifest)
        resolved = [self._resolve(task) for task in batch]
        # Only the documents the batch names are read (a lookup in the mapped table, not the whole table).
        named = {d.doc_id for p in resolved for d in p.adds} | {i for p in resolved for i in p.deletes}
        held = DocumentTable(base.path / DOCUMENTS).prefetch(sorted(named))
        existing = {doc_id: document_fingerprint(held[doc_id]) for doc_id in named if doc_id in held}
        adds: dict[str, Document] = {}
        deletes: set[str] = set()
        for task, pending in zip(batch, resolved, strict=True):
            for doc, outcome in zip(
                pending.adds, [o for o in task.documents if o.status == "pending"], strict=False
            ):
                outcome.id = doc.doc_id
                old = existing.get(doc.doc_id)
                if doc.doc_id in adds or doc.doc_id in deletes:
                    outcome.status = "replaced"  # an earlier write of this batch touched it: the later wins
                    deletes.discard(doc.doc_id)
                    adds[doc.doc_id] = doc
                elif old is None:
                    outcome.status, adds[doc.doc_id] = "added", doc
                elif old == document_fingerprint(doc):
                    outcome.status = "unchanged"
                else:
                    outcome.status, adds[doc.doc_id] = "replaced", doc
            for doc_id, outcome in zip(pending.deletes, task.documents, strict=False):
                if doc_id in adds:
                    adds.pop(doc_id)
                    outcome.status = "deleted"
                    if doc_id in existing:
                        deletes.add(doc_id)
                elif doc_id in existing and doc_id not in deletes:
                    outcome.status = "deleted"
                    deletes.add(doc_id)
                else:
                    outcome.status, outcome.reason = "not_found", "no document with this id in the index"
            self.store.save(task)  # outcomes known, still `running`: kept across a crash
        version = base.version
        if adds or deletes:
            key = (str(config.embedding_model), config.encoder)
            builder = IndexBuilder(
                folder, config, embedder=self._embedders.get(key), device=self.device, lock_wait_s=LOCK_WAIT_S
            )
            try:
                summary = builder.apply(
                    list(adds.values()), sorted(deletes), [t.task_id for t in batch], defer_graph=True
                )
                version = summary.version
            except NothingToIndex:
                pass
            if builder.embedder is not None:
                self._embedders[key] = builder.embedder
        return version

    # -- the merger
    def merge_due(self) -> bool:
        """Whether the merger merges now: a write asked for it and either writes have paused for
        `merge_after_s` with no task queued, or the passages waiting for the graph are `merge_share` of
        the index or more (a stream of writes is merged as it goes)."""
        if not self._merge_wanted:
            return False
        if self.merge_share is not None and self._pending_share >= self.merge_share:
            return True
        if self.store.queued_ids():
            return False
        return time.monotonic() - self._last_write >= (self.merge_after_s or 0.0)

    def _merge_loop(self) -> None:
        while not self._stop.wait(0.5):
            if not self.merge_due():
                continue
            self._merge_wanted = False  # a write during the merge asks for the next one
            try:
                self.merge_once()
            except versions.IndexUnavailable as exc:  # no index yet, or the writer's lock held too long
                log.debug("no graph merge now: %s", exc)
                self._merge_wanted = True
                self._stop.wait(5.0)
            except Exception:  # a failed merge leaves the served version as it was; the next one retries
                log.exception("graph merge failed")
                self._merge_wanted = True
                self._stop.wait(30.0)

    @contextlib.contextmanager
    def _held(self) -> Iterator[Path]:
        """The workspace (the index folder, mirrored from the bucket when following one), held by this
        writer alone."""
        with self._workspace_lock, self._workspace() as folder:
            yield folder

    def merge_once(self) -> str | None:
        """Merge the graph when writes left it behind; returns the version published (None: nothing to do).
        The build runs in a child process, outside the workspace lock, so writes go on meanwhile."""
        with self._held() as folder:
            if not graph_behind(versions.current_version(folder)):
                return None
        done = merge_graph(
            folder,
            _no_embedder,
            no_progress,
            LOCK_WAIT_S,
            build=lambda merge: merge.build_in_subprocess(cancel=self._stop),
            held=self._held,
        )
        if done is None:
            return None
        merge, summary = done
        with self._held() as folder:
            # Writes made while it built wait for the next merge.
            self._pending_share = pending_share(versions.current_version(folder))
        log.info("graph merged into %s (built for %s)", summary.version, merge.version)
        if self._published is not None:
            with contextlib.suppress(Exception):
                self._published()
        return summary.version

    def _resolve(self, task: WriteTask) -> PendingWrite:
        """The documents a task adds (extracted from its files, when it has files) and the ids it deletes;
        a file or document that cannot be used gets its `refused` outcome here."""
        payload = self.store.payload(task.task_id)
        adds: list[Document] = []
        if "documents" in payload:
            for record, outcome in zip(payload["documents"], task.documents, strict=True):
                try:
                    doc = document_from_api(DocumentIn.model_validate(record))
                except ValueError as exc:
                    outcome.status, outcome.reason = "refused", str(exc)[:500]
                    continue
                adds.append(doc)
        for entry, outcome in zip(payload.get("files", []), list(task.documents), strict=False):
            if entry.get("refused"):
                continue
            path = self.store.payload_dir(task.task_id) / "files" / entry["stored"]
            if path.suffix.lower() not in SUPPORTED_SUFFIXES:
                outcome.status = "refused"
                outcome.reason = f"unsupported file type {path.suffix or '(none)'}: use one of {', '.join(SUPPORTED_SUFFIXES)}"
                continue
            report = SourceReport()
            # A document whose only text is its title (the reader's fallback) had nothing in it.
            docs = [d for d in iter_documents(path, report) if d.text.strip() != d.title.strip()]
            if not docs:
                outcome.status = "refused"
                outcome.reason = report.skipped[0].reason if report.skipped else "no text after extraction"
                continue
            for doc in docs:
                doc.file_id = entry["name"]
                doc.doc_id = "d-" + content_hash(entry["name"], doc.title, doc.text)
            adds.extend(docs[:1])
            if len(docs) > 1:  # a JSON-lines file: one outcome per line
                extra = [DocumentOutcome(source=entry["name"], status="pending") for _ in docs[1:]]
                at = task.documents.index(outcome) + 1
                task.documents[at:at] = extra
                adds.extend(docs[1:])
        return PendingWrite(task, adds, list(payload.get("delete", [])))


def _lower_priority(increment: int) -> None:
    """Make the calling thread nicer by `increment` (Linux: a thread's nice value is its own, and threads it
    starts inherit it). Best effort: where it cannot be done, the thread runs as it was."""
    with contextlib.suppress(AttributeError, OSError):
        tid = threading.get_native_id()
        os.setpriority(os.PRIO_PROCESS, tid, min(19, os.getpriority(os.PRIO_PROCESS, tid) + increment))


def _no_embedder(_config: BuildConfig) -> None:
    return None  # the merge's child process loads its own model


def document_from_api(doc: DocumentIn) -> Document:
    """An API document as the index keeps it (the same normalisation as a JSON-lines source)."""
    record: dict[str, Any] = {"title": doc.title, "text": doc.text, "metadata": dict(doc.metadata)}
    if doc.url:
        record["url"] = doc.url
    if doc.date:
        record["date"] = doc.date
    made = make_document(record, doc.file_id or API_FILE_ID, doc.id)
    if made is None:
        raise ValueError("the document is empty")
    return made


def writer_for(settings: WriterSettings, index: IndexSettings, engine: IndexLifecycle) -> DocumentWriter:
    """The documents API's writer for a service: on the index directory, or on the mirror of the followed
    bucket (each version uploaded there); the engine loads every version it publishes at once."""

    def published() -> None:
        engine.sync_remote()
        engine.reload_if_switched()

    kwargs: dict[str, Any] = {
        "batch_max": settings.documents_batch_max,
        "batch_wait_s": settings.documents_batch_wait_s,
        "keep_tasks_s": settings.documents_keep_tasks_s,
        "merge_after_s": settings.documents_merge_after_s,
        "merge_share": settings.documents_merge_share,
        "device": settings.device,
        "published": published,
    }
    if index.index_url is not None:
        from hybridrag.indexing.stores.remote import RemoteIndex, remote_workspace

        url, cache = index.index_url, index.cache_dir
        kwargs["workspace"] = lambda: remote_workspace(url, cache)
        kwargs["applied"] = lambda: RemoteIndex.open(url).lineage()
        kwargs["tasks_dir"] = cache / "tasks" / index.index_dir.name
    return DocumentWriter(index.index_dir, **kwargs)
