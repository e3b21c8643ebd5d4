"""The served vector search against N (`hybridrag bench vector-scale`): flat codes against the inverted file.

For each N the serving files (`indexing.stores.quantized.write_serving_files`, the build's own code) are
written for N synthetic passage vectors (a base index's real vectors plus the same seeded noise as the
synthetic corpora, `benchmarks/synthetic.py`), once as flat 8-bit codes and once as the inverted file, and
searched with the dataset's real queries (embedded once): recall@10 of the served search (codes, then exact
rescoring) against an exact scan of the float32 vectors, without a filter and under filters passing 1% and
10% of the rows (seeded random rows: the filtered search must find them wherever they are), and
milliseconds a search (p50 / p95, the search call itself: the service adds the query's embedding and the
other retrievers). Also: seconds to write the serving files (training included) and the codes' bytes a row
(held in memory by the service). The full-service view at N is `bench scale`.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from hybridrag.benchmarks.common import machine, markdown_table, now, percentile
from hybridrag.benchmarks.synthetic import NOISE

K = 10
FILTER_SHARES = (0.01, 0.1)
BLOCK = 262_144


def synthetic_table(base: np.ndarray, rows: int, seed: int = 7) -> Any:
    """`rows` vectors drawn from `base` (unit rows) with `NOISE` added, as the serving files' input table."""
    import pyarrow as pa

    rng = np.random.default_rng(seed)
    dim = base.shape[1]
    flat = np.empty(rows * dim, dtype=np.float32)
    for lo in range(0, rows, BLOCK):
        n = min(BLOCK, rows - lo)
        block = base[rng.integers(0, len(base), n)] + rng.normal(0.0, NOISE, (n, dim)).astype(np.float32)
        block /= np.linalg.norm(block, axis=1, keepdims=True)
        flat[lo * dim : (lo + n) * dim] = block.reshape(-1)
    return pa.table(
        {
            "chunk_id": pa.array([f"c{i}" for i in range(rows)], pa.string()),
            "file_id": pa.array([f"f{i % 100}" for i in range(rows)], pa.string()),
            "date": pa.nulls(rows, pa.timestamp("us")),
            "entity_types": pa.array([[] for _ in range(rows)], pa.list_(pa.string())),
            "vector": pa.FixedSizeListArray.from_arrays(pa.array(flat), dim),
        }
    )


def exact_top(matrix: np.ndarray, queries: np.ndarray, mask: np.ndarray | None) -> np.ndarray:
    """Each query's exact top `K` rows (passing `mask`), scanned in blocks."""
    best_rows = np.zeros((len(queries), 0), dtype=np.int64)
    best_sims = np.zeros((len(queries), 0), dtype=np.float32)
    for lo in range(0, len(matrix), BLOCK):
        sims = queries @ np.asarray(matrix[lo : lo + BLOCK]).T
        if mask is not None:
            sims[:, ~mask[lo : lo + BLOCK]] = -np.inf
        rows = np.broadcast_to(np.arange(lo, lo + sims.shape[1]), sims.shape)
        all_sims = np.concatenate([best_sims, sims], axis=1)
        all_rows = np.concatenate([best_rows, rows], axis=1)
        keep = np.argsort(-all_sims, axis=1, kind="stable")[:, :K]
        best_sims = np.take_along_axis(all_sims, keep, axis=1)
        best_rows = np.take_along_axis(all_rows, keep, axis=1)
    return best_rows


