"""HTTP latency and throughput per strategy at 1, 4 and 16 concurrent clients, and the service's memory.

The service runs as its own process (`hybridrag serve`) on loopback; clients post real queries of the
dataset round-robin. Rerank is off (as in the targets); every other option is the service default.
"""

from __future__ import annotations

import contextlib
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
from hybridrag.benchmarks.loadgen import DriveResult, drive, merged, rss_bytes, rss_split, running_service

WARMUP = 10


ROUNDS = 4  # with a baseline: each level runs in this many alternating rounds, so drift hits both alike


def _row(strategy: str, clients: int, r: DriveResult) -> dict[str, Any]:
    return {
        "strategy": strategy,
        "clients": clients,
        "requests": r.requests,
        "errors": r.failed,
        "errorSamples": (r.errors + r.degraded)[:3],
        "p50ms": round(percentile(r.latencies_ms, 50), 1),
        "p95ms": round(percentile(r.latencies_ms, 95), 1),
        "p99ms": round(percentile(r.latencies_ms, 99), 1),
        "qps": round(r.requests / r.wall_s, 1) if r.wall_s > 0 else None,
    }


def run_latency(
    index_dir: Path,
    queries: Sequence[str],
    embedding_model: str,
    levels: Sequence[int] = (1, 4, 16),
    strategies: Sequence[str] = ("keyword", "semantic", "graph", "hybrid"),
    requests: int = 160,
    label: str = "",
    workers: int = 1,
    baseline: Path | None = None,
) -> dict[str, Any]:
    """Latency per strategy and concurrency level. With `baseline` (another source tree, e.g. a git
    worktree of an older commit) a second service runs that code on the same index, idle while the
    other is measured; every level is measured in `ROUNDS` rounds that alternate which service goes first,
    and each row carries the baseline's figures and the ratios (this / baseline)."""
    from hybridrag.indexing.stores.versions import current_version
    from hybridrag.pipeline.settings import Settings

    manifest = current_version(index_dir).manifest
    # What the service will do with this index (HYBRIDRAG_PROJECTED_MIN_ROWS as the service reads it).
    projected_min_rows = Settings(index_dir=index_dir, _env_file=None).projected_min_rows
    rows: list[dict[str, Any]] = []
    with contextlib.ExitStack() as stack:
        service = stack.enter_context(running_service(index_dir, embedding_model, workers=workers))
        services = {"this": service}
        if baseline is not None:
            services["baseline"] = stack.enter_context(
                running_service(index_dir, embedding_model, workers=workers, source=baseline)
            )
        rounds = ROUNDS if baseline is not None else 1
        idle = {name: rss_bytes(s.pid) for name, s in services.items()}
        idle_split = {name: rss_split(s.pid) for name, s in services.items()}
        peak = dict(idle)
        for strategy in strategies:
            bodies = [
                {"text": q[:1000], "options": {"strategies": [strategy], "limit": 10, "rerankEnabled": False}}
                for q in queries
            ]
            for s in services.values():
                drive(s.url, bodies[:WARMUP], clients=1, requests=WARMUP)
            for level in levels:
                runs: dict[str, list[DriveResult]] = {name: [] for name in services}
                sent = 0
                for i in range(rounds):
                    # Each round goes on through the queries where the last one stopped, as one run would.
                    count = requests // rounds + (i < requests % rounds)
                    part = bodies[sent % len(bodies) :] + bodies[: sent % len(bodies)]
                    sent += count
                    order = list(services) if i % 2 == 0 else list(services)[::-1]
                    for name in order:
                        s = services[name]
                        r = drive(
                            s.url,
                            part,
                            clients=level,
                            requests=count,
                            pid=s.pid,
                            sample_every_s=0.5,
                        )
                        runs[name].append(r)
                        peak[name] = max([peak[name], *(b for _, b in r.rss_samples)])
                row = _row(strategy, level, merged(runs["this"]))
                if baseline is not None:
                    base = _row(strategy, level, merged(runs["baseline"]))
                    row["baseline"] = {
                        k: base[k] for k in ("requests", "errors", "p50ms", "p95ms", "p99ms", "qps")
                    }
                    row["p50Ratio"] = round(row["p50ms"] / base["p50ms"], 2) if base["p50ms"] else None
                    row["qpsRatio"] = (
                        round(row["qps"] / base["qps"], 2) if row["qps"] and base["qps"] else None
                    )
                rows.append(row)
        final = {name: rss_bytes(s.pid) for name, s in services.items()}
        final_split = {name: rss_split(s.pid) for name, s in services.items()}
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
            "serving": (manifest.get("embedding") or {}).get("serving"),
        },
        "config": {
            "workers": workers,
            "embeddingModel": embedding_model,
            "requestsPerLevel": requests,
            "limit": 10,
            "rerank": False,
            "baseline": _describe(baseline) if baseline is not None else None,
            "rounds": rounds,
        },
        "memory": {
            "idleMB": round(idle["this"] / 2**20),
            "peakMB": round(peak["this"] / 2**20),
            "finalMB": round(final["this"] / 2**20),
            # Anonymous (the process' own) and file-backed (mapped index files, libraries) resident memory.
            "idleSplitMB": {k: round(v / 2**20) for k, v in idle_split["this"].items()},
            "finalSplitMB": {k: round(v / 2**20) for k, v in final_split["this"].items()},
            "baseline": (
                {
                    "idleMB": round(idle["baseline"] / 2**20),
                    "peakMB": round(peak["baseline"] / 2**20),
                    "finalMB": round(final["baseline"] / 2**20),
                    "idleSplitMB": {k: round(v / 2**20) for k, v in idle_split["baseline"].items()},
                    "finalSplitMB": {k: round(v / 2**20) for k, v in final_split["baseline"].items()},
                }
                if "baseline" in services
                else None
            ),
        },
        "results": rows,
    }


