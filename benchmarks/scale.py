"""Corpus size per replica (`hybridrag bench scale`): memory, load time, latency and vector recall against N.

For each N a synthetic index of N chunks (`benchmarks/synthetic.py`: real base chunks copied with their real
vectors plus noise, so the build runs no model; entities come from the copied text; built in a child process,
so what the build held is gone before its size is measured) is loaded in process
(load time, vector recall@10 of the served search against an exact scan, without a filter and under a
selective one passing `FILTER_SHARE` of the chunks; the version's bytes on disk per part and per chunk, and
the chunks' own text among them) and served over HTTP: resident memory after warm-up and after the searches,
split into anonymous memory (what the process holds itself) and file-backed pages (the memory-mapped index
files and libraries: page cache, reclaimable), and p50 / p95 per strategy at one client. Anonymous bytes per
chunk are counted beyond the smallest N measured (the service, its model and a near-empty index).

Sizes not measured (`EXTRAPOLATE_TO`, ten million by default) are extrapolated (`MODEL`): each p50 as a
fixed part, the smallest size's (what a search costs whatever the corpus), plus a part growing as a power of
N through the two largest sizes (exponent 0: flat, 1: linear). A power law through the totals alone would
read the fixed part as slow growth and understate the largest sizes. Bytes on disk and anonymous bytes are
their last per-chunk figures times N. The model is stated beside the figures: an extrapolation, not a
measurement.
"""

from __future__ import annotations

import gc
import math
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.compute as pc

from hybridrag.benchmarks.common import machine, markdown_table, now, percentile
from hybridrag.benchmarks.loadgen import drive, read_through, rss_split, running_service
from hybridrag.indexing.stores.versions import disk_report, disk_usage

STRATEGIES = ("hybrid", "keyword", "semantic", "graph")
RECALL_QUERIES = 100
LOADS = 3
WARMUP = 10
#: The selective filter's share of the chunks (seeded random chunks: the search must find them wherever
#: they lie) under which recall@10 is measured too.
FILTER_SHARE = 0.01
FILTER_SEED = 7
EXTRAPOLATE_TO = (10_000_000,)
MODEL = (
    "p50(N) = f + (p50 at the largest size - f) * (N / largest)^b: f, the smallest size's p50 (a search's "
    "cost with a near-empty index: the query's encoding, HTTP, the page), b the growth exponent of what the "
    "two largest sizes add to f (0 when neither adds anything); disk and anonymous bytes per chunk held at "
    "the largest size's"
)


def measure_point(
    index_dir: Path,
    queries: Sequence[str],
    embedding_model: str,
    embedder: Any,
    searches: int,
    build: dict[str, Any] | None,
) -> dict[str, Any]:
    """One N: load time and recall in process, then memory and latency of the served index."""
    from hybridrag.indexing.stores.tables import CHUNKS, read_version_table
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
    table = read_version_table(version.path, CHUNKS, memory_map=True)
    recall = _recall(served, exact, vectors)
    selective = _selective_filter(table.column("chunk_id"))
    filtered = _recall(served, exact, vectors, selective)
    kind = served.kind
    del served, exact
    gc.collect()
    by_part = disk_report(version.manifest, disk_usage(version.path))
    on_disk = by_part["bytes"]
    # UTF-8 bytes of the chunks' text: what an index holds at the least, beside which the rest is counted.
    text_bytes = int(pc.sum(pc.binary_length(table.column("text"))).as_py() or 0)
    del table

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
        "recallAt10": recall["recallAt10"],
        "searchP50ms": recall["p50ms"],
        "filtered": {"share": FILTER_SHARE, "chunks": len(selective.chunk_ids or ()), **filtered},
        "memoryMB": {
            "afterWarmup": {k: round(v / mb, 1) for k, v in after_warmup.items()},
            "afterSearches": {k: round(v / mb, 1) for k, v in after_searches.items()},
        },
        "searches": per * len(STRATEGIES),
        "errors": errors,
        "latency": latency,
        "pageCacheWarmed": {"bytes": warmed, "seconds": round(warm_seconds, 1)},
        "buildSeconds": (build or {}).get("wallSeconds") or (build or {}).get("totalSeconds"),
        "bytesOnDisk": (build or {}).get("bytesOnDisk") or on_disk,
        "disk": {
            "bytesPerChunk": by_part["bytesPerChunk"],
            "textBytesPerChunk": round(text_bytes / chunks, 1),
            "beyondTextBytesPerChunk": round((on_disk - text_bytes) / chunks, 1),
            "parts": {name: part["bytesPerChunk"] for name, part in by_part["parts"].items()},
        },
    }