def measure(
    folder: Path, table: Any, dim: int, queries: np.ndarray, ivf_min_rows: int, masks: dict[str, Any]
) -> dict[str, Any]:
    """Write the serving files of `table` into `folder` (flat or IVF by `ivf_min_rows`) and search them."""
    from hybridrag.indexing.stores.quantized import CODES, QuantizedVectors, write_serving_files

    folder.mkdir(parents=True)
    t0 = time.perf_counter()
    kind = write_serving_files(folder, table, dim, ivf_min_rows=ivf_min_rows)
    build = time.perf_counter() - t0
    served = QuantizedVectors.open(folder, dim)
    out: dict[str, Any] = {
        "kind": kind,
        "lists": int(getattr(served.codes, "nlist", 0)) or None,
        "buildSeconds": round(build, 1),
        "codeBytesPerRow": round((folder / CODES).stat().st_size / served.rows, 1),
    }
    for label, (mask, truth) in masks.items():
        times, recall = [], []
        for q, want in zip(queries, truth, strict=True):
            t = time.perf_counter()
            rows, _sims, _eligible = served.search(q, K, mask)
            times.append((time.perf_counter() - t) * 1000)
            recall.append(len(set(rows.tolist()) & set(want.tolist())) / K)
        out[label] = {
            "recallAt10": round(float(np.mean(recall)), 4),
            "recallMin": round(float(np.min(recall)), 2),
            "p50ms": round(percentile(times, 50), 2),
            "p95ms": round(percentile(times, 95), 2),
        }
    del served
    shutil.rmtree(folder)
    return out


def run_vector_scale(
    base_vectors: np.ndarray,
    sizes: Sequence[int],
    query_vectors: np.ndarray,
    ivf_min_rows: int,
    workdir: Path | None = None,
) -> dict[str, Any]:
    """Every size, flat codes and the inverted file (sizes below `ivf_min_rows` are flat only)."""
    from hybridrag.indexing.stores.quantized import IVF_PROBES

    queries = query_vectors / np.linalg.norm(query_vectors, axis=1, keepdims=True)
    dim = base_vectors.shape[1]
    points = []
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        for n in sorted(sizes):
            table = synthetic_table(base_vectors, n)
            matrix = table.column("vector").combine_chunks().values.to_numpy().reshape(n, dim)
            rng = np.random.default_rng(11)
            masks: dict[str, Any] = {"none": (None, exact_top(matrix, queries, None))}
            for share in FILTER_SHARES:
                mask = rng.random(n) < share
                masks[f"filter{share:g}"] = (mask, exact_top(matrix, queries, mask))
            del matrix
            point: dict[str, Any] = {"rows": n}
            point["flat"] = measure(Path(tmp) / f"{n}-flat", table, dim, queries, n + 1, masks)
            if n >= ivf_min_rows:
                point["ivf"] = measure(Path(tmp) / f"{n}-ivf", table, dim, queries, ivf_min_rows, masks)
            points.append(point)
            del table
    for p in points:
        p["flatOverIvfP50"] = (
            round(p["flat"]["none"]["p50ms"] / p["ivf"]["none"]["p50ms"], 2) if "ivf" in p else None
        )
    return {
        "benchmark": "vector-scale",
        "date": now(),
        "machine": machine(),
        "config": {"k": K, "ivfProbes": IVF_PROBES, "noise": NOISE, "queries": len(queries)},
        "points": points,
    }


def to_markdown(report: dict[str, Any]) -> str:
    header = [
        "rows",
        "search",
        "lists",
        "build s",
        "code B/row",
        "p50 / p95 ms",
        "recall@10",
        "1% filter: p50 ms / recall",
        "10% filter: p50 ms / recall",
    ]
    rows = []
    for p in report["points"]:
        for label in ("flat", "ivf"):
            m = p.get(label)
            if m is None:
                continue
            rows.append(
                [
                    f"{p['rows']:,}",
                    m["kind"],
                    m["lists"] or "—",
                    m["buildSeconds"],
                    m["codeBytesPerRow"],
                    f"{m['none']['p50ms']} / {m['none']['p95ms']}",
                    f"{m['none']['recallAt10']} (min {m['none']['recallMin']})",
                    f"{m['filter0.01']['p50ms']} / {m['filter0.01']['recallAt10']}",
                    f"{m['filter0.1']['p50ms']} / {m['filter0.1']['recallAt10']}",
                ]
            )
    m = report["machine"]
    title = (
        f"### Served vector search against N — {report['config']['queries']} queries, k = {report['config']['k']}, "
        f"{report['config']['ivfProbes']} lists probed, {report['date'][:10]}, {m['cores']} cores"
    )
    return f"{title}\n\n{markdown_table(header, rows)}\n"
