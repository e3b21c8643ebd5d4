"""Index versions on object storage: an S3-protocol server (moto) on loopback, the real pyarrow and LanceDB clients.

Builds upload complete versions and move `current` last; replicas mirror a version only when every file matches
its checksum, keep serving what they have when the bucket is unreachable or the new version is damaged.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.fs as pafs
import pytest
from conftest import SAMPLE, free_port
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from hybridrag.http.app import create_app
from hybridrag.indexing.builds.build import BuildConfig, IndexBuilder
from hybridrag.indexing.builds.distributed import RayPassages, _chunk_rows, _EmbedActor
from hybridrag.indexing.documents.sources import Document
from hybridrag.indexing.stores import versions
from hybridrag.indexing.stores.remote import (
    DamagedVersion,
    RemoteIndex,
    is_remote,
    lancedb_storage_options,
    mirror_dir,
    remote_workspace,
    sync_mirror,
)
from hybridrag.pipeline.engine import SearchEngine
from hybridrag.pipeline.settings import Settings

moto_server = pytest.importorskip("moto.server")

EXTRA_DOC = "The Kintaikyo Bridge in Iwakuni is a wooden arch bridge built in 1673 over the Nishiki River."


@pytest.fixture(scope="module")
def s3() -> Iterator[str]:
    """An S3-protocol server on 127.0.0.1 for this module, with the AWS environment pointing at it."""
    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # one line per S3 request otherwise
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=free_port(), verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    with pytest.MonkeyPatch.context() as mp:
        for name in ("AWS_PROFILE", "AWS_ENDPOINT_URL_S3", "AWS_SESSION_TOKEN"):
            mp.delenv(name, raising=False)
        mp.setenv("AWS_ACCESS_KEY_ID", "testing")
        mp.setenv("AWS_SECRET_ACCESS_KEY", "testing")
        mp.setenv("AWS_REGION", "us-east-1")
        mp.setenv("AWS_EC2_METADATA_DISABLED", "true")
        mp.setenv("AWS_ENDPOINT_URL", endpoint)
        yield endpoint
    server.stop()


@pytest.fixture()
def bucket_url(s3: str) -> str:
    name = f"idx-{uuid.uuid4().hex[:12]}"
    pafs.S3FileSystem(
        endpoint_override=s3.removeprefix("http://"), scheme="http", allow_bucket_creation=True
    ).create_dir(name)
    return f"s3://{name}/team/index"


def _build(url: str, cache: Path, embedder: Any, source: Path = SAMPLE) -> str:
    with remote_workspace(url, cache) as local:
        summary = IndexBuilder(local, BuildConfig(embedding_model="minilm"), embedder=embedder).build(source)
    return summary.version


def _add(url: str, cache: Path, embedder: Any, tmp_path: Path) -> str:
    docs = tmp_path / "extra"
    docs.mkdir(exist_ok=True)
    (docs / "kintaikyo.md").write_text("# Kintaikyo Bridge\n\n" + EXTRA_DOC + "\n", encoding="utf-8")
    with remote_workspace(url, cache) as local:
        summary = IndexBuilder(local, embedder=embedder).add(docs)
    return summary.version


def _replica(url: str, cache: Path, embedder: Any) -> tuple[SearchEngine, Any]:
    settings = Settings(  # type: ignore[call-arg]
        index_dir=url, cache_dir=cache, embedding_model="minilm", reload_interval_s=0, _env_file=None
    )
    engine = SearchEngine(settings, embedder=embedder)
    return engine, create_app(settings, engine, wait=True)


def _tick(engine: SearchEngine) -> None:
    """One round of the replica's watcher (it runs every reload_interval_s in a thread when serving)."""
    engine.sync_remote()
    engine.reload_if_switched()


def _top_title(client: TestClient, text: str) -> str:
    response = client.post("/v1/search", json={"text": text, "options": {"strategies": ["keyword"]}})
    assert response.status_code == 200, response.text
    return str(response.json()["results"][0]["metadata"]["title"])