def _recall(served: Any, exact: Any, vectors: np.ndarray, filters: Any = None) -> dict[str, float | None]:
    """Mean recall@10 of the served vector search against the exact one (under `filters`), and the served
    search's p50 in process (the search call alone, its query vector given)."""
    recall, took = [], []
    for v in vectors:
        want = {h.chunk_id for h in exact.search(v, 10, filters)[0]}
        t0 = time.perf_counter()
        got = {h.chunk_id for h in served.search(v, 10, filters)[0]}
        took.append((time.perf_counter() - t0) * 1000)
        recall.append(len(want & got) / max(1, len(want)))
    if not recall:
        return {"recallAt10": None, "p50ms": None}
    return {"recallAt10": round(float(np.mean(recall)), 4), "p50ms": round(statistics.median(took), 2)}


def _selective_filter(ids: Any) -> Any:
    """A filter passing `FILTER_SHARE` of the chunks `ids` (at least one), chosen at random (seeded)."""
    from hybridrag.indexing.stores.filters import ChunkFilters

    rng = np.random.default_rng(FILTER_SEED)
    picked = np.sort(rng.choice(len(ids), size=max(1, round(len(ids) * FILTER_SHARE)), replace=False))
    return ChunkFilters(chunk_ids=ids.take(picked).to_pylist())


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
    # Before any size is built or served: the machine is as quiet as it gets.
    encoding = query_encoding(embedding_model, queries)
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
        "queryEncoding": encoding,
        "points": points,
        "extrapolated": extrapolate(points, [n for n in EXTRAPOLATE_TO if n > points[-1]["chunks"]]),
    }


def query_encoding(
    embedding_model: str, queries: Sequence[str], count: int = RECALL_QUERIES
) -> dict[str, Any]:
    """What encoding one query costs with the service's encoder (`--encoder auto`), in process, one at a
    time: the part of every semantic and graph search that no index makes cheaper (the p50 of `count`
    queries, after a warm-up)."""
    from hybridrag.benchmarks.encoders import one_query_at_a_time
    from hybridrag.indexing.models.embedders import load_embedder

    model = load_embedder(embedding_model, encoder="auto")
    texts = list(queries[:count])
    one_query_at_a_time(model, texts[:WARMUP])
    _vectors, took = one_query_at_a_time(model, texts)
    return {
        "encoder": getattr(model, "encoder", "torch"),
        "queries": len(took),
        "p50ms": round(percentile(took, 50), 2) if took else None,
        "p95ms": round(percentile(took, 95), 2) if took else None,
    }


