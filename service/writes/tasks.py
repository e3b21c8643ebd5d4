"""The documents API's durable task queue: a task's JSON record, its payload and a queue marker on disk,
each written atomically and fsynced before the request is answered, so an acknowledged write survives a
crash; and the names uploaded files are known by."""

from __future__ import annotations

import json
import os
import shutil
import threading
import unicodedata
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from hybridrag.schemas.documents import DocumentOutcome, WriteTask

TASKS_DIR = ".tasks"


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


class TaskStore:
    """Tasks as JSON files (and payload folders) under `folder`; every change is an atomic, fsynced write."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder  # made by the first write, so a service that never writes leaves no trace
        self._lock = threading.Lock()

    def _record(self, task_id: str) -> Path:
        return self.folder / f"{task_id}.json"

    def payload_dir(self, task_id: str) -> Path:
        return self.folder / task_id

    def save(self, task: WriteTask, payload: dict[str, Any] | None = None) -> None:
        with self._lock:
            self.folder.mkdir(parents=True, exist_ok=True)
            if payload is not None:
                folder = self.payload_dir(task.task_id)
                folder.mkdir(exist_ok=True)
                write_atomic(folder / "payload.json", json.dumps(payload, ensure_ascii=False).encode())
            write_atomic(self._record(task.task_id), task.model_dump_json(by_alias=True).encode())
            fd = os.open(self.folder, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)

    def get(self, task_id: str) -> WriteTask | None:
        if not task_id.replace("-", "").isalnum() or len(task_id) > 64:
            return None
        try:
            return WriteTask.model_validate_json(self._record(task_id).read_bytes())
        except (OSError, ValueError):
            return None

    def payload(self, task_id: str) -> dict[str, Any]:
        data: dict[str, Any] = json.loads((self.payload_dir(task_id) / "payload.json").read_text("utf-8"))
        return data

    def all(self) -> list[WriteTask]:
        tasks = []
        for path in sorted(self.folder.glob("*.json")):
            task = self.get(path.stem)
            if task is not None:
                tasks.append(task)
        return sorted(tasks, key=lambda t: (t.created_at, t.task_id))

    def drop_payload(self, task_id: str) -> None:
        shutil.rmtree(self.payload_dir(task_id), ignore_errors=True)

    def prune(self, keep_s: float) -> int:
        """Forget finished tasks that finished more than `keep_s` seconds ago; returns how many."""
        cutoff = datetime.now(UTC).timestamp() - keep_s
        removed = 0
        for task in self.all():
            finished = task.finished_at if task.status in ("succeeded", "failed") else None
            if finished and datetime.fromisoformat(finished).timestamp() < cutoff:
                self._record(task.task_id).unlink(missing_ok=True)
                self.drop_payload(task.task_id)
                removed += 1
        return removed

    # A queued task also has a marker file, named so that names sort in queue order: listing the markers is
    # cheap however many finished tasks are kept, and every worker process sees the same queue.
    def enqueue(self, task: WriteTask) -> None:
        queue = self.folder / "queue"
        queue.mkdir(parents=True, exist_ok=True)
        (queue / f"{task.created_at}_{task.task_id}").touch()

    def dequeue(self, task_id: str) -> None:
        for marker in (self.folder / "queue").glob(f"*_{task_id}"):
            marker.unlink(missing_ok=True)

    def queued_ids(self) -> list[str]:
        queue = self.folder / "queue"
        return [p.name.rsplit("_", 1)[1] for p in sorted(queue.iterdir())] if queue.is_dir() else []


#: Longest upload name kept as a file id (a file system's name limit; the suffix survives the cut).
MAX_UPLOAD_NAME = 255


def upload_name(sent: str) -> str:
    """The name an uploaded file is known by (`fileId`, and its document id's seed): the last part of the
    client's path, whichever separator it used, without control or format characters, at most
    `MAX_UPLOAD_NAME` characters. A client's folders say nothing about the file and would make the same
    bytes a second document; "upload" when nothing is left."""
    base = sent.replace("\\", "/").rsplit("/", 1)[-1]
    base = "".join(c for c in base if unicodedata.category(c) not in ("Cc", "Cf", "Zl", "Zp")).strip()
    if base in ("", ".", ".."):
        return "upload"
    if len(base) > MAX_UPLOAD_NAME:
        stem, dot, suffix = base.rpartition(".")
        keep = f".{suffix}" if dot and stem and len(suffix) <= 16 else ""
        base = base[: MAX_UPLOAD_NAME - len(keep)] + keep
    return base


def initial_outcomes(payload: dict[str, Any]) -> list[DocumentOutcome]:
    """A task's outcomes before it runs: one pending entry per document, file or id."""
    if "documents" in payload:
        return [DocumentOutcome(id=d.get("id"), status="pending") for d in payload["documents"]]
    if "files" in payload:
        return [
            DocumentOutcome(source=f["name"], status="refused", reason=f["refused"])
            if f.get("refused")
            else DocumentOutcome(source=f["name"], status="pending")
            for f in payload["files"]
        ]
    return [DocumentOutcome(id=i, status="pending") for i in payload.get("delete", [])]
