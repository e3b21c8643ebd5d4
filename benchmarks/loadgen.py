"""Load generation against the real HTTP service on loopback: a service subprocess, N client threads, RSS.

Used by the latency benchmark (fixed request counts at 1/4/16 clients) and the load/soak runs (fixed
durations, memory sampled over time).
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass(slots=True)
class Service:
    url: str
    pid: int
    log: Path


@contextlib.contextmanager
def running_service(
    index_dir: Path,
    embedding_model: str,
    env: dict[str, str] | None = None,
    ready_timeout: float = 600,
    workers: int = 1,
    source: Path | None = None,
) -> Iterator[Service]:
    """`hybridrag serve` on a free loopback port, ready (or raising with its log), stopped afterwards.

    With `workers` > 1 it is ready when every worker has answered /readyz (each reports its process id).
    `source` serves the code of another source tree (a git worktree of an older commit, say) with this
    environment's packages: it runs there, first on the import path."""
    port = free_port()
    log = index_dir.parent / f"serve-{port}.log"
    child_env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "HYBRIDRAG_INDEX_DIR": str(index_dir),
        "HYBRIDRAG_EMBEDDING_MODEL": embedding_model,
        "HYBRIDRAG_HOST": "127.0.0.1",
        "HYBRIDRAG_PORT": str(port),
        "HYBRIDRAG_LOG_LEVEL": "WARNING",
        **(env or {}),
    }
    if source is not None:
        if not (source / "hybridrag" / "cli").is_dir():
            raise ValueError(f"{source} is not a hybridrag source tree (no hybridrag/cli)")
        child_env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(source), os.environ.get("PYTHONPATH")]))
    with log.open("wb") as out:
        proc = subprocess.Popen(
            # `--workers` only when asked for: older trees (a baseline) have no such option.
            [
                sys.executable,
                "-m",
                "hybridrag.cli",
                "serve",
                *(["--workers", str(workers)] if workers > 1 else []),
            ],
            env=child_env,
            cwd=source,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.time() + ready_timeout
            ready: set[int] = set()
            while True:
                if proc.poll() is not None:
                    raise RuntimeError(f"service exited with {proc.returncode}: {log.read_text()[-2000:]}")
                with contextlib.suppress(httpx.TransportError, KeyError, ValueError):
                    r = httpx.get(f"{url}/readyz", timeout=2)
                    if r.status_code == 200:
                        ready.add(int(r.json()["pid"]))
                        if len(ready) >= workers:
                            break
                        continue
                if time.time() > deadline:
                    raise RuntimeError(
                        f"service not ready after {ready_timeout} s: {log.read_text()[-2000:]}"
                    )
                time.sleep(0.5)
            yield Service(url, proc.pid, log)
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
    log.unlink()  # reached only when nothing failed; a failure keeps the log and names it


def read_through(folder: Path, chunk: int = 1 << 24) -> int:
    """Read every file under `folder` once (into the page cache, mapping nothing); returns the bytes read.

    A replica that has served for a while has its index in the page cache; a benchmark that starts a
    service on files nobody read for minutes measures the disk instead (this VM's DAMON reclaim evicts idle
    page cache within minutes), and more so the larger the index."""
    total = 0
    for path in sorted(p for p in folder.rglob("*") if p.is_file() and not p.is_symlink()):
        with path.open("rb", buffering=0) as fh:
            while block := fh.read(chunk):
                total += len(block)
    return total


def rss_bytes(pid: int) -> int:
    """Resident memory of the process and its children (the workers of `serve --workers N`)."""
    import psutil

    process = psutil.Process(pid)
    return int(sum(p.memory_info().rss for p in [process, *process.children(recursive=True)]))


def rss_split(pid: int) -> dict[str, int]:
    """Resident bytes of the process and its children split as the kernel counts them: `anon` (what the
    process itself holds: heap, arrays) and `file` (mapped files: the index's memory-mapped files and the
    libraries, reclaimable page cache); from /proc/<pid>/status, Linux only (zeros elsewhere)."""
    import psutil

    process = psutil.Process(pid)
    out = {"anon": 0, "file": 0}
    for p in [process, *process.children(recursive=True)]:
        try:
            lines = Path(f"/proc/{p.pid}/status").read_text().splitlines()
        except OSError:
            continue
        for line in lines:
            key, _, value = line.partition(":")
            if key in ("RssAnon", "RssFile"):
                out[key[3:].lower()] += int(value.split()[0]) * 1024
    return out


@dataclass(slots=True)
class DriveResult:
    latencies_ms: list[float] = field(default_factory=list)
    statuses: Counter[int] = field(default_factory=Counter)
    errors: list[str] = field(default_factory=list)
    wall_s: float = 0.0
    rss_samples: list[tuple[float, int]] = field(default_factory=list)  # (seconds since start, bytes)
    versions: Counter[str] = field(default_factory=Counter)
    degraded: list[str] = field(default_factory=list)  # 200s whose notes say a retriever failed or timed out
    # Per answer: seconds since the start when it came, its latency in ms, the index version it names.
    timed: list[tuple[float, float, str | None]] = field(default_factory=list)

    @property
    def requests(self) -> int:
        return len(self.latencies_ms)

    @property
    def failed(self) -> int:
        return (
            sum(n for code, n in self.statuses.items() if code != 200) + len(self.errors) + len(self.degraded)
        )


def merged(results: Sequence[DriveResult]) -> DriveResult:
    """Several runs of `drive` as one: their requests pooled, their wall times added."""
    out = DriveResult()
    for r in results:
        out.latencies_ms += r.latencies_ms
        out.statuses.update(r.statuses)
        out.errors += r.errors
        out.wall_s += r.wall_s
        out.rss_samples += r.rss_samples
        out.versions.update(r.versions)
        out.degraded += r.degraded
        out.timed += r.timed
    return out


def drive(
    url: str,
    bodies: Sequence[dict[str, Any]],
    clients: int,
    requests: int | None = None,
    duration_s: float | None = None,
    pid: int | None = None,
    sample_every_s: float = 1.0,
    path: str = "/v1/search",
    on_tick: Callable[[float], None] | None = None,
    until: Callable[[float], bool] | None = None,
    pause_s: float = 0.0,
) -> DriveResult:
    """`clients` threads post `bodies` round-robin until `requests` in all were sent, `duration_s` passed, or
    `until(elapsed)` says so; each waits `pause_s` between its requests (a steady load, not a saturating one)."""
    if requests is None and duration_s is None and until is None:
        raise ValueError("give requests, duration_s or until")
    result = DriveResult()
    lock = threading.Lock()
    counter = iter(range(10**12))
    stop = threading.Event()
    started = time.perf_counter()

    def next_index() -> int | None:
        with lock:
            i = next(counter)
        if requests is not None and i >= requests:
            return None
        elapsed = time.perf_counter() - started
        if duration_s is not None and elapsed >= duration_s:
            return None
        if until is not None and until(elapsed):
            return None
        return i

    def client() -> None:
        with httpx.Client(base_url=url, timeout=30) as http:
            while (i := next_index()) is not None:
                if pause_s and stop.wait(pause_s):
                    return
                t0 = time.perf_counter()
                try:
                    r = http.post(path, json=bodies[i % len(bodies)])
                    ms = (time.perf_counter() - t0) * 1000
                    body = r.json() if r.status_code == 200 else {}
                    version = body.get("indexVersion")
                    broken = [
                        f"{n['stage']}: {n['reason']}"
                        for n in body.get("notes", [])
                        if n["status"] == "failed" or n["reason"] == "time budget exceeded"
                    ]
                    with lock:
                        result.latencies_ms.append(ms)
                        result.timed.append((time.perf_counter() - started, ms, version))
                        result.statuses[r.status_code] += 1
                        if version:
                            result.versions[version] += 1
                        result.degraded.extend(broken)
                except (httpx.HTTPError, ValueError) as exc:
                    with lock:
                        result.errors.append(f"{type(exc).__name__}: {exc}")

    def sampler() -> None:
        while not stop.is_set():
            elapsed = time.perf_counter() - started
            if pid is not None:
                with contextlib.suppress(Exception):
                    result.rss_samples.append((round(elapsed, 2), rss_bytes(pid)))
            if on_tick is not None:
                on_tick(elapsed)
            stop.wait(sample_every_s)

    threads = [threading.Thread(target=client, daemon=True) for _ in range(clients)]
    watcher = threading.Thread(target=sampler, daemon=True)
    watcher.start()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    result.wall_s = time.perf_counter() - started
    stop.set()
    watcher.join()
    return result
