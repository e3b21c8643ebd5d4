"""Corpus size per replica (`hybridrag bench scale`): memory, load time, latency and vector recall against N.

For each N a synthetic index of N chunks (`benchmarks/synthetic.py`: real base chunks copied with their real
vectors plus noise, so the build runs no model; entities come from the copied text) is loaded in process
(load time, vector recall@10 of the served search against an exact scan) and served over HTTP: resident
memory after warm-up and after the searches, split into anonymous memory (what the process holds itself)
and file-backed pages (the memory-mapped index files and libraries: page cache, reclaimable), and p50 / p95
per strategy at one client. Anonymous bytes per chunk are counted beyond the smallest N measured (the
service, its model and a near-empty index).
"""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from hybridrag.benchmarks.common import machine, markdown_table, now, percentile
from hybridrag.benchmarks.loadgen import drive, read_through, rss_split, running_service
from hybridrag.indexing.builds.stages import disk_bytes

STRATEGIES = ("hybrid", "keyword", "semantic", "graph")
RECALL_QUERIES = 100
LOADS = 3
WARMUP = 10


def measure_point(
    index_dir: Path,
    queries: Sequence[str],
    embedding_model: str,
    embedder: Any,
    searches: int,
    build: dict[str, Any] | None,
) -> dict[str, Any]:
    """One N: load time and recall in process, then memory and latency of the served index."""
    from hybridrag.indexing.stores.vectors import VectorIndex
    from hybridrag.indexing.stores.versions import current_version
    from hybridrag.pipeline.loaded_index import load_index

    version = current_version(index_dir)
    chunks = int(version.manifest["counts"]["chunks"])
    loads = []
    for _ in range(LOADS):
        gc.collect()
        t0 = time.perf_counter()
        loaded = load_index(index_dir, embedding_model, embedder)
        loads.append(time.perf_counter() - t0)
        del loaded
    served = VectorIndex(version.path / "vectors", embedder.dim)
    exact = VectorIndex(version.path / "vectors", embedder.dim, projected_min_rows=10**12, quantized=False)
    vectors = np.asarray(embedder.embed_queries(list(queries[:RECALL_QUERIES])), dtype=np.float32)
    recall = []
    for v in vectors:
        want = {h.chunk_id for h in exact.search(v, 10)[0]}
        got = {h.chunk_id for h in served.search(v, 10)[0]}
        recall.append(len(want & got) / max(1, len(want)))
    kind = served.kind
    del served, exact
    gc.collect()

    latency: dict[str, dict[str, float]] = {}
    t0 = time.perf_counter()
    warmed = read_through(version.path)
    warm_seconds = time.perf_counter() - t0
    with running_service(index_dir, embedding_model) as service:
        warm = [{"text": q[:1000], "options": {"strategies": ["hybrid"], "limit": 10}} for q in queries]
        drive(service.url, warm[:WARMUP], clients=1, requests=WARMUP)
        after_warmup = rss_split(service.pid)
        per = max(1, searches // len(STRATEGIES))
        errors = 0
        for strategy in STRATEGIES:
            bodies = [
                {"text": q[:1000], "options": {"strategies": [strategy], "limit": 10, "rerankEnabled": False}}
                for q in queries
            ]
            result = drive(service.url, bodies, clients=1, requests=per)
            errors += len(result.errors) + sum(n for code, n in result.statuses.items() if code != 200)
            latency[strategy] = {
                "p50ms": round(percentile(result.latencies_ms, 50), 1),
                "p95ms": round(percentile(result.latencies_ms, 95), 1),
            }
        after_searches = rss_split(service.pid)
    mb = 2**20
    return {
        "chunks": chunks,
        "documents": int(version.manifest["counts"]["documents"]),
        "vectorSearch": kind,
        "loadSeconds": round(statistics.median(loads), 3),
        "recallAt10": round(float(np.mean(recall)), 4) if recall else None,
        "memoryMB": {
            "afterWarmup": {k: round(v / mb, 1) for k, v in after_warmup.items()},
            "afterSearches": {k: round(v / mb, 1) for k, v in after_searches.items()},
        },
        "searches": per * len(STRATEGIES),
        "errors": errors,
        "latency": latency,
        "pageCacheWarmed": {"bytes": warmed, "seconds": round(warm_seconds, 1)},
        "buildSeconds": (build or {}).get("totalSeconds"),
        "bytesOnDisk": (build or {}).get("bytesOnDisk") or disk_bytes(version.path),
    }


def run_scale(
    sizes: Sequence[int],
    index_for: Callable[[int], tuple[Path, dict[str, Any] | None]],
    queries: Sequence[str],
    embedding_model: str,
    searches: int = 1000,
) -> dict[str, Any]:
    """Every size in `sizes` (ascending), its index from `index_for(n)` (directory, build report or None)."""
    from hybridrag.indexing.models.embedders import load_embedder

    embedder = load_embedder(embedding_model)
    points = []
    for n in sorted(sizes):
        index_dir, build = index_for(n)
        points.append(measure_point(index_dir, queries, embedding_model, embedder, searches, build))
    base = points[0]
    for p in points:
        grown = p["memoryMB"]["afterSearches"]["anon"] - base["memoryMB"]["afterSearches"]["anon"]
        extra = p["chunks"] - base["chunks"]
        p["anonBytesPerChunk"] = round(grown * 2**20 / extra) if extra > 0 else None
    return {
        "benchmark": "scale",
        "date": now(),
        "machine": machine(),
        "config": {"embeddingModel": embedding_model, "searchesPerPoint": searches, "clients": 1},
        "points": points,
    }


def to_markdown(report: dict[str, Any]) -> str:
    headers = [
        "chunks",
        "build s",
        "load s",
        "anon MB (warm / 1k searches)",
        "file MB (warm / 1k searches)",
        "anon B/chunk",
        "hybrid p50 / p95",
        "keyword p50 / p95",
        "semantic p50 / p95",
        "graph p50 / p95",
        "recall@10",
        "errors",
    ]
    rows = []
    for p in report["points"]:
        m = p["memoryMB"]
        rows.append(
            [
                p["chunks"],
                p["buildSeconds"],
                p["loadSeconds"],
                f"{m['afterWarmup']['anon']:.0f} / {m['afterSearches']['anon']:.0f}",
                f"{m['afterWarmup']['file']:.0f} / {m['afterSearches']['file']:.0f}",
                p["anonBytesPerChunk"],
                *(f"{p['latency'][s]['p50ms']} / {p['latency'][s]['p95ms']}" for s in STRATEGIES),
                p["recallAt10"],
                p["errors"],
            ]
        )
    first = report["points"][0]
    return (
        f"### Corpus size per replica — synthetic corpora, {report['config']['embeddingModel']}, "
        f"{report['date'][:10]}, {report['machine']['cores']} cores\n\n"
        + markdown_table(headers, rows)
        + f"\nOne service process, one client, {report['config']['searchesPerPoint']} searches per point "
        "(a quarter per strategy, limit 10, rerank off); latency in ms over HTTP on loopback. Memory is the "
        "service's resident set: anonymous (its own heap and arrays) and file-backed (mapped index files, "
        f"libraries; page cache the kernel can reclaim). Bytes per chunk: anonymous growth beyond the "
        f"{first['chunks']}-chunk point. Load: the index opened in process (model already loaded), median "
        f"of {LOADS}. Recall@10: the served vector search ({first['vectorSearch']}) against an exact scan, "
        f"{RECALL_QUERIES} queries. Before the service starts, the version's files are read once into the "
        "page cache (as on a replica that has served a while; this VM reclaims idle page cache within "
        "minutes), nothing of them mapped; the service then releases the mapped pages it read every "
        "`HYBRIDRAG_RELEASE_MAPPED_EVERY` (32) searches.\n"
    )


def plot(report: dict[str, Any], target: Path) -> None:
    """Resident memory (anonymous, file-backed) and p50 per strategy against N."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    points = report["points"]
    x = [p["chunks"] for p in points]
    fig, (mem, lat) = plt.subplots(1, 2, figsize=(11, 4))
    for kind in ("anon", "file"):
        mem.plot(x, [p["memoryMB"]["afterSearches"][kind] for p in points], marker="o", label=kind)
    mem.set_ylabel("resident MB after the searches")
    for strategy in STRATEGIES:
        lat.plot(x, [p["latency"][strategy]["p50ms"] for p in points], marker="o", label=strategy)
    lat.set_ylabel("p50 ms, 1 client")
    for ax in (mem, lat):
        ax.set_xscale("log")
        ax.set_xlabel("chunks")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    target.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(target, dpi=110)
    plt.close(fig)
