"""Index versions on object storage: S3 and S3-compatible servers (GCS and Azure through the same code).

A remote index is a URL (``s3://bucket/prefix``) holding complete versions and one pointer::

    URL/versions/<version>/...              every file of a local version, byte for byte (``vectors/`` is a
                                            LanceDB dataset, openable in place on the bucket)
    URL/versions/<version>/files.json       size and sha256 of each of those files, written after them
    URL/versions/<version>/manifest.json    written after files.json: a version without it is incomplete
    URL/current                             the version's name: one small object, written last

Builds run on a local mirror (an ordinary index directory) and then upload the new version; a killed upload
leaves `current` on the previous version. Replicas download a version into their own mirror, check every
file against files.json, and only then switch the mirror's `current` (the local hot-swap rules do the rest),
so a half-uploaded, half-downloaded or damaged version is never served.

Credentials come from the standard AWS environment variables / profile (pyarrow's S3 client is the AWS SDK);
``AWS_ENDPOINT_URL`` (or ``AWS_ENDPOINT_URL_S3``) points at a MinIO-style server.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from hybridrag.indexing.analysis.text import content_hash
from hybridrag.indexing.stores import versions
from hybridrag.indexing.stores.manifest import Manifest

SCHEMES = ("s3", "gs", "gcs", "az", "abfs")
CURRENT = "current"
FILES = "files.json"
_CHUNK = 1 << 20


class RemoteUnavailable(RuntimeError):
    """The object store could not be reached or answered with an error."""


class DamagedVersion(RuntimeError):
    """A remote version that is incomplete or whose files do not match their checksums."""

    def __init__(self, version: str, message: str) -> None:
        super().__init__(message)
        self.version = version


def is_remote(location: str | os.PathLike[str]) -> bool:
    """True for an object-storage URL (s3://, gs://, az://), False for a local path."""
    text = str(location)
    return "://" in text and text.split("://", 1)[0].lower() in SCHEMES


def default_cache_dir() -> Path:
    """Where remote indexes are mirrored: $HYBRIDRAG_CACHE_DIR, else ~/.cache/hybridrag."""
    return Path(os.environ.get("HYBRIDRAG_CACHE_DIR") or "~/.cache/hybridrag").expanduser()


def mirror_dir(cache_dir: Path, url: str) -> Path:
    """The local mirror of a remote index inside `cache_dir` (one folder per URL)."""
    return cache_dir / f"index-{content_hash(url.rstrip('/'), length=12)}"


def _s3_options() -> dict[str, Any]:
    from pyarrow.fs import AwsStandardS3RetryStrategy

    options: dict[str, Any] = {
        "connect_timeout": 5.0,
        "request_timeout": 30.0,
        "retry_strategy": AwsStandardS3RetryStrategy(max_attempts=3),
    }
    endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
    if endpoint:
        parts = urlsplit(endpoint)
        options["endpoint_override"] = parts.netloc or parts.path
        options["scheme"] = parts.scheme or "https"
    region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    if region:
        options["region"] = region
    return options


@dataclass(frozen=True, slots=True)
class RemoteIndex:
    """One remote index location: the filesystem client and the bucket/prefix path under it."""

    url: str
    fs: Any  # pyarrow.fs.FileSystem
    root: str

    @classmethod
    def open(cls, url: str) -> RemoteIndex:
        import pyarrow.fs as pafs

        url = url.rstrip("/")
        if not is_remote(url):
            raise ValueError(f"{url} is not an object-storage URL ({', '.join(s + '://' for s in SCHEMES)})")
        scheme, rest = url.split("://", 1)
        if not rest or rest.startswith("/"):
            raise ValueError(f"{url} names no bucket")
        if scheme.lower() == "s3":
            return cls(url, pafs.S3FileSystem(**_s3_options()), rest)
        fs, path = pafs.FileSystem.from_uri(url)
        return cls(url, fs, path)

    def path(self, *parts: str) -> str:
        return "/".join([self.root, *parts])

    # -- small objects
    def _read(self, path: str) -> bytes | None:
        import pyarrow as pa

        try:
            with self.fs.open_input_stream(path) as fh:
                return bytes(fh.read())
        except FileNotFoundError:
            return None
        except (OSError, pa.ArrowException) as exc:
            raise RemoteUnavailable(f"{self.url}: {exc}") from exc

    def _write(self, path: str, data: bytes) -> None:
        import pyarrow as pa

        try:
            with self.fs.open_output_stream(path) as fh:
                fh.write(data)
        except (OSError, pa.ArrowException) as exc:
            raise RemoteUnavailable(f"{self.url}: {exc}") from exc

    def current(self) -> str | None:
        """The version `current` names, or None when nothing was published here yet."""
        data = self._read(self.path(CURRENT))
        return data.decode("utf-8").strip() or None if data is not None else None

    def manifest(self, version: str) -> dict[str, Any] | None:
        data = self._read(self.path("versions", version, versions.MANIFEST))
        return json.loads(data) if data is not None else None

    def lineage(self, limit: int = 64) -> Iterator[Manifest]:
        """The manifests of `current` and its parents, newest first (at most `limit`): the versions whose
        writes the bucket serves. A version uploaded but never made current is not among them."""
        name = self.current()
        for _ in range(limit):
            data = self.manifest(name) if name is not None else None
            if data is None:
                return
            yield Manifest.parse(data)
            name = data.get("parent")

    # -- versions
    def upload(self, version: versions.IndexVersion, progress: Any = None) -> None:
        """Upload a complete local version, then point `current` at it (the last write)."""
        name = version.version
        files: dict[str, dict[str, Any]] = {}
        # What the build wrote straight to this store (a Ray build's vector table): skipped where the local
        # copy is the same bytes.
        on_store = version.manifest.get(versions.WRITTEN_TO_STORE) or {}
        local = sorted(p for p in version.path.rglob("*") if p.is_file() and p.name != versions.MANIFEST)
        for path in local:
            rel = path.relative_to(version.path).as_posix()
            if rel in on_store and _file_digest(path) == on_store[rel]:
                files[rel] = dict(on_store[rel])
            else:
                files[rel] = self._upload_file(path, self.path("versions", name, rel))
            if progress is not None:
                progress(1)
        body = json.dumps({"version": name, "files": files}, sort_keys=True, indent=1).encode()
        self._write(self.path("versions", name, FILES), body)
        self._write(
            self.path("versions", name, versions.MANIFEST), (version.path / versions.MANIFEST).read_bytes()
        )
        self._write(self.path(CURRENT), name.encode())

    def _upload_file(self, path: Path, target: str) -> dict[str, Any]:
        import pyarrow as pa

        try:
            with open(path, "rb") as src, self.fs.open_output_stream(target) as dst:
                return _copy_digest(src, dst)
        except (pa.ArrowException, OSError) as exc:
            raise RemoteUnavailable(f"{self.url}: uploading {target}: {exc}") from exc

    def download(self, version: str, target: Path) -> dict[str, Any]:
        """Download a version into `target` (a fresh folder), checking every file; returns its manifest.

        Raises:
            DamagedVersion: no manifest or file list, or a file missing or not matching its checksum.
            RemoteUnavailable: the store could not be read.
        """
        listing = self._read(self.path("versions", version, FILES))
        manifest_bytes = self._read(self.path("versions", version, versions.MANIFEST))
        if listing is None or manifest_bytes is None:
            raise DamagedVersion(
                version, f"{self.url} version {version} is incomplete (no {FILES} or manifest)"
            )
        try:
            files = json.loads(listing)["files"]
            manifest = json.loads(manifest_bytes)
        except (ValueError, KeyError) as exc:
            raise DamagedVersion(
                version, f"{self.url} version {version}: unreadable {FILES} or manifest"
            ) from exc
        if manifest.get("version") != version:
            raise DamagedVersion(
                version, f"{self.url} version {version}: its manifest names {manifest.get('version')}"
            )
        for rel, expected in sorted(files.items()):
            if rel.startswith("/") or ".." in Path(rel).parts:
                raise DamagedVersion(version, f"{self.url} version {version}: bad file name {rel!r}")
            dest = target / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            try:
                got = self._download_file(self.path("versions", version, rel), dest)
            except FileNotFoundError:
                raise DamagedVersion(version, f"{self.url} version {version}: {rel} is missing") from None
            if got["size"] != expected["size"] or got["sha256"] != expected["sha256"]:
                raise DamagedVersion(
                    version, f"{self.url} version {version}: {rel} does not match its checksum"
                )
        (target / versions.MANIFEST).write_bytes(manifest_bytes)
        return dict(manifest)

    def _download_file(self, source: str, dest: Path) -> dict[str, Any]:
        import pyarrow as pa

        try:
            with self.fs.open_input_stream(source) as src, open(dest, "wb") as dst:
                return _copy_digest(src, dst)
        except FileNotFoundError:
            raise
        except (pa.ArrowException, OSError) as exc:
            raise RemoteUnavailable(f"{self.url}: downloading {source}: {exc}") from exc

    def digest(self, path: str) -> dict[str, Any]:
        """Size and sha256 of one object (read back whole)."""
        import pyarrow as pa

        try:
            with self.fs.open_input_stream(path) as src:
                return _copy_digest(src)
        except (pa.ArrowException, OSError) as exc:
            raise RemoteUnavailable(f"{self.url}: reading {path}: {exc}") from exc

    def fetch_tree(
        self,
        version: str,
        folder: str,
        dest: Path,
        expected: dict[str, dict[str, Any]],
        keep: Callable[[str], bool] | None = None,
    ) -> dict[str, dict[str, Any]]:
        """Download every object under ``versions/<version>/<folder>`` (those `keep` accepts, by path relative
        to the version) into `dest`; returns each one's size and sha256.

        Raises:
            DamagedVersion: an object in `expected` is missing or does not match its checksum there.
            RemoteUnavailable: the store could not be read.
        """
        import pyarrow as pa
        import pyarrow.fs as pafs

        base = self.path("versions", version, folder)
        try:
            infos = self.fs.get_file_info(pafs.FileSelector(base, recursive=True, allow_not_found=True))
        except (pa.ArrowException, OSError) as exc:
            raise RemoteUnavailable(f"{self.url}: listing {base}: {exc}") from exc
        files: dict[str, dict[str, Any]] = {}
        for info in sorted((i for i in infos if i.type == pafs.FileType.File), key=lambda i: i.path):
            inner = info.path[len(base) :].lstrip("/")
            if keep is not None and not keep(f"{folder}/{inner}"):
                continue
            target = dest / inner
            target.parent.mkdir(parents=True, exist_ok=True)
            files[f"{folder}/{inner}"] = self._download_file(info.path, target)
        for rel, want in expected.items():
            if files.get(rel) != want:
                problem = "is missing" if rel not in files else "does not match what was written"
                raise DamagedVersion(version, f"{self.url} version {version}: {rel} {problem}")
        return files

    def lancedb_uri(self, version: str) -> str:
        """Where a version's vector table lives on the bucket (for `lancedb.connect`)."""
        return f"{self.url}/versions/{version}/vectors"


def _copy_digest(src: Any, dst: Any = None) -> dict[str, Any]:
    """Size and sha256 of what `src` yields, copied to `dst` on the way when given (one read of the data)."""
    digest = hashlib.sha256()
    size = 0
    while block := src.read(_CHUNK):
        digest.update(block)
        size += len(block)
        if dst is not None:
            dst.write(block)
    return {"size": size, "sha256": digest.hexdigest()}


def _file_digest(path: Path) -> dict[str, Any]:
    with open(path, "rb") as fh:
        return _copy_digest(fh)


def lancedb_storage_options() -> dict[str, str]:
    """LanceDB (object_store) options matching the environment's endpoint override."""
    endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
    if not endpoint:
        return {}
    return {"endpoint": endpoint, "allow_http": str(endpoint.startswith("http://")).lower()}


def sync_mirror(
    remote: RemoteIndex, mirror: Path, refuse: str | None = None
) -> tuple[str | None, str | None]:
    """Bring the local mirror to the remote `current`; returns (remote current, mirror current).

    The download goes to a staging folder and is switched in only when every file checked out, so the
    mirror's `current` always names a complete version. One process syncs a mirror at a time (the others
    skip the round). `refuse` is a version already found damaged: it is not downloaded again.

    Raises:
        RemoteUnavailable: the store could not be read (the mirror is unchanged).
        DamagedVersion: the remote current version is damaged (the mirror is unchanged).
    """
    mirror.mkdir(parents=True, exist_ok=True)
    wanted = remote.current()
    have = versions.current_target(mirror)
    if wanted is None or wanted in (have, refuse):
        return wanted, have
    try:
        with versions.writer_lock(mirror):
            versions.cleanup(mirror)  # leftovers of a download killed mid-way
            if (mirror / "versions" / wanted / versions.MANIFEST).is_file():
                versions.switch_current(mirror, mirror / "versions" / wanted)
                return wanted, wanted
            staging = versions.staging_dir(mirror, wanted)
            try:
                remote.download(wanted, staging)
            except BaseException:
                shutil.rmtree(staging, ignore_errors=True)
                raise
            versions.adopt(mirror, staging, wanted)
            versions.cleanup(mirror)
            return wanted, wanted
    except versions.IndexUnavailable:
        return wanted, have  # another process of this replica is syncing the same mirror


@contextlib.contextmanager
def remote_workspace(url: str, cache_dir: Path, progress: Any = None) -> Iterator[Path]:
    """A local mirror of `url` holding its current version, for a build or update; uploads the result.

    The body runs an ordinary local build, add, delete or regraph on the yielded folder; when it published
    a new version there, that version is uploaded and the remote `current` moved to it last.
    """
    remote = RemoteIndex.open(url)
    mirror = mirror_dir(cache_dir, url)
    if sync_mirror(remote, mirror)[0] is None:
        # Nothing published there: an update must not apply to a stale mirror of an earlier index.
        (mirror / "current").unlink(missing_ok=True)
    before = versions.current_target(mirror)
    yield mirror
    after = versions.current_target(mirror)
    if after is not None and after != before:
        remote.upload(versions.current_version(mirror), progress)
