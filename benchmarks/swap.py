"""A hot swap between two versions of a large index under load (`hybridrag bench swap`).

The service serves a synthetic index of N chunks (`bench scale`'s corpora) while clients search; a few
seconds in, a second version is published and the service maps it and swaps while the clients go on. Every
answer must be a 200 from one version or the other; the report says how many came from each, the latency
before, during and after, the time from the publish to the first answer from the new version, and the
service's memory (anonymous / file-backed) before and after.

How the second version comes (`--second-version`):

* `copy` (the default): a full copy of the served version, every file a new one (nothing hard-linked, so
  nothing of it is mapped or cached through the old version's files), published atomically under a new
  name, by the benchmark, outside the service: the swap itself at full size, without a build's cost.
* `documents`: one document added through `POST /v1/documents`; the service's own writer builds the next
  version (a hard-linked clone, the document added to every store, the graph and the vectors' serving files
  rebuilt from the whole corpus) and swaps: the real path, whose rebuild is O(corpus).

The index is served from a hard-linked copy of the cached one in a temporary folder, so the cached index
is left as it was (versions are written as new files, never edited in place).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx

from hybridrag.benchmarks.common import machine, markdown_table, now, percentile
from hybridrag.benchmarks.loadgen import drive, rss_split, running_service

WRITE_KEY = "bench-swap-key"
WRITE_AT_S = 10.0
SETTLE_S = 20.0
DOCUMENT = {
    "id": "bench-swap-document",
    "title": "A document added under load",
    "text": "Added while clients searched, to publish a second version of the index. "
    "Its words are few, so the update's cost is that of the version, not of the text.",
}


def _linked_copy(source: Path, target: Path) -> None:
    def link(src: str, dst: str) -> None:
        try:
            os.link(src, dst)
        except OSError:
            shutil.copy2(src, dst)

    shutil.copytree(source, target, symlinks=True, copy_function=link)


SECOND_VERSIONS = ("copy", "documents")


def publish_copy(index_dir: Path) -> str:
    """A new version of `index_dir` that is a full copy of the current one, published atomically."""
    from hybridrag.indexing.stores import versions

    current = versions.current_version(index_dir)
    name = versions.new_version_name()
    staging = index_dir / f".staging-{name}"
    shutil.copytree(current.path, staging, symlinks=True)
    (staging / versions.MANIFEST).unlink()
    versions.publish(index_dir, staging, {**current.manifest, "version": name})
    return name


def run_swap(
    index_dir: Path,
    queries: Sequence[str],
    embedding_model: str,
    clients: int = 4,
    second_version: str = "copy",
) -> dict[str, Any]:
    from hybridrag.indexing.stores import versions

    if second_version not in SECOND_VERSIONS:
        raise ValueError(f"second_version must be one of {SECOND_VERSIONS}")

    bodies = [{"text": q[:1000], "options": {"limit": 10, "rerankEnabled": False}} for q in queries]
    first = versions.current_version(index_dir)
    work = Path(tempfile.mkdtemp(prefix="bench-swap-", dir=index_dir.parent))
    try:
        served = work / "index"
        _linked_copy(index_dir, served)
        env = {"HYBRIDRAG_WRITE_API_KEY": WRITE_KEY, "HYBRIDRAG_RELOAD_INTERVAL_S": "1"}
        write: dict[str, Any] = {}
        with running_service(served, embedding_model, env=env) as service:
            memory_before = rss_split(service.pid)
            marks: dict[str, float] = {}

            def writer() -> None:
                t0 = time.perf_counter()
                if second_version == "copy":
                    try:
                        write.update(status="succeeded", version=publish_copy(served))
                    except OSError as exc:
                        write.update(status="failed", error=str(exc))
                    write["seconds"] = round(time.perf_counter() - t0, 1)
                    return
                headers = {"Authorization": f"Bearer {WRITE_KEY}"}
                with httpx.Client(base_url=service.url, headers=headers, timeout=60) as http:
                    answer = http.post("/v1/documents", json={"documents": [DOCUMENT]})
                    answer.raise_for_status()
                    task_id = answer.json()["taskId"]
                    while True:
                        task = http.get(f"/v1/tasks/{task_id}").json()
                        if task["status"] in ("succeeded", "failed"):
                            break
                        time.sleep(0.5)
                    write.update(
                        status=task["status"],
                        version=task.get("indexVersion"),
                        seconds=round(time.perf_counter() - t0, 1),
                        error=task.get("error"),
                    )

            thread = threading.Thread(target=writer, daemon=True)

            def tick(elapsed: float) -> None:
                if elapsed >= WRITE_AT_S and "write" not in marks:
                    marks["write"] = elapsed
                    thread.start()
                if "status" in write and "published" not in marks:
                    marks["published"] = elapsed

            def settled(elapsed: float) -> bool:
                return "published" in marks and elapsed >= marks["published"] + SETTLE_S

            result = drive(
                service.url,
                bodies,
                clients,
                pid=service.pid,
                sample_every_s=1.0,
                on_tick=tick,
                until=settled,
            )
            thread.join(timeout=3600)
            memory_after = rss_split(service.pid)
        new_version = write.get("version")
        # Seconds since the start of the first answer from the new version.
        first_new = min((t for t, _ms, v in result.timed if v == new_version), default=None)
        phases = {
            "before": [ms for t, ms, _v in result.timed if t < marks.get("write", 0)],
            "during": [
                ms for t, ms, _v in result.timed if marks.get("write", 0) <= t < (first_new or float("inf"))
            ],
            "after": [ms for t, ms, _v in result.timed if first_new is not None and t >= first_new],
        }
        mb = 2**20
        return {
            "benchmark": "swap",
            "date": now(),
            "machine": machine(),
            "config": {
                "clients": clients,
                "embeddingModel": embedding_model,
                "index": str(index_dir),
                "secondVersion": second_version,
            },
            "chunks": int(first.manifest["counts"]["chunks"]),
            "firstVersion": first.version,
            "secondVersion": new_version,
            "write": write,
            "writeToServedS": round(first_new - marks["write"], 1)
            if first_new is not None and "write" in marks
            else None,
            "requests": result.requests + len(result.errors),
            "failed": result.failed,
            "statuses": {str(k): v for k, v in sorted(result.statuses.items())},
            "errorSamples": (result.errors + result.degraded)[:5],
            "versions": dict(result.versions),
            "latency": {
                phase: {
                    "requests": len(ms),
                    "p50ms": round(percentile(ms, 50), 1) if ms else None,
                    "p95ms": round(percentile(ms, 95), 1) if ms else None,
                }
                for phase, ms in phases.items()
            },
            "memoryMB": {
                "before": {k: round(v / mb, 1) for k, v in memory_before.items()},
                "after": {k: round(v / mb, 1) for k, v in memory_after.items()},
                "peakTotal": round(max((b for _, b in result.rss_samples), default=0) / mb, 1),
            },
        }
    finally:
        shutil.rmtree(work, ignore_errors=True)


HOW = {
    "copy": "a full copy of the served version, every file new, published atomically outside the service",
    "documents": "one document added through `POST /v1/documents`, built by the service's writer",
}


def to_markdown(report: dict[str, Any]) -> str:
    lat = report["latency"]
    rows = [
        [
            f"{report['chunks']:,}",
            str(report["config"]["clients"]),
            str(report["requests"]),
            str(report["failed"]),
            ", ".join(f"{v}: {n}" for v, n in report["versions"].items()),
            str(report["write"].get("status")),
            f"{report['write'].get('seconds')} s",
            f"{report['writeToServedS']} s",
            *(
                f"{lat[p]['p50ms']} / {lat[p]['p95ms']} ({lat[p]['requests']})"
                for p in ("before", "during", "after")
            ),
            " → ".join(
                f"{m['anon']:.0f} + {m['file']:.0f}"
                for m in (report["memoryMB"]["before"], report["memoryMB"]["after"])
            ),
            f"{report['memoryMB']['peakTotal']:.0f}",
        ]
    ]
    headers = [
        "chunks",
        "clients",
        "requests",
        "failed",
        "answers by version",
        "publish",
        "publish took",
        "publish → served",
        "p50 / p95 ms before (n)",
        "during",
        "after",
        "MB anon + file, before → after",
        "peak RSS MB",
    ]
    return (
        f"### Hot swap under load — {report['date'][:10]}, {report['machine']['cores']} cores\n\n"
        f"{report['config']['clients']} clients search the index; {WRITE_AT_S:.0f} s in, a second version is "
        f"published ({HOW[report['config'].get('secondVersion', 'documents')]}) and the service maps it and "
        f"swaps while they go on; the run ends {SETTLE_S:.0f} s after the publish. `publish took`: copying and publishing; "
        "`during`: from its start to the first answer of the new version.\n\n" + markdown_table(headers, rows)
    )