def test_url_detection_and_settings() -> None:
    assert is_remote("s3://b/p") and is_remote("gs://b") and not is_remote("/tmp/x") and not is_remote("s3")
    settings = Settings(index_dir="s3://b/p", cache_dir="/tmp/c", _env_file=None)  # type: ignore[call-arg,arg-type]
    assert settings.index_url == "s3://b/p" and settings.index_dir == mirror_dir(Path("/tmp/c"), "s3://b/p")
    with pytest.raises(ValueError, match="names no bucket"):
        RemoteIndex.open("s3:///prefix")


def test_build_uploads_a_complete_version_and_current_last(
    bucket_url: str, tmp_path: Path, embedder: Any
) -> None:
    version = _build(bucket_url, tmp_path / "builder", embedder)
    remote = RemoteIndex.open(bucket_url)
    assert remote.current() == version
    listing = json.loads(remote._read(remote.path("versions", version, "files.json")) or b"{}")
    local = versions.current_version(mirror_dir(tmp_path / "builder", bucket_url))
    expected = sorted(p.relative_to(local.path).as_posix() for p in local.path.rglob("*") if p.is_file())
    assert sorted([*listing["files"], "manifest.json"]) == expected
    assert remote.manifest(version) == local.manifest
    # The vector table is a LanceDB dataset on the bucket, readable in place.
    import lancedb

    table = lancedb.connect(remote.lancedb_uri(version), storage_options=lancedb_storage_options())
    assert table.open_table("chunks").count_rows() == local.manifest["counts"]["chunks"]


def test_two_replicas_follow_current_and_switch_together(
    bucket_url: str, tmp_path: Path, embedder: Any
) -> None:
    first = _build(bucket_url, tmp_path / "builder", embedder)
    replicas = [_replica(bucket_url, tmp_path / f"replica{i}", embedder) for i in range(2)]
    clients = [TestClient(app) for _engine, app in replicas]
    try:
        for client in clients:
            client.__enter__()
            ready = client.get("/readyz").json()
            assert ready["status"] == "ready" and ready["indexVersion"] == first
            assert ready["components"]["storage"]["ready"] is True
        second = _add(bucket_url, tmp_path / "builder", embedder, tmp_path)
        for (engine, _app), client in zip(replicas, clients, strict=True):
            assert client.get("/readyz").json()["indexVersion"] == first  # until the watcher looks
            _tick(engine)
            assert client.get("/readyz").json()["indexVersion"] == second
            assert _top_title(client, "Kintaikyo wooden arch bridge Iwakuni") == "Kintaikyo Bridge"
    finally:
        for client in clients:
            client.__exit__(None, None, None)


def test_a_damaged_upload_is_refused_and_the_old_version_keeps_serving(
    bucket_url: str, tmp_path: Path, embedder: Any
) -> None:
    first = _build(bucket_url, tmp_path / "builder", embedder)
    engine, app = _replica(bucket_url, tmp_path / "replica", embedder)
    with TestClient(app) as client:
        second = _add(bucket_url, tmp_path / "builder", embedder, tmp_path)
        remote = RemoteIndex.open(bucket_url)
        files = json.loads(remote._read(remote.path("versions", second, "files.json")) or b"{}")["files"]
        victim = next(name for name in sorted(files) if name.startswith("keyword/"))
        remote._write(remote.path("versions", second, victim), b"corrupted")
        _tick(engine)
        ready = client.get("/readyz").json()
        assert ready["status"] == "ready" and ready["indexVersion"] == first
        storage = ready["components"]["storage"]
        assert storage["ready"] is False and "checksum" in storage["detail"] and first in storage["detail"]
        mirror = mirror_dir(tmp_path / "replica", bucket_url)
        assert versions.current_target(mirror) == first
        assert not list(mirror.glob(".staging-*"))  # the partial download is gone
        assert _top_title(client, "Toyota") != "Kintaikyo Bridge"
        _tick(engine)  # not downloaded again in a loop
        assert client.get("/readyz").json()["components"]["storage"]["ready"] is False
        # A good version published after it is taken.
        third = _add(bucket_url, tmp_path / "builder", embedder, tmp_path)
        _tick(engine)
        ready = client.get("/readyz").json()
        assert ready["indexVersion"] == third and ready["components"]["storage"]["ready"] is True