def extrapolate(points: Sequence[dict[str, Any]], sizes: Sequence[int]) -> dict[str, Any] | None:
    """`sizes` extrapolated from the measured points (module docstring: the model), or None when fewer than
    two sizes were measured."""
    if len(points) < 2 or not sizes:
        return None
    small, large = points[-2], points[-1]
    ratio = large["chunks"] / small["chunks"]
    fixed_from = points[0] if len(points) > 2 else None
    growth: dict[str, dict[str, float | None]] = {}
    for strategy in STRATEGIES:
        a, b = small["latency"][strategy]["p50ms"], large["latency"][strategy]["p50ms"]
        fixed = fixed_from["latency"][strategy]["p50ms"] if fixed_from is not None else 0.0
        # What grows is what the largest sizes add to the near-empty index's search; none grew: flat.
        grows = a - fixed > 0 and b - fixed > 0
        exponent = math.log((b - fixed) / (a - fixed)) / math.log(ratio) if grows else 0.0
        growth[strategy] = {
            "measuredRatio": round(b / a, 3) if a > 0 else None,
            "fixedMs": round(fixed, 2) if grows else round(b, 2),
            "exponent": round(exponent, 3),
        }
    out = []
    for n in sizes:
        scale = n / large["chunks"]
        p50 = {}
        for s in STRATEGIES:
            g, b = growth[s], large["latency"][s]["p50ms"]
            fixed, exponent = float(g["fixedMs"] or 0.0), float(g["exponent"] or 0.0)
            p50[s] = round(fixed + (b - fixed) * scale**exponent, 1)
        out.append(
            {
                "chunks": n,
                "p50ms": p50,
                "diskGB": round(large["disk"]["bytesPerChunk"] * n / 1e9, 1) if "disk" in large else None,
                "anonGB": round(
                    (
                        large["memoryMB"]["afterSearches"]["anon"] * 2**20
                        + (large["anonBytesPerChunk"] or 0) * (n - large["chunks"])
                    )
                    / 2**30,
                    2,
                ),
            }
        )
    return {
        "from": [p["chunks"] for p in ([fixed_from] if fixed_from else []) + [small, large]],
        "model": MODEL,
        "growth": growth,
        "points": out,
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
        f"recall@10, {FILTER_SHARE:.0%} filter",
        "disk B/chunk (beyond text)",
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
                (p.get("filtered") or {}).get("recallAt10"),
                f"{p['disk']['bytesPerChunk']:,.0f} ({p['disk']['beyondTextBytesPerChunk']:,.0f})"
                if p.get("disk")
                else None,
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
        "`HYBRIDRAG_RELEASE_MAPPED_EVERY` (32) searches. The filter passes "
        f"{FILTER_SHARE:.0%} of the chunks at random (seeded). Disk: bytes of the version per chunk, and beyond "
        "the chunks' own text (its UTF-8 bytes).\n"
        + _encoding(report.get("queryEncoding"))
        + _disk_parts(report["points"])
        + _extrapolated(report.get("extrapolated"))
    )


def _encoding(encoding: dict[str, Any] | None) -> str:
    if not encoding or encoding.get("p50ms") is None:
        return ""
    return (
        f"A query's encoding alone, in process, one at a time ({encoding['encoder']}, {encoding['queries']} "
        f"queries): p50 / p95 {encoding['p50ms']} / {encoding['p95ms']} ms, part of every semantic and graph "
        "search at any size.\n"
    )


def _disk_parts(points: Sequence[dict[str, Any]], parts: int = 10) -> str:
    """Bytes per chunk of the largest parts (at the largest size), at every size."""
    measured = [p for p in points if p.get("disk")]
    if not measured:
        return ""
    names = list(measured[-1]["disk"]["parts"])[:parts]
    rows = [[name, *(p["disk"]["parts"].get(name) for p in measured)] for name in names]
    rows.append(["text of the chunks", *(p["disk"]["textBytesPerChunk"] for p in measured)])
    headers = ["bytes per chunk, by part", *(f"{p['chunks']:,}" for p in measured)]
    return "\nDisk by part (the largest parts at the largest size):\n\n" + markdown_table(headers, rows)


def _extrapolated(extrapolated: dict[str, Any] | None) -> str:
    if not extrapolated:
        return ""
    small, large = extrapolated["from"][-2:]
    growth = extrapolated["growth"]
    headers = ["chunks", *(f"{s} p50 ms" for s in STRATEGIES), "disk GB", "anonymous GB"]
    rows = [
        [f"{e['chunks']:,}", *(e["p50ms"][s] for s in STRATEGIES), e["diskGB"], e["anonGB"]]
        for e in extrapolated["points"]
    ]
    ratios = ", ".join(f"{s} {growth[s]['measuredRatio']}x" for s in STRATEGIES)
    return (
        f"\nExtrapolated, not measured ({extrapolated['model']}). p50 growth from {small:,} to {large:,} "
        f"chunks: {ratios}.\n\n" + markdown_table(headers, rows)
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
