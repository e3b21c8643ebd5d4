"""Load, soak and swap-under-load runs against the HTTP service on loopback.

* load: N clients for a fixed time; requests, errors, latency percentiles.
* soak: the same for longer, with the service's RSS sampled; the slope of RSS over the second half says
  whether memory stays flat.
* swap: halfway through, a new index version is built from `swap_source` and switched to while the clients
  keep going; every answer must be a 200 from one version or the other, never a failure.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from hybridrag.benchmarks.common import (
    LATENCY_HEADERS,
    latency_cells,
    machine,
    markdown_table,
    now,
    percentile,
)
from hybridrag.benchmarks.loadgen import drive, running_service

SETTLE_S = 20.0


def rss_slope_mb_per_min(samples: Sequence[tuple[float, int]]) -> float | None:
    """Least-squares slope of RSS over the second half of the run (after warm-up growth)."""
    half = [(t, b) for t, b in samples if t >= samples[-1][0] / 2] if samples else []
    if len(half) < 3:
        return None
    t = np.array([s[0] for s in half]) / 60
    mb = np.array([s[1] for s in half]) / 2**20
    return round(float(np.polyfit(t, mb, 1)[0]), 3)


def run_load(
    index_dir: Path,
    queries: Sequence[str],
    embedding_model: str,
    clients: int = 16,
    duration_s: float = 60,
    swap_source: Path | None = None,
    label: str = "load",
) -> dict[str, Any]:
    bodies = [{"text": q[:1000], "options": {"limit": 10, "rerankEnabled": False}} for q in queries]
    swap: dict[str, Any] = {}
    env = {"HYBRIDRAG_RELOAD_INTERVAL_S": "1"}
    with running_service(index_dir, embedding_model, env) as service:

        def rebuild() -> None:
            cmd = [
                sys.executable,
                "-m",
                "hybridrag.cli",
                "index",
                "build",
                str(swap_source),
                "--out",
                str(index_dir),
            ]
            cmd += ["--embedding-model", embedding_model]
            done = subprocess.run(cmd, capture_output=True, text=True)
            swap["exitCode"] = done.returncode
            swap["log"] = done.stderr[-500:] if done.returncode else ""

        builder = threading.Thread(target=rebuild, daemon=True)

        def tick(elapsed: float) -> None:
            if swap_source is None:
                return
            if elapsed >= min(30.0, duration_s / 4) and not swap:
                swap["startedAtS"] = round(elapsed, 1)
                builder.start()
            elif "exitCode" in swap and "finishedAtS" not in swap:
                swap["finishedAtS"] = round(elapsed, 1)

        def swapped_and_settled(elapsed: float) -> bool:
            # With a swap, the load goes on until the new version has served for a while (builds are slow
            # when 16 clients share the 2 cores), however long that takes past `duration_s`.
            return "finishedAtS" in swap and elapsed >= max(duration_s, swap["finishedAtS"] + SETTLE_S)

        result = drive(
            service.url,
            bodies,
            clients,
            duration_s=None if swap_source is not None else duration_s,
            pid=service.pid,
            sample_every_s=2.0,
            on_tick=tick,
            until=swapped_and_settled if swap_source is not None else None,
        )
        if builder.is_alive():
            builder.join()
    samples = result.rss_samples
    return {
        "benchmark": "load",
        "label": label,
        "date": now(),
        "machine": machine(),
        "config": {
            "clients": clients,
            "durationS": round(result.wall_s),
            "embeddingModel": embedding_model,
            "index": str(index_dir),
        },
        "requests": result.requests + len(result.errors),
        "errors": result.failed,
        "statuses": {str(k): v for k, v in sorted(result.statuses.items())},
        "errorSamples": (result.errors + result.degraded)[:5],
        "p50ms": round(percentile(result.latencies_ms, 50), 1),
        "p95ms": round(percentile(result.latencies_ms, 95), 1),
        "p99ms": round(percentile(result.latencies_ms, 99), 1),
        "qps": round(result.requests / result.wall_s, 1) if result.wall_s else None,
        "rss": {
            "startMB": round(samples[0][1] / 2**20) if samples else None,
            "endMB": round(samples[-1][1] / 2**20) if samples else None,
            "peakMB": round(max(b for _, b in samples) / 2**20) if samples else None,
            "slopeMBPerMinSecondHalf": rss_slope_mb_per_min(samples),
            "samples": [(t, round(b / 2**20, 1)) for t, b in samples],
        },
        "versions": dict(result.versions),
        "swap": swap or None,
    }


def to_markdown(reports: Sequence[dict[str, Any]]) -> str:
    headers = [
        "run",
        "clients",
        "seconds",
        *LATENCY_HEADERS,
        "RSS start→end MB",
        "RSS slope MB/min",
        "versions",
    ]
    rows = [
        [
            r["label"],
            r["config"]["clients"],
            r["config"]["durationS"],
            *latency_cells(r),
            f"{r['rss']['startMB']}→{r['rss']['endMB']}",
            r["rss"]["slopeMBPerMinSecondHalf"],
            len(r["versions"]),
        ]
        for r in reports
    ]
    date = reports[0]["date"][:10] if reports else ""
    return (
        f"### Load, soak and index swap under load — {date}, 2 cores (clients on the same machine)\n\n"
        + markdown_table(headers, rows)
    )