def test_a_killed_upload_never_moves_current(
    bucket_url: str, tmp_path: Path, embedder: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = _build(bucket_url, tmp_path / "builder", embedder)
    uploaded = 0
    original = RemoteIndex._upload_file

    def dies_midway(self: RemoteIndex, path: Path, target: str) -> dict[str, Any]:
        nonlocal uploaded
        uploaded += 1
        if uploaded > 3:
            raise KeyboardInterrupt  # the process is killed mid-upload
        return original(self, path, target)

    monkeypatch.setattr(RemoteIndex, "_upload_file", dies_midway)
    with pytest.raises(KeyboardInterrupt):
        _add(bucket_url, tmp_path / "builder", embedder, tmp_path)
    monkeypatch.undo()
    remote = RemoteIndex.open(bucket_url)
    assert remote.current() == first
    replica = mirror_dir(tmp_path / "replica", bucket_url)
    assert sync_mirror(remote, replica) == (first, first)
    # The half-uploaded version has no file list or manifest: refused if anything ever pointed at it.
    selector = pafs.FileSelector(remote.path("versions"), recursive=True)
    names = {info.path.split("/versions/")[1].split("/")[0] for info in remote.fs.get_file_info(selector)}
    stray = next(v for v in sorted(names) if v != first)
    with pytest.raises(DamagedVersion, match="incomplete"):
        remote.download(stray, tmp_path / "stray")


def test_a_download_killed_midway_is_cleaned_up_and_redone(
    bucket_url: str, tmp_path: Path, embedder: Any
) -> None:
    version = _build(bucket_url, tmp_path / "builder", embedder)
    mirror = mirror_dir(tmp_path / "replica", bucket_url)
    # What a replica killed mid-download leaves: a staging folder with part of the files.
    partial = versions.staging_dir(mirror, version)
    (partial / "documents.arrow").write_bytes(b"half")
    assert versions.current_target(mirror) is None
    remote = RemoteIndex.open(bucket_url)
    assert sync_mirror(remote, mirror) == (version, version)
    assert not list(mirror.glob(".staging-*"))
    assert versions.current_version(mirror).manifest == remote.manifest(version)


def test_an_unreachable_bucket_keeps_the_replica_serving(
    bucket_url: str, tmp_path: Path, embedder: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    version = _build(bucket_url, tmp_path / "builder", embedder)
    engine, app = _replica(bucket_url, tmp_path / "replica", embedder)
    with TestClient(app) as client:
        monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{free_port()}")  # nothing listens there
        _tick(engine)
        ready = client.get("/readyz").json()
        assert ready["status"] == "ready" and ready["indexVersion"] == version
        storage = ready["components"]["storage"]
        assert storage["ready"] is False and storage["detail"].startswith("cannot reach")
        assert _top_title(client, "Toyota production system")
    # A replica started while the bucket is down serves its mirror from an earlier run.
    _engine2, app2 = _replica(bucket_url, tmp_path / "replica", embedder)
    with TestClient(app2) as client:
        assert client.get("/readyz").json()["indexVersion"] == version


def test_cli_builds_to_and_reads_from_the_bucket(bucket_url: str, tmp_path: Path) -> None:
    from hybridrag.cli.bench import app

    docs = tmp_path / "docs"
    shutil.copytree(SAMPLE, docs)
    runner = CliRunner()
    cache = ["--cache-dir", str(tmp_path / "cache")]
    built = runner.invoke(
        app,
        ["index", "build", str(docs), "--out", bucket_url, "--embedding-model", "none", "--json", *cache],
    )
    assert built.exit_code == 0, built.output
    version = json.loads(built.stdout[built.stdout.index("{") :])["version"]
    info = runner.invoke(app, ["index", "info", bucket_url])
    assert info.exit_code == 0 and json.loads(info.stdout)["version"] == version
    deleted = runner.invoke(
        app, ["index", "delete", "--index", bucket_url, "--doc-id", "nonexistent", *cache]
    )
    assert deleted.exit_code == 2 and RemoteIndex.open(bucket_url).current() == version
    missing = runner.invoke(app, ["index", "info", bucket_url + "-nothing"])
    assert missing.exit_code == 2 and "no index published" in missing.output


def test_a_replica_killed_mid_download_serves_nothing_half_written(
    bucket_url: str, tmp_path: Path, embedder: Any
) -> None:
    """A real process killed (SIGKILL) while it downloads a version: the mirror keeps its complete version,
    and the next sync removes the partial download and completes it."""
    first = _build(bucket_url, tmp_path / "builder", embedder)
    mirror = mirror_dir(tmp_path / "replica", bucket_url)
    remote = RemoteIndex.open(bucket_url)
    assert sync_mirror(remote, mirror) == (first, first)
    # A second version with a large file, so that the download takes long enough to be killed inside it.
    local = versions.current_version(mirror_dir(tmp_path / "builder", bucket_url))
    big = tmp_path / "big"
    shutil.copytree(local.path, big)
    (big / "padding.bin").write_bytes(os.urandom(48 << 20))
    second = versions.new_version_name()
    (big / versions.MANIFEST).write_text(json.dumps({**local.manifest, "version": second}), "utf-8")
    remote.upload(versions.IndexVersion(big, {**local.manifest, "version": second}))
    code = (
        "import sys; from pathlib import Path; from hybridrag.indexing.stores.remote import RemoteIndex, sync_mirror; "
        "sync_mirror(RemoteIndex.open(sys.argv[1]), Path(sys.argv[2]))"
    )
    proc = subprocess.Popen([sys.executable, "-c", code, bucket_url, str(mirror)])
    staging = mirror / f".staging-{second}"
    deadline = time.time() + 120
    while not (staging / "padding.bin").is_file() and proc.poll() is None and time.time() < deadline:
        time.sleep(0.01)
    assert proc.poll() is None, "the download finished before it could be killed"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert staging.is_dir()  # what the kill left behind
    assert versions.current_target(mirror) == first
    assert versions.current_version(mirror).manifest["version"] == first
    assert sync_mirror(remote, mirror) == (second, second)
    assert not staging.exists()
    assert (mirror / "current" / "padding.bin").stat().st_size == 48 << 20


class _InProcessWorkers(RayPassages):
    """The Ray engine's own chunking, extraction, embedding and fragment-writing code, run batch by batch in
    this process (Ray binds every interface; tests/service/test_scaleout.py runs the real cluster in a namespace)."""

    def _rows(
        self, docs: Sequence[Document], config: BuildConfig, embed: bool, version: str | None
    ) -> list[dict[str, Any]]:
        chunk = _chunk_rows(asdict(config))
        rows = [r for i, d in enumerate(docs) for r in chunk({"doc_index": i, "doc": json.dumps(asdict(d))})]
        if not embed:
            return rows
        actor = _EmbedActor(**self.actor_kwargs(config, version))
        size = self.write_rows if version is not None else self.batch_size
        out: list[dict[str, Any]] = []
        for start in range(0, len(rows), size):
            part = rows[start : start + size]
            batch = {k: np.array([r[k] for r in part], dtype=object) for k in part[0]}
            if start == 0 and version is not None:
                actor(
                    batch
                )  # as an actor retried by Ray: its first fragment is written, then never committed
            result = actor(batch)
            out.extend({k: result[k][i] for k in result} for i in range(len(part)))
        return out[::-1]  # the engine must not depend on the order rows come back in


def test_workers_write_the_vector_table_straight_to_the_bucket(
    bucket_url: str, tmp_path: Path, embedder: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import lancedb

    from hybridrag.indexing.stores.tables import CHUNKS, read_version_table

    uploaded: list[str] = []
    upload = RemoteIndex._upload_file

    def recording_upload(self: RemoteIndex, path: Path, target: str) -> dict[str, Any]:
        uploaded.append(target)
        return upload(self, path, target)

    monkeypatch.setattr(RemoteIndex, "_upload_file", recording_upload)
    config = BuildConfig(embedding_model="minilm")
    workers = _InProcessWorkers(store_url=bucket_url, write_rows=7)
    with remote_workspace(bucket_url, tmp_path / "builder") as mirror:
        version = IndexBuilder(mirror, config, embedder=embedder, passages=workers).build(SAMPLE).version
    local = IndexBuilder(tmp_path / "local", config, embedder=embedder).build(SAMPLE)

    remote = RemoteIndex.open(bucket_url)
    assert remote.current() == version
    manifest = remote.manifest(version) or {}
    assert manifest["embedding"]["writtenBy"] == "ray"
    written = manifest[versions.WRITTEN_TO_STORE]
    data_files = [rel for rel in written if rel.startswith("vectors/chunks.lance/data/")]
    assert len(data_files) == -(-local.chunks // 7)  # one fragment per batch of 7 rows
    # Nothing the workers wrote was uploaded again (only the serving files the driver derives from the
    # table), and files.json lists it with the same checksums.
    # The float32 rows are read where the workers' data files hold them (no second copy to upload).
    from hybridrag.indexing.stores import lance_rows
    from hybridrag.indexing.stores.quantized import CODES, COLUMNS, KEYS

    serving = [CODES, COLUMNS, KEYS, lance_rows.PAGES, lance_rows.NORMS]
    assert sorted(t.rsplit("/", 1)[1] for t in uploaded if "/vectors/" in t) == sorted(serving)
    listing = json.loads(remote._read(remote.path("versions", version, "files.json")) or b"{}")["files"]
    assert all(listing[rel] == digest for rel, digest in written.items())
    # The retried batch's orphan file is on the bucket but in no list: never downloaded by a replica.
    selector = pafs.FileSelector(remote.path("versions", version, "vectors/chunks.lance/data"))
    on_bucket = {i.path.rsplit("/", 1)[1] for i in remote.fs.get_file_info(selector)}
    assert len(on_bucket) == len(data_files) + 1
    assert len([rel for rel in listing if "/data/" in rel]) == len(data_files)

    # The same index as a local build: chunk ids, row order, filter columns and vectors, graph.
    check = mirror_dir(tmp_path / "check", bucket_url)
    sync_mirror(remote, check)
    paths = [versions.current_version(check).path, Path(local.path)]
    ids = [read_version_table(p, CHUNKS).column("chunk_id").to_pylist() for p in paths]
    assert ids[0] == ids[1]
    tables = [lancedb.connect(str(p / "vectors")).open_table("chunks").to_arrow() for p in paths]
    for column in ("chunk_id", "doc_id", "file_id", "date", "entity_types"):
        assert tables[0].column(column).to_pylist() == tables[1].column(column).to_pylist(), column
    vectors = [np.stack(t.column("vector").to_numpy(zero_copy_only=False)) for t in tables]
    assert np.abs(vectors[0] - vectors[1]).max() < 1e-4
    graph_files = [
        sorted(str(f.relative_to(p / "graph")) for f in (p / "graph").rglob("*") if f.is_file())
        for p in paths
    ]
    assert graph_files[1] and graph_files[0] == graph_files[1]
    graph_files = graph_files[1]
    for name in graph_files:
        assert (paths[0] / "graph" / name).read_bytes() == (paths[1] / "graph" / name).read_bytes(), name

    # An update on top of it (local engine) and a replica serving the result.
    added = _add(bucket_url, tmp_path / "builder", embedder, tmp_path)
    _engine, app = _replica(bucket_url, tmp_path / "replica", embedder)
    with TestClient(app) as client:
        assert client.get("/readyz").json()["indexVersion"] == added
        assert _top_title(client, "Kintaikyo wooden arch bridge Iwakuni") == "Kintaikyo Bridge"

    # A worker's file that is not what it wrote is refused when the version is fetched.
    rel = data_files[0]
    with pytest.raises(DamagedVersion, match="does not match"):
        remote.fetch_tree(version, "vectors", tmp_path / "refetch", {rel: {"size": 1, "sha256": "0" * 64}})


def test_the_documents_writer_publishes_to_the_bucket(bucket_url: str, tmp_path: Path, embedder: Any) -> None:
    """A replica following a bucket takes writes through the documents API: each batch is a version built on
    the mirror and uploaded (current moved last), and the replica serves it."""
    from hybridrag.schemas.documents import DocumentIn

    _build(bucket_url, tmp_path / "builder-cache", embedder)
    engine, app = _replica(bucket_url, tmp_path / "cache", embedder)
    with TestClient(app) as client:
        writer = app.state.writer  # writer_for's, not started: the service has no write key
        index = engine.index_settings
        task = writer.submit_documents([DocumentIn(id="kintaikyo", title="Kintaikyo Bridge", text=EXTRA_DOC)])
        assert writer.run_once() == 1
        done = writer.store.get(task.task_id)
        assert done is not None and done.status == "succeeded" and done.documents[0].status == "added"
        assert RemoteIndex.open(bucket_url).current() == done.index_version
        assert engine.index.version_name == done.index_version
        assert _top_title(client, "wooden arch bridge over the Nishiki River") == "Kintaikyo Bridge"
    # The tasks live beside the mirror, not in it: a sync of the mirror never touches them.
    assert writer.store.folder.parent.name == "tasks" and not (index.index_dir / ".tasks").exists()


@pytest.mark.slow
def test_the_bucket_writer_says_succeeded_only_for_what_the_bucket_holds(
    tmp_path: Path, embedder: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The S3 server stopped mid-upload: the task fails with the reason and the bucket keeps its current;
    started again, writes resume. A crash between the mirror's publish and the upload: after the restart
    the task is queued again (the mirror's version, never uploaded, does not count), then applied and
    uploaded."""
    from hybridrag.schemas.documents import DocumentIn
    from hybridrag.writes.writer import writer_for

    port = free_port()
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        for name in ("AWS_PROFILE", "AWS_ENDPOINT_URL_S3", "AWS_SESSION_TOKEN"):
            monkeypatch.delenv(name, raising=False)
        for name, value in (
            ("AWS_ACCESS_KEY_ID", "testing"),
            ("AWS_SECRET_ACCESS_KEY", "testing"),
            ("AWS_REGION", "us-east-1"),
            ("AWS_EC2_METADATA_DISABLED", "true"),
            ("AWS_ENDPOINT_URL", f"http://127.0.0.1:{port}"),
        ):
            monkeypatch.setenv(name, value)
        pafs.S3FileSystem(
            endpoint_override=f"127.0.0.1:{port}", scheme="http", allow_bucket_creation=True
        ).create_dir("stopping")
        url = "s3://stopping/index"
        first = _build(url, tmp_path / "builder-cache", embedder)
        settings = Settings(  # type: ignore[call-arg]
            index_dir=url,
            cache_dir=tmp_path / "cache",
            embedding_model="minilm",
            reload_interval_s=0,
            _env_file=None,
        )
        engine = SearchEngine(settings, embedder=embedder)
        writer = writer_for(settings.writer, settings.index, engine)
        writer._embedders[("minilm", "torch")] = embedder

        def add(doc_id: str) -> Any:
            task = writer.submit_documents([DocumentIn(id=doc_id, title=doc_id, text=EXTRA_DOC)])
            assert writer.run_once() == 1
            return writer.store.get(task.task_id)

        original = RemoteIndex._upload_file
        uploads = 0

        def server_stops(self: RemoteIndex, path: Path, target: str) -> dict[str, Any]:
            nonlocal uploads
            uploads += 1
            if uploads == 4:
                server.stop()
            return original(self, path, target)

        monkeypatch.setattr(RemoteIndex, "_upload_file", server_stops)
        failed = add("kintaikyo")
        assert failed.status == "failed" and "the index was not changed" in (failed.error or "")
        monkeypatch.setattr(RemoteIndex, "_upload_file", original)
        server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
        server.start()
        assert RemoteIndex.open(url).current() == first
        done = add("kintaikyo")
        assert done.status == "succeeded" and RemoteIndex.open(url).current() == done.index_version

        def killed(self: RemoteIndex, version: Any, progress: Any = None) -> None:
            raise KeyboardInterrupt  # the process dies after the mirror's publish, before the upload

        upload = RemoteIndex.upload
        monkeypatch.setattr(RemoteIndex, "upload", killed)
        task = writer.submit_documents([DocumentIn(id="second", title="second", text=EXTRA_DOC + " Again.")])
        with pytest.raises(KeyboardInterrupt):
            writer.run_once()
        monkeypatch.setattr(RemoteIndex, "upload", upload)
        mirror_holds = {t for m in versions.published(settings.index.index_dir) for t in m.tasks}
        assert task.task_id in mirror_holds  # the crash left it published in the mirror only
        restarted = writer_for(settings.writer, settings.index, engine)
        restarted._embedders = writer._embedders
        restarted.recover()
        assert restarted.store.get(task.task_id).status == "queued"
        assert restarted.run_once() == 1
        redone = restarted.store.get(task.task_id)
        assert redone.status == "succeeded" and RemoteIndex.open(url).current() == redone.index_version
        held = RemoteIndex.open(url).manifest(redone.index_version)
        assert held is not None and task.task_id in held["tasks"]
    finally:
        server.stop()
