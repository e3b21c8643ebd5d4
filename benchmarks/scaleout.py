"""Scale-out: a Ray build to an S3-protocol bucket, two replicas following it, a rebuild under load.

Runs inside a private network (Ray binds every interface): a Ray head and two one-CPU worker nodes started
with `ray start --block`, an S3-protocol server (moto) on loopback, and two `hybridrag serve` replicas
pointed at the bucket. Measures, on a BEIR corpus (or the first `docs` documents of it, always keeping those
the chosen queries judge):

1. build seconds, local engine vs Ray engine (same model, same corpus);
2. whether the two builds are the same index: chunk ids, vectors (max |difference|), graph, and the ranked
   documents of every query (hybrid, top 10);
3. both replicas serving the Ray build, then a second Ray build published while clients search both:
   requests, failures, latency, and how long each replica took to switch.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from hybridrag.benchmarks.common import BeirDataset, load_beir, machine, markdown_table, now, percentile
from hybridrag.benchmarks.loadgen import drive, free_port, rss_bytes, running_service

NAMESPACE_ENV = "HYBRIDRAG_BENCH_IN_NAMESPACE"
CLUSTER_ENV = "HYBRIDRAG_BENCH_RAY_CLUSTER"


def private_network() -> bool:
    """True when the only network interface is loopback (a fresh network namespace)."""
    import socket

    # The process's own namespace (not /sys/class/net, which shows the namespace sysfs was mounted in).
    return {name for _i, name in socket.if_nameindex()} <= {"lo"}


def reexec_in_namespace(argv: list[str]) -> int:
    """Run `argv` in a new network namespace that has loopback alone (needs root and `unshare`)."""
    if os.geteuid() != 0 or shutil.which("unshare") is None or shutil.which("ip") is None:
        raise RuntimeError(
            "Ray must not bind this machine's interfaces: run as root with unshare and ip available"
        )
    if os.environ.get(NAMESPACE_ENV):
        raise RuntimeError("already re-run in a network namespace, yet other interfaces are visible")
    script = 'ip link set lo up && exec "$@"'
    env = {**os.environ, NAMESPACE_ENV: "1"}
    # unshare and sh exec into the command, so this child is the benchmark itself: pass signals on to it.
    proc = subprocess.Popen(["unshare", "--net", "sh", "-c", script, "sh", *argv], env=env)
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda sig, _frame: proc.send_signal(sig))
    return proc.wait()


def subset(dataset: BeirDataset, out: Path, docs: int | None, queries: int) -> BeirDataset:
    """The first `queries` judged queries and a corpus of at most `docs` documents holding all they judge."""
    keep = sorted(dataset.queries)[:queries]
    judged = {d for q in keep for d in dataset.qrels[q]}
    out.mkdir(parents=True, exist_ok=True)
    corpus = out / "corpus.jsonl"
    written = 0
    with open(dataset.corpus, encoding="utf-8") as src, open(corpus, "w", encoding="utf-8") as dst:
        fill = max(0, (docs or 10**12) - len(judged))
        for line in src:
            doc_id = json.loads(line)["_id"]
            if doc_id in judged or fill > 0:
                if doc_id not in judged:
                    fill -= 1
                dst.write(line)
                written += 1
    return dataset.subset(keep, corpus)


@contextlib.contextmanager
def ray_cluster(workers: int, temp: Path) -> Iterator[str]:
    """A Ray head (no CPUs of its own: it schedules) and `workers` one-CPU nodes on loopback."""
    ray = str(Path(sys.executable).with_name("ray"))
    port = free_port()
    # Ray runs its workers at nice 15; on this shared machine the replicas under load then starve the build.
    marker = uuid.uuid4().hex
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", "RAY_worker_niceness": "0", CLUSTER_ENV: marker}
    common = ["--block", "--node-ip-address=127.0.0.1", "--disable-usage-stats"]
    log = open(temp / "nodes.log", "ab")  # noqa: SIM115 (open for the nodes' lifetime, closed below)
    procs = [
        subprocess.Popen(
            [
                ray,
                "start",
                "--head",
                f"--port={port}",
                "--num-cpus=0",
                "--include-dashboard=false",
                f"--temp-dir={temp}",
                *common,
            ],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    ]
    address = f"127.0.0.1:{port}"
    import ray as ray_api

    try:
        _wait_for(lambda: _listening(port), 120, "the Ray head")
        ray_api.init(address=address, log_to_driver=False)
        for n in range(workers):
            # One at a time: two nodes starting together on one host can race for the same ports.
            procs.append(
                subprocess.Popen(
                    [ray, "start", f"--address={address}", "--num-cpus=1", *common],
                    env=env,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )
            )
            _wait_for(lambda n=n: _alive(ray_api) >= n + 2, 120, f"Ray worker {n + 1}")
        yield address
    finally:
        if ray_api.is_initialized():
            ray_api.shutdown()
        for proc in reversed(procs):
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
        _kill_marked(marker)
        log.close()


def _kill_marked(marker: str) -> None:
    """Kill what the nodes left behind (Ray's worker processes outlive a terminated `ray start --block`): the
    processes carrying this cluster's marker in their environment, and nothing else."""
    import psutil

    for proc in psutil.process_iter():
        with contextlib.suppress(psutil.Error):
            if proc.pid != os.getpid() and proc.environ().get(CLUSTER_ENV) == marker:
                proc.kill()


def _listening(port: int) -> bool:
    import socket

    with socket.socket() as sock:
        sock.settimeout(1)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def _alive(ray_api: Any) -> int:
    return sum(1 for node in ray_api.nodes() if node["Alive"])


def _wait_for(check: Any, timeout: float, what: str) -> None:
    deadline = time.time() + timeout
    while not check():
        if time.time() > deadline:
            raise RuntimeError(f"{what} did not come up in {timeout:.0f} s")
        time.sleep(1)


@contextlib.contextmanager
def s3_server() -> Iterator[str]:
    """An S3-protocol server on loopback with the AWS environment of this process pointing at it."""
    import logging

    import pyarrow.fs as pafs
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=free_port(), verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    saved = {
        k: os.environ.get(k)
        for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION", "AWS_ENDPOINT_URL")
    }
    os.environ.update(
        AWS_ACCESS_KEY_ID="bench",
        AWS_SECRET_ACCESS_KEY="bench",
        AWS_REGION="us-east-1",
        AWS_ENDPOINT_URL=f"http://{host}:{port}",
    )
    bucket = f"bench-{uuid.uuid4().hex[:8]}"
    pafs.S3FileSystem(
        endpoint_override=f"{host}:{port}", scheme="http", allow_bucket_creation=True
    ).create_dir(bucket)
    try:
        yield f"s3://{bucket}/index"
    finally:
        server.stop()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _vectors(version: Path) -> dict[str, np.ndarray]:
    import lancedb

    table = lancedb.connect(str(version / "vectors")).open_table("chunks").to_arrow()
    flat = table.column("vector").combine_chunks().values.to_numpy(zero_copy_only=False)
    matrix = np.asarray(flat, dtype=np.float32).reshape(table.num_rows, -1)
    return dict(zip(table.column("chunk_id").to_pylist(), matrix, strict=True))


def compare(local: Path, remote: Path, dataset: BeirDataset, model: str) -> dict[str, Any]:
    """How far two index versions are from being the same index (and the same search results)."""
    from hybridrag.benchmarks.quality import run_strategy
    from hybridrag.indexing.stores.tables import CHUNKS, read_version_table
    from hybridrag.pipeline.engine import SearchEngine
    from hybridrag.pipeline.settings import Settings

    chunk_ids = [read_version_table(p, CHUNKS).column("chunk_id").to_pylist() for p in (local, remote)]
    with_vectors = model != "none"
    va, vb = (_vectors(local), _vectors(remote)) if with_vectors else ({}, {})
    same_graph = all(
        (local / "graph" / f.name).read_bytes() == f.read_bytes()
        for f in (remote / "graph").iterdir()
        if f.suffix in (".json", ".npy")
    )
    runs = []
    for path in (local, remote):
        settings = Settings(
            index_dir=path.parent.parent, embedding_model=model, load_embedder=with_vectors, _env_file=None
        )
        engine = SearchEngine(settings)
        engine.start()
        strategies = ["keyword", "semantic", "graph"] if with_vectors else ["keyword", "graph"]
        run, _ = run_strategy(engine, dataset, strategies)
        runs.append({q: list(docs)[:10] for q, docs in run.items()})
        engine.close()
    same = sum(1 for q in runs[0] if runs[0][q] == runs[1].get(q))
    return {
        "chunks": len(chunk_ids[0]),
        "sameChunkIds": chunk_ids[0] == chunk_ids[1],
        "maxVectorDiff": max((float(np.abs(va[k] - vb[k]).max()) for k in va if k in vb), default=0.0),
        "sameVectorIds": sorted(va) == sorted(vb),
        "sameGraph": same_graph,
        "queries": len(runs[0]),
        "sameTop10": same,
    }


def run_scaleout(
    data: Path,
    split: str,
    work: Path,
    model: str = "minilm",
    docs: int | None = 500,
    queries: int = 50,
    clients: int = 1,
    pause_s: float = 0.25,
    settle_s: float = 5.0,
    batch_size: int = 64,
    rebuild_docs: int | None = None,
    compare_only: bool = False,
    write_rows: int = 4096,
    name_typing: str = "tagger",
) -> dict[str, Any]:
    """`rebuild_docs`: the rebuild under load indexes the first this many documents (kept judged ones
    included) instead of the whole corpus again: a shorter rebuild, still a new version to switch to.
    `compare_only`: stop after the two builds and their comparison. `model` "none": no vectors (the chunks,
    graph and keyword + graph results are compared). `name_typing`: both builds' (`BuildConfig.name_typing`)."""
    from hybridrag.indexing.builds.build import BuildConfig, IndexBuilder
    from hybridrag.indexing.builds.distributed import RayPassages
    from hybridrag.indexing.stores import versions
    from hybridrag.indexing.stores.remote import RemoteIndex, mirror_dir, remote_workspace, sync_mirror

    if not private_network():
        raise RuntimeError(
            "run this inside a network namespace with loopback alone (Ray binds every interface)"
        )
    full = load_beir(data, split)
    dataset = subset(full, work / "data", docs, queries)
    rebuild_corpus = dataset.corpus
    if rebuild_docs is not None:
        rebuild_corpus = subset(full, work / "rebuild", rebuild_docs, 1).corpus
    config = BuildConfig(embedding_model=None if model == "none" else model, name_typing=name_typing)
    report: dict[str, Any] = {
        "date": now(),
        "machine": machine(),
        "dataset": dataset.name,
        "model": model,
        "nameTyping": name_typing,
    }

    t0 = time.perf_counter()
    local = IndexBuilder(work / "local", config).build(dataset.corpus)
    report["build"] = {
        "localSeconds": round(time.perf_counter() - t0, 2),
        "chunks": local.chunks,
        "documents": local.documents,
    }

    with ray_cluster(2, Path(tempfile.mkdtemp(prefix="ray-", dir="/tmp"))) as address, s3_server() as url:
        engine = RayPassages(address, batch_size=batch_size, store_url=url, write_rows=write_rows)
        t0 = time.perf_counter()
        with remote_workspace(url, work / "builder") as mirror:
            IndexBuilder(mirror, config, passages=engine).build(dataset.corpus)
        report["build"]["raySeconds"] = round(time.perf_counter() - t0, 2)
        remote = RemoteIndex.open(url)
        built = remote.manifest(str(remote.current())) or {}
        on_store = built.get(versions.WRITTEN_TO_STORE) or {}
        report["build"]["vectorsWrittenBy"] = (built.get("embedding") or {}).get("writtenBy", "driver")
        report["build"]["vectorFragments"] = sum(1 for rel in on_store if "/data/" in rel)
        check = mirror_dir(work / "check", url)
        sync_mirror(RemoteIndex.open(url), check)
        report["same"] = compare(
            versions.current_version(work / "local").path,
            versions.current_version(check).path,
            dataset,
            model,
        )
        if compare_only:
            return report

        replicas = []
        with contextlib.ExitStack() as stack:
            for i in range(2):
                home = work / f"replica{i}"
                home.mkdir(parents=True, exist_ok=True)
                env = {
                    "HYBRIDRAG_INDEX_DIR": url,
                    "HYBRIDRAG_CACHE_DIR": str(home),
                    "HYBRIDRAG_RELOAD_INTERVAL_S": "1",
                }
                replicas.append(stack.enter_context(running_service(home / "logs", model, env=env)))
            first = [httpx.get(f"{r.url}/readyz").json()["indexVersion"] for r in replicas]
            bodies = [{"text": t[:1000], "options": {"limit": 10}} for t in dataset.queries.values()]
            stop = threading.Event()
            results: list[Any] = [None, None]

            def load(i: int) -> None:
                results[i] = drive(
                    replicas[i].url, bodies, clients, until=lambda _e: stop.is_set(), pause_s=pause_s
                )

            threads = [threading.Thread(target=load, args=(i,)) for i in range(2)]
            for t in threads:
                t.start()
            time.sleep(settle_s)
            t0 = time.perf_counter()
            with remote_workspace(url, work / "builder") as mirror:
                second = IndexBuilder(mirror, config, passages=engine).build(rebuild_corpus).version
            rebuilt = time.perf_counter()
            switched: list[float | None] = [None, None]
            deadline = time.time() + 120
            while None in switched and time.time() < deadline:
                for i, r in enumerate(replicas):
                    if switched[i] is None and httpx.get(f"{r.url}/readyz").json()["indexVersion"] == second:
                        switched[i] = round(time.perf_counter() - rebuilt, 2)
                time.sleep(0.2)
            time.sleep(settle_s)
            rss = [rss_bytes(r.pid) for r in replicas]
            stop.set()
            for t in threads:
                t.join()
            report["rebuild"] = {
                "raySeconds": round(rebuilt - t0, 2),
                "from": first,
                "to": second,
                "documents": len(rebuild_corpus.read_text("utf-8").splitlines()),
            }
            report["killedBuild"] = _killed_build(
                url, address, dataset.corpus, model, work / "killed", replicas
            )
            report["replicas"] = [
                {
                    "replica": i,
                    "requests": res.requests,
                    "failed": res.failed,
                    "errors": res.errors[:5],
                    "p50ms": round(percentile(res.latencies_ms, 50), 1),
                    "p95ms": round(percentile(res.latencies_ms, 95), 1),
                    "qps": round(res.requests / max(res.wall_s, 1e-9), 1),
                    "versions": dict(res.versions),
                    "switchSeconds": switched[i],
                    "rssMB": round(rss[i] / 1e6),
                }
                for i, res in enumerate(results)
            ]
    return report


def _killed_build(
    url: str, address: str, corpus: Path, model: str, cache: Path, replicas: list[Any]
) -> dict[str, Any]:
    """A Ray build to the bucket killed (SIGKILL) while it chunks and embeds: `current` must not move and the
    replicas must keep serving the version they had."""
    from hybridrag.indexing.stores.remote import RemoteIndex

    remote = RemoteIndex.open(url)
    before = remote.current()
    served = [httpx.get(f"{r.url}/readyz").json()["indexVersion"] for r in replicas]
    command = [
        sys.executable,
        "-m",
        "hybridrag.cli",
        "index",
        "build",
        str(corpus),
        "--out",
        url,
        "--engine",
        "ray",
        "--address",
        address,
        "--embedding-model",
        model,
        "--cache-dir",
        str(cache),
    ]
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    t0 = time.perf_counter()
    _wait_for(
        lambda: bool(list(cache.glob("index-*/.staging-*"))) or proc.poll() is not None, 300, "the build"
    )
    time.sleep(3)  # into chunking and embedding on the cluster
    finished_first = proc.poll() is not None
    proc.kill()
    proc.wait()
    time.sleep(2)  # a replica poll or two
    after = [httpx.get(f"{r.url}/readyz").json() for r in replicas]
    return {
        "killedAfterS": round(time.perf_counter() - t0, 1),
        "finishedBeforeKill": finished_first,
        "currentUnchanged": remote.current() == before,
        "replicasUnchanged": [a["indexVersion"] for a in after] == served,
        "replicasReady": all(a["status"] == "ready" for a in after),
    }


def to_markdown(report: dict[str, Any]) -> str:
    b, s = report["build"], report["same"]
    if "replicas" not in report:  # --compare-only
        return "\n".join(
            [
                f"### Scale-out — local vs Ray build of the whole corpus ({report['dataset']}, "
                f"{report['model']})",
                "",
                f"{report['date']}, {report['machine']['cores']} cores; Ray head + 2 one-CPU workers in a "
                "network namespace, moto S3 server on loopback; names typed by the "
                f"{report.get('nameTyping', 'tagger')}.",
                "",
                markdown_table(
                    ["documents", "chunks", "local build s", "Ray build s", "same chunk ids", "same graph"],
                    [
                        [
                            b["documents"],
                            b["chunks"],
                            b["localSeconds"],
                            b["raySeconds"],
                            s["sameChunkIds"],
                            s["sameGraph"],
                        ]
                    ],
                ),
                markdown_table(
                    ["queries", "same top 10", "max vector diff"],
                    [
                        [
                            s["queries"],
                            s["sameTop10"],
                            s["maxVectorDiff"] if report["model"] != "none" else "no model",
                        ]
                    ],
                ),
                f"The vector table was written to the bucket by: {b.get('vectorsWrittenBy', 'driver')} "
                f"({b.get('vectorFragments', 0)} fragment(s), committed once by the driver)."
                if report["model"] != "none"
                else "No model: no vector table.",
            ]
        )
    lines = [
        f"### Scale-out — Ray build to an S3-protocol bucket, two replicas ({report['dataset']}, {report['model']})",
        "",
        f"{report['date']}, {report['machine']['cores']} cores; Ray head + 2 one-CPU workers in a network "
        f"namespace, moto S3 server on loopback; names typed by the {report.get('nameTyping', 'tagger')}.",
        "",
        markdown_table(
            ["documents", "chunks", "local build s", "Ray build s", "Ray / local"],
            [
                [
                    b["documents"],
                    b["chunks"],
                    b["localSeconds"],
                    b["raySeconds"],
                    round(b["raySeconds"] / b["localSeconds"], 2),
                ]
            ],
        ),
        markdown_table(
            ["same chunk ids", "max vector diff", "same graph", "queries", "same top 10"],
            [[s["sameChunkIds"], s["maxVectorDiff"], s["sameGraph"], s["queries"], s["sameTop10"]]],
        ),
        f"The vector table was written to the bucket by: {b.get('vectorsWrittenBy', 'driver')} "
        f"({b.get('vectorFragments', 0)} fragment(s), committed once by the driver). "
        f"Rebuild on Ray under load ({report['rebuild'].get('documents', b['documents'])} documents): "
        f"{report['rebuild']['raySeconds']} s.",
        "",
        "A Ray build to the bucket killed mid-way (SIGKILL, {killedAfterS} s in): `current` unchanged "
        "{currentUnchanged}, both replicas still on their version {replicasUnchanged} and ready "
        "{replicasReady}.".format(**report["killedBuild"]),
        "",
        markdown_table(
            [
                "replica",
                "requests",
                "failed",
                "p50 ms",
                "p95 ms",
                "req/s",
                "switched after s",
                "RSS MB",
                "versions served",
            ],
            [
                [
                    r["replica"],
                    r["requests"],
                    r["failed"],
                    r["p50ms"],
                    r["p95ms"],
                    r["qps"],
                    r["switchSeconds"],
                    r["rssMB"],
                    ", ".join(f"{v[-6:]}: {n}" for v, n in r["versions"].items()),
                ]
                for r in report["replicas"]
            ],
        ),
    ]
    return "\n".join(lines)
