"""Versioned index directories with an atomic switch of "current".

Layout of an index directory::

    INDEX_DIR/
      current -> versions/<version>      (a symlink, replaced atomically with os.replace)
      versions/<version>/manifest.json   (written last: a version without it is incomplete)
      versions/<version>/documents.arrow, chunks.arrow, keyword/, vectors/, ...
      .staging-<version>/                 (a build in progress; never read by the service)
      .lock                               (one writer at a time)

A build writes a staging directory, fsyncs it, renames it into `versions/` and only then points `current`
at it, so a crash at any point leaves the previous version serving and intact.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from hybridrag.indexing.analysis.text import content_hash
from hybridrag.indexing.stores import quantized, vector_segments
from hybridrag.indexing.stores import vectors as vector_store
from hybridrag.indexing.stores.graph_arrays import FOLDER as GRAPH_ARRAYS
from hybridrag.indexing.stores.graph_arrays import GraphArrays
from hybridrag.indexing.stores.manifest import Manifest
from hybridrag.indexing.stores.tables import (
    CHUNKS,
    DOCUMENTS,
    deleted_path,
    table_files,
    table_segments,
    text_held_by_chunks,
)

MANIFEST = "manifest.json"
# Format 2: a version's tables and vector serving files may carry segments and tombstones beside their
# base files (`stores.segments`, `stores.vector_segments`); a reader of format 1 would miss their rows.
# Format 3: its tables may carry deleted rows (`tables.deleted_path`), which a reader of format 2 would
# serve. Format 4: its graph is stored once, as graph arrays of format 7 with no JSON record beside them
# (`graph_arrays.load_graph`), which a reader of format 3 would look for. Format 5: its documents table
# leaves a document's text to its chunks (`tables.stored_text`: a null text and its `text_gaps`), which a
# reader of format 4 would serve as empty; its graph arrays (format 8) hold no adjacency matrix, which a
# reader of format 4 would look for. Format 6: its vector table stores float16 values, which its serving
# files may read in place (`lance_rows`, pages of format 2) and a reader of format 5 would read as float32
# (and append float32 rows to), or its inverted file holds product-quantized codes, of which a reader of
# format 5 would rescore too few candidates. A version says the lowest format that reads it (one with none
# of these reads as 1 and stays readable by earlier releases).
FORMAT_VERSION = 6
READABLE_FORMATS = (1, 2, 3, 4, 5, 6)
KEEP_VERSIONS = 2
# Manifest key: files a build wrote straight to the index's object store ({path in the version: size, sha256}).
WRITTEN_TO_STORE = "writtenToStore"


class IndexUnavailable(RuntimeError):
    """An index directory that cannot be used, with a message that says what to do."""


@dataclass(frozen=True, slots=True)
class IndexVersion:
    path: Path
    manifest: dict[str, Any]

    @property
    def version(self) -> str:
        return str(self.manifest["version"])

    @property
    def record(self) -> Manifest:
        """The manifest as a typed record (what readers use; builders write `manifest`)."""
        return Manifest.parse(self.manifest)


def published(index_dir: Path) -> Iterator[Manifest]:
    """The manifests of the versions kept under `index_dir` (oldest first); unreadable ones are skipped."""
    folder = index_dir / "versions"
    for path in sorted(folder.glob(f"*/{MANIFEST}")) if folder.is_dir() else []:
        with contextlib.suppress(OSError, ValueError, KeyError):
            yield Manifest.parse(json.loads(path.read_text("utf-8")))


def new_version_name() -> str:
    now = datetime.now(UTC)
    # Microseconds keep names in creation order even for several builds within one second.
    return now.strftime("%Y%m%dT%H%M%S%f") + "-" + content_hash(now.isoformat(), str(os.getpid()), length=6)


@contextlib.contextmanager
def writer_lock(index_dir: Path, wait_s: float = 0.0) -> Iterator[None]:
    """Hold the index directory's writer lock: fails when another build holds it for longer than `wait_s`
    (at once by default; the service's writer waits out a merge's publish)."""
    index_dir.mkdir(parents=True, exist_ok=True)
    with open(index_dir / ".lock", "w") as fh:
        deadline = time.monotonic() + wait_s
        while True:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise IndexUnavailable(f"another build or update is running on {index_dir}") from None
                time.sleep(0.05)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def staging_dir(index_dir: Path, version: str) -> Path:
    path = index_dir / f".staging-{version}"
    path.mkdir(parents=True, exist_ok=False)
    return path


#: tantivy's lock files: never shared between versions.
_LOCK_FILES = (".tantivy-writer.lock", ".tantivy-meta.lock")


def clone_into_staging(index_dir: Path, source: Path, version: str, prefix: str = ".staging-") -> Path:
    """A staging copy of an existing version for an incremental update (`prefix`: ".merge-" for a merge's
    copy, which a write's cleanup leaves alone).

    Files are hard-linked where possible: tantivy and LanceDB never rewrite a data file in place, and the
    Arrow tables and manifest are rewritten whole (new inode), so the served version is never touched.
    """
    target = index_dir / f"{prefix}{version}"

    def link_or_copy(src: str, dst: str) -> None:
        if Path(src).name in _LOCK_FILES:
            # A lock is taken on the file (flock: on its inode): a linked one would make a writer left
            # open on one version (a failed write's, until collected) lock every clone of it.
            Path(dst).touch()
            return
        try:
            os.link(src, dst)
        except OSError:
            shutil.copy2(src, dst)

    shutil.copytree(source, target, copy_function=link_or_copy)
    (target / MANIFEST).unlink()
    return target


def write_json_atomic(path: Path, data: Any) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(data, fh, ensure_ascii=False, indent=2, sort_keys=True)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def _fsync_tree(path: Path) -> None:
    for root, _dirs, files in os.walk(path):
        for name in files:
            fd = os.open(os.path.join(root, name), os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        _fsync_dir(Path(root))


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def publish(index_dir: Path, staging: Path, manifest: dict[str, Any]) -> IndexVersion:
    """Seal a staging directory: manifest last, fsync, move into versions/, switch current atomically."""
    manifest = {**manifest, "formatVersion": format_of(staging)}
    write_json_atomic(staging / MANIFEST, manifest)
    return IndexVersion(adopt(index_dir, staging, str(manifest["version"])), manifest)


def adopt(index_dir: Path, staging: Path, version: str) -> Path:
    """Move a complete staging directory (manifest included) into versions/ and switch current to it."""
    _fsync_tree(staging)
    versions = index_dir / "versions"
    versions.mkdir(exist_ok=True)
    final = versions / version
    os.rename(staging, final)
    _fsync_dir(versions)
    switch_current(index_dir, final)
    return final


def switch_current(index_dir: Path, final: Path) -> None:
    """Point `current` at a version directory inside versions/ (a symlink replaced atomically)."""
    tmp_link = index_dir / f".current-{final.name}"
    if tmp_link.is_symlink() or tmp_link.exists():
        tmp_link.unlink()
    os.symlink(os.path.join("versions", final.name), tmp_link)
    os.replace(tmp_link, index_dir / "current")
    _fsync_dir(index_dir)


def current_version(index_dir: Path) -> IndexVersion:
    """The version `current` points at, checked for completeness."""
    link = index_dir / "current"
    if not link.exists():
        raise IndexUnavailable(
            f"no index at {index_dir}: build one with `hybridrag index build SOURCE --out {index_dir}`"
        )
    path = link.resolve()
    return load_version(path)


def current_target(index_dir: Path) -> str | None:
    """The name of the version `current` points at (cheap: one readlink), or None when there is none."""
    try:
        return Path(os.readlink(index_dir / "current")).name
    except OSError:
        return None


def format_of(folder: Path) -> int:
    """The format a version's files need (see `FORMAT_VERSION`)."""
    arrays = GraphArrays.format_of(folder / "graph" / GRAPH_ARRAYS) or 0
    if vector_store.half_width(folder / "vectors") or _product_quantized(folder / "vectors"):
        return 6
    if arrays >= 8 or any(text_held_by_chunks(path) for path in table_files(folder, DOCUMENTS)):
        return 5  # graph arrays without adjacency files, or texts left to the chunks
    if arrays >= 7:
        return 4
    if any(deleted_path(folder, name).is_file() for name in (CHUNKS, DOCUMENTS)):
        return 3
    vectors = folder / "vectors"
    segmented = (
        table_segments(folder, CHUNKS)
        or table_segments(folder, DOCUMENTS)
        or vector_segments.segment_names(vectors)
        or (vectors / vector_segments.DELETED).is_file()
    )
    return 2 if segmented else 1


def _product_quantized(folder: Path) -> bool:
    try:
        return quantized.codes_kind(folder) == quantized.IVF_KIND
    except (OSError, ValueError):
        return False


def load_version(path: Path) -> IndexVersion:
    manifest_path = path / MANIFEST
    if not manifest_path.is_file():
        raise IndexUnavailable(f"index version {path} is incomplete (no {MANIFEST}); rebuild the index")
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise IndexUnavailable(f"index manifest {manifest_path} is unreadable: {exc}") from exc
    found = manifest.get("formatVersion")
    if isinstance(found, int) and found > FORMAT_VERSION:
        raise IndexUnavailable(
            f"index {path} has format {found}, newer than this release reads (formats "
            f"{', '.join(map(str, READABLE_FORMATS))}): upgrade hybridrag, or rebuild the index with this release"
        )
    if found not in READABLE_FORMATS:
        raise IndexUnavailable(
            f"index {path} has format {found}, this release reads formats "
            f"{', '.join(map(str, READABLE_FORMATS))}; rebuild the index"
        )
    return IndexVersion(path, manifest)


def cleanup(index_dir: Path, keep: int = KEEP_VERSIONS) -> list[Path]:
    """Remove abandoned staging directories and all but the newest `keep` versions (never current)."""
    removed = []
    for path in index_dir.glob(".staging-*"):
        shutil.rmtree(path, ignore_errors=True)
        removed.append(path)
    for path in index_dir.glob(".current-*"):
        path.unlink(missing_ok=True)
    versions = index_dir / "versions"
    if not versions.is_dir():
        return removed
    current = (index_dir / "current").resolve() if (index_dir / "current").exists() else None
    ordered = sorted((p for p in versions.iterdir() if p.is_dir()), key=lambda p: p.name, reverse=True)
    for path in ordered[keep:]:
        if current is not None and path.resolve() == current:
            continue
        shutil.rmtree(path, ignore_errors=True)
        removed.append(path)
    return removed


#: Folders of a version whose entries are reported one by one (the rest count whole).
_SPLIT = ("vectors", "graph", "graph/arrays")
#: A segment a write added beside a file (chunks.<version>.arrow): counted with the file.
_SEGMENT = re.compile(r"^(?P<stem>[^.]+)\.\d{8}T\d{12}-[0-9a-f]+\.(?P<ext>[^/]+)$")


def disk_usage(version: Path) -> dict[str, int]:
    """Bytes of each part of a version: each top-level file or folder, and each entry of `vectors/`,
    `graph/` and `graph/arrays/` (the LanceDB table, the serving codes and float vectors, each of the graph's
    tables and arrays...). A file hard-linked from an older version counts here too: these are the bytes a
    copy of it would take. The segments writes added beside a table or a serving file count with it."""
    parts: dict[str, int] = {}
    pending = sorted(version.iterdir(), reverse=True)
    while pending:
        part = pending.pop()
        if part.is_dir() and str(part.relative_to(version)) in _SPLIT:
            pending.extend(sorted(part.iterdir(), reverse=True))
            continue
        files = [part] if part.is_file() else [f for f in part.rglob("*") if f.is_file()]
        segment = _SEGMENT.match(part.name) if part.is_file() else None
        name = part.with_name(f"{segment['stem']}.{segment['ext']}") if segment else part
        key = str(name.relative_to(version))
        parts[key] = parts.get(key, 0) + sum(f.stat().st_size for f in files)
    return parts


def disk_report(manifest: dict[str, Any], parts: dict[str, int]) -> dict[str, Any]:
    """The version, its chunk count, and its bytes in all and per part, each also per chunk (largest first)."""
    chunks = int((manifest.get("counts") or {}).get("chunks") or 0)
    total = sum(parts.values())

    def per_chunk(n: int) -> float | None:
        return round(n / chunks, 1) if chunks else None

    return {
        "version": manifest.get("version"),
        "chunks": chunks,
        "bytes": total,
        "bytesPerChunk": per_chunk(total),
        "parts": {
            name: {"bytes": n, "bytesPerChunk": per_chunk(n)}
            for name, n in sorted(parts.items(), key=lambda kv: (-kv[1], kv[0]))
        },
    }
