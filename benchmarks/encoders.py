"""Query and passage encoding, torch against the ONNX export, measured in one run on the same texts.

Per model and encoder: query latency at batch 1 (median and p95 over `queries` real queries), passage
throughput (passages/s, batches of 32, real passages cut to `passage_chars`), and the agreement with the
torch vectors (min and mean cosine over every query and passage encoded). Threads: whatever the encoder
uses by default on this machine (2 cores here), as the service runs it.
"""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np

from hybridrag.benchmarks.common import machine, markdown_table, now, percentile


def _texts(dataset: Path, queries: int, passages: int, passage_chars: int) -> tuple[list[str], list[str]]:
    qs = [
        json.loads(line)["text"]
        for line, _ in zip((dataset / "queries.jsonl").open(encoding="utf-8"), range(queries), strict=False)
    ]
    ps = [
        (json.loads(line).get("title", "") + "\n" + json.loads(line)["text"])[:passage_chars]
        for line, _ in zip((dataset / "corpus.jsonl").open(encoding="utf-8"), range(passages), strict=False)
    ]
    return qs, ps


def run_encoders(
    datasets: list[Path], models: list[str], queries: int = 100, passages: int = 256, passage_chars: int = 800
) -> dict[str, Any]:
    from hybridrag.indexing.embedders import ModelUnavailable, load_embedder

    qs: list[str] = []
    ps: list[str] = []
    for dataset in datasets:
        q, p = _texts(dataset, queries // len(datasets), passages // len(datasets), passage_chars)
        qs += q
        ps += p
    rows: list[dict[str, Any]] = []
    for model in models:
        reference: dict[str, np.ndarray] = {}
        for encoder in ("torch", "onnx"):
            try:
                embedder = load_embedder(model, encoder)
            except ModelUnavailable as exc:
                rows.append({"model": model, "encoder": encoder, "skipped": str(exc)})
                continue
            embedder.embed_queries(["warm-up"])
            latencies = []
            query_vectors = []
            for text in qs:
                t0 = time.perf_counter()
                query_vectors.append(embedder.embed_queries([text])[0])
                latencies.append((time.perf_counter() - t0) * 1000)
            t0 = time.perf_counter()
            passage_vectors = embedder.embed_passages(ps)
            seconds = time.perf_counter() - t0
            vectors = {"queries": np.vstack(query_vectors), "passages": passage_vectors}
            if encoder == "torch":
                reference = vectors
            cosines = (
                np.concatenate([(vectors[k] * reference[k]).sum(axis=1) for k in vectors])
                if reference
                else None
            )
            rows.append(
                {
                    "model": model,
                    "encoder": getattr(embedder, "encoder", encoder),
                    "queryP50ms": round(statistics.median(latencies), 2),
                    "queryP95ms": round(percentile(latencies, 95), 2),
                    "passagesPerS": round(len(ps) / seconds, 1),
                    "minCosineVsTorch": round(float(cosines.min()), 5) if cosines is not None else None,
                    "meanCosineVsTorch": round(float(cosines.mean()), 5) if cosines is not None else None,
                }
            )
    for row in rows:  # ratios against torch, same model, same run
        base = next((r for r in rows if r["model"] == row["model"] and r.get("encoder") == "torch"), None)
        if base and "queryP50ms" in row:
            row["querySpeedup"] = round(base["queryP50ms"] / row["queryP50ms"], 2)
            row["passageSpeedup"] = round(row["passagesPerS"] / base["passagesPerS"], 2)
    return {
        "benchmark": "encoders",
        "datasets": [d.name for d in datasets],
        "queries": len(qs),
        "passages": len(ps),
        "passageChars": passage_chars,
        "rows": rows,
        "machine": machine(),
        "at": now(),
    }


def to_markdown(report: dict[str, Any]) -> str:
    headers = [
        "model",
        "encoder",
        "query p50 ms",
        "query p95 ms",
        "x",
        "passages/s",
        "x",
        "min cos",
        "mean cos",
    ]
    rows = [
        [
            r["model"],
            r["encoder"],
            r.get("queryP50ms", "—"),
            r.get("queryP95ms", "—"),
            r.get("querySpeedup", "—"),
            r.get("passagesPerS", "—"),
            r.get("passageSpeedup", "—"),
            r.get("minCosineVsTorch", "—"),
            r.get("meanCosineVsTorch", "—"),
        ]
        for r in report["rows"]
    ]
    skipped = "".join(
        f"\n- {r['model']} {r['encoder']}: {r['skipped']}" for r in report["rows"] if "skipped" in r
    )
    return (
        f"### Query and passage encoders — {report['at'][:10]}, {report['machine']['cores']} cores\n\n"
        f"{report['queries']} real queries at batch 1 and {report['passages']} real passages (first "
        f"{report['passageChars']} characters, batches of 32) from {', '.join(report['datasets'])}; the same "
        "texts for every encoder, in one run; x = speed-up over torch; cosine against the torch vectors.\n\n"
        + markdown_table(headers, rows)
        + skipped
        + "\n"
    )
