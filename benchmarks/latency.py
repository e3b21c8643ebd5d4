"""HTTP latency and throughput per strategy at 1, 4 and 16 concurrent clients, and the service's memory.

The service runs as its own process (`hybridrag serve`) on loopback; clients post real queries of the
dataset round-robin. Rerank is off (as in the targets); every other option is the service default.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hybridrag.benchmarks.common import (
    LATENCY_HEADERS,
    latency_cells,
    machine,
    markdown_table,
    now,
    percentile,
)
from hybridrag.benchmarks.loadgen import drive, rss_bytes, running_service

WARMUP = 10


def run_latency(
    index_dir: Path,
    queries: Sequence[str],
    embedding_model: str,
    levels: Sequence[int] = (1, 4, 16),
    strategies: Sequence[str] = ("keyword", "semantic", "graph", "hybrid"),
    requests: int = 160,
    label: str = "",
    workers: int = 1,
) -> dict[str, Any]:
    from hybridrag.indexing.store import current_version
    from hybridrag.pipeline.settings import Settings

    manifest = current_version(index_dir).manifest
    # What the service will do with this index (HYBRIDRAG_PROJECTED_MIN_ROWS as the service reads it).
    projected_min_rows = Settings(index_dir=index_dir, _env_file=None).projected_min_rows
    rows: list[dict[str, Any]] = []
    with running_service(index_dir, embedding_model, workers=workers) as service:
        idle_rss = rss_bytes(service.pid)
        peak = idle_rss
        for strategy in strategies:
            bodies = [
                {"text": q[:1000], "options": {"strategies": [strategy], "limit": 10, "rerankEnabled": False}}
                for q in queries
            ]
            drive(service.url, bodies[:WARMUP], clients=1, requests=WARMUP)
            for level in levels:
                r = drive(
                    service.url, bodies, clients=level, requests=requests, pid=service.pid, sample_every_s=0.5
                )
                peak = max([peak, *(b for _, b in r.rss_samples)])
                rows.append(
                    {
                        "strategy": strategy,
                        "clients": level,
                        "requests": r.requests,
                        "errors": r.failed,
                        "errorSamples": (r.errors + r.degraded)[:3],
                        "p50ms": round(percentile(r.latencies_ms, 50), 1),
                        "p95ms": round(percentile(r.latencies_ms, 95), 1),
                        "p99ms": round(percentile(r.latencies_ms, 99), 1),
                        "qps": round(r.requests / r.wall_s, 1) if r.wall_s > 0 else None,
                    }
                )
        final_rss = rss_bytes(service.pid)
    return {
        "benchmark": "latency",
        "label": label,
        "date": now(),
        "machine": machine(),
        "index": {
            "dir": str(index_dir),
            "documents": manifest["counts"]["documents"],
            "chunks": manifest["counts"]["chunks"],
            "ann": (manifest.get("embedding") or {}).get("ann"),
            "twoStage": manifest["counts"]["chunks"] >= projected_min_rows,
        },
        "config": {
            "workers": workers,
            "embeddingModel": embedding_model,
            "requestsPerLevel": requests,
            "limit": 10,
            "rerank": False,
        },
        "memory": {
            "idleMB": round(idle_rss / 2**20),
            "peakMB": round(peak / 2**20),
            "finalMB": round(final_rss / 2**20),
        },
        "results": rows,
    }


def _vector_path(index: dict[str, Any]) -> str:
    from hybridrag.indexing.vectors import IN_MEMORY_MAX_ROWS

    if index["chunks"] <= IN_MEMORY_MAX_ROWS:
        two_stage = index.get("twoStage")
        kind = "two-stage (projected scan, exact rescoring)" if two_stage else "exact"
        return f"{kind} in-memory vector search" + (
            ", ANN index built for filtered queries" if index["ann"] else ""
        )
    return "ANN vector search"


def to_markdown(report: dict[str, Any]) -> str:
    idx, mem = report["index"], report["memory"]
    headers = ["strategy", "clients", *LATENCY_HEADERS]
    rows = [[r["strategy"], r["clients"], *latency_cells(r)] for r in report["results"]]
    return (
        f"### HTTP latency — {report['label'] or Path(idx['dir']).name}: {idx['chunks']} chunks, "
        f"{report['config'].get('workers', 1)} worker(s) "
        f"({_vector_path(idx)}), {report['config']['embeddingModel']}, "
        f"{report['date'][:10]}, {report['machine']['cores']} cores\n\n"
        + markdown_table(headers, rows)
        + f"\nService memory (RSS): {mem['idleMB']} MB idle after warm-up, {mem['peakMB']} MB peak, "
        f"{mem['finalMB']} MB at the end. Rerank off; limit 10; clients on the same 2 cores as the service.\n"
    )


def plot(reports: Sequence[dict[str, Any]], target: Path) -> None:
    """p50 and p95 latency against concurrency, one line per strategy, one panel per report."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(reports), figsize=(6 * len(reports), 4), squeeze=False)
    for ax, report in zip(axes[0], reports, strict=True):
        for strategy in dict.fromkeys(r["strategy"] for r in report["results"]):
            rows = [r for r in report["results"] if r["strategy"] == strategy]
            x = [r["clients"] for r in rows]
            (line,) = ax.plot(x, [r["p50ms"] for r in rows], marker="o", label=f"{strategy} p50")
            ax.plot(x, [r["p95ms"] for r in rows], marker="x", linestyle="--", color=line.get_color())
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xticks(
            [r["clients"] for r in report["results"] if r["strategy"] == report["results"][0]["strategy"]]
        )
        ax.get_xaxis().set_major_formatter(matplotlib.ticker.ScalarFormatter())
        ax.set_xlabel("concurrent clients")
        ax.set_ylabel("latency ms (solid p50, dashed p95)")
        ax.set_title(f"{report['label']} — {report['index']['chunks']} chunks")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    target.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(target, dpi=110)
    plt.close(fig)