def _describe(tree: Path) -> dict[str, Any]:
    """The baseline tree and, when it is a git checkout, its commit."""
    import subprocess

    commit = subprocess.run(
        ["git", "-C", str(tree), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
    ).stdout.strip()
    return {"dir": str(tree), "commit": commit or None}


def _vector_path(index: dict[str, Any]) -> str:
    from hybridrag.indexing.stores.vectors import IN_MEMORY_MAX_ROWS

    if index.get("serving"):
        return "int8 codes scanned, stored vectors rescored from disk"
    if index["chunks"] <= IN_MEMORY_MAX_ROWS:
        two_stage = index.get("twoStage")
        kind = "two-stage (projected scan, exact rescoring)" if two_stage else "exact"
        return f"{kind} in-memory vector search" + (
            ", ANN index built (unused in memory)" if index["ann"] else ""
        )
    return "ANN vector search"


def to_markdown(report: dict[str, Any]) -> str:
    idx, mem = report["index"], report["memory"]
    headers = ["strategy", "clients", *LATENCY_HEADERS]
    rows = [[r["strategy"], r["clients"], *latency_cells(r)] for r in report["results"]]
    base = report["config"].get("baseline")
    note = ""
    if base:
        headers += ["baseline p50 ms", "baseline p95 ms", "baseline req/s", "x p50", "x p95", "x req/s"]
        for cells, r in zip(rows, report["results"], strict=True):
            b = r["baseline"]
            p95 = round(r["p95ms"] / b["p95ms"], 2) if b["p95ms"] else None
            cells += [b["p50ms"], b["p95ms"], b["qps"], r["p50Ratio"], p95, r["qpsRatio"]]
        note = (
            f"Baseline: commit {base['commit'] or base['dir']} served side by side on the same index, "
            f"{report['config']['rounds']} alternating rounds per row; x = this / baseline "
            "(p50 and p95 below 1 and req/s above 1 are better).\n"
        )
    return (
        f"### HTTP latency — {report['label'] or Path(idx['dir']).name}: {idx['chunks']} chunks, "
        f"{report['config'].get('workers', 1)} worker(s) "
        f"({_vector_path(idx)}), {report['config']['embeddingModel']}, "
        f"{report['date'][:10]}, {report['machine']['cores']} cores\n\n"
        + markdown_table(headers, rows)
        + (f"\n{note}" if note else "")
        + f"\nService memory (RSS): {mem['idleMB']} MB idle after warm-up, {mem['peakMB']} MB peak, "
        f"{mem['finalMB']} MB at the end{_split(mem)}."
        + (
            f" Baseline: {mem['baseline']['idleMB']} MB idle, {mem['baseline']['peakMB']} MB peak, "
            f"{mem['baseline']['finalMB']} MB at the end{_split(mem['baseline'])}."
            if mem.get("baseline")
            else ""
        )
        + " Rerank off; limit 10; clients on the same 2 cores as the service.\n"
    )


def _split(mem: dict[str, Any]) -> str:
    final = mem.get("finalSplitMB")
    return f" (anonymous {final['anon']} MB + file-backed {final['file']} MB)" if final else ""


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
