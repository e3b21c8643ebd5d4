"""Query and passage encoding, torch against the ONNX export, measured in one run on the same texts.

Per model and encoder: query latency at batch 1 (median and p95 over `queries` real queries), passage
throughput (passages/s, batches of 32, real passages cut to `passage_chars`), and the agreement with the
torch vectors (min and mean cosine over every query and passage encoded). Threads: whatever the encoder
uses by default on this machine (2 cores here), as the service runs it.

Passage throughput is also given as the arithmetic it does: GFLOP/s of the transformer's matrix products
over the passages' real tokens (`model_flops`), beside what a float32 matrix product of the model's own
feed-forward shape reaches on these cores (`gemm_gflops`, numpy's BLAS). Encoding passages is bound by that
arithmetic, so the ratio says how much room a faster runtime could still find.
"""

from __future__ import annotations

import json
import statistics
import time
import timeit
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from hybridrag.benchmarks.common import machine, markdown_table, now, percentile, timed_each


def one_query_at_a_time(embedder: Any, texts: Sequence[str]) -> tuple[np.ndarray, list[float]]:
    """Each text encoded as a query alone, as a search encodes it: the vectors and each call's milliseconds."""
    vectors, took = timed_each(lambda text: embedder.embed_queries([text])[0], texts)
    return (np.vstack(vectors) if vectors else np.empty((0, 0), dtype=np.float32)), took


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


def model_flops(config: dict[str, Any], tokens: int) -> float:
    """Floating-point operations of one encoder pass over `tokens` tokens (a BERT-style model's `config.json`):
    per layer the four attention projections, the two feed-forward products and the two attention products
    (scores and weighted sum), two operations per multiply-add. Embeddings, norms and softmax are left out."""
    hidden, layers = int(config["hidden_size"]), int(config["num_hidden_layers"])
    ff = int(config["intermediate_size"])
    per_token = 4 * hidden * hidden + 2 * hidden * ff + 2 * tokens * hidden
    return 2.0 * layers * tokens * per_token


def gemm_gflops(rows: int, inner: int, cols: int, repeats: int = 5) -> float:
    """Best float32 GFLOP/s of numpy's matrix product (rows x inner) @ (inner x cols) on this machine."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((rows, inner), dtype=np.float32)
    b = rng.standard_normal((inner, cols), dtype=np.float32)
    a @ b  # warm-up: thread pool and packing buffers
    best = min(timeit.repeat(lambda: a @ b, number=1, repeat=repeats))
    return 2.0 * rows * inner * cols / best / 1e9


def _passage_flops(model: str, passages: list[str]) -> tuple[float, float, dict[str, Any]] | None:
    """(mean real tokens per passage, FLOPs of encoding them all, the model config); None when the model folder
    has no tokenizer.json / config.json to count with."""
    from tokenizers import Tokenizer

    from hybridrag.indexing.models.embedders import ModelUnavailable, model_spec
    from hybridrag.indexing.models.onnx_encoder import _max_length

    try:
        spec = model_spec(model)
        folder = spec.resolve()
    except (ModelUnavailable, ValueError):
        return None
    if not (folder / "tokenizer.json").is_file() or not (folder / "config.json").is_file():
        return None
    config = json.loads((folder / "config.json").read_text("utf-8"))
    tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
    tokenizer.no_padding()  # some tokenizer.json files pad to a fixed length
    tokenizer.enable_truncation(_max_length(folder))
    counts = [len(e.ids) for e in tokenizer.encode_batch([spec.passage_input(p) for p in passages])]
    return statistics.mean(counts), sum(model_flops(config, n) for n in counts), config


def run_encoders(
    datasets: list[Path], models: list[str], queries: int = 100, passages: int = 256, passage_chars: int = 800
) -> dict[str, Any]:
    from hybridrag.indexing.models.embedders import ModelUnavailable, load_embedder

    qs: list[str] = []
    ps: list[str] = []
    for dataset in datasets:
        q, p = _texts(dataset, queries // len(datasets), passages // len(datasets), passage_chars)
        qs += q
        ps += p
    rows: list[dict[str, Any]] = []
    arithmetic: dict[str, Any] = {}  # per model (rounded, for the report), and "gemm"
    passage_gflop: dict[str, float] = {}  # exact, for each row's GFLOP/s
    for model in models:
        reference: dict[str, np.ndarray] = {}
        counted = _passage_flops(model, ps)
        if counted is not None:
            tokens, flops, config = counted
            passage_gflop[model] = flops / len(ps) / 1e9
            arithmetic[model] = {
                "tokensPerPassage": round(tokens, 1),
                "gflopPerPassage": round(passage_gflop[model], 3),
            }
            if "gemm" not in arithmetic:
                # The model's feed-forward product at a batch of 32 passages of this length.
                shape = (32 * round(tokens), int(config["hidden_size"]), int(config["intermediate_size"]))
                arithmetic["gemm"] = {"shape": list(shape), "gflops": round(gemm_gflops(*shape), 1)}
        for encoder in ("torch", "onnx"):
            try:
                embedder = load_embedder(model, encoder)
            except ModelUnavailable as exc:
                rows.append({"model": model, "encoder": encoder, "skipped": str(exc)})
                continue
            embedder.embed_queries(["warm-up"])
            query_vectors, latencies = one_query_at_a_time(embedder, qs)
            t0 = time.perf_counter()
            passage_vectors = embedder.embed_passages(ps)
            seconds = time.perf_counter() - t0
            vectors = {"queries": query_vectors, "passages": passage_vectors}
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
                    "passageGflops": round(passage_gflop[model] * len(ps) / seconds, 1)
                    if model in passage_gflop
                    else None,
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
        "arithmetic": arithmetic,
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
        "GFLOP/s",
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
            r.get("passageGflops") or "—",
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
        + _arithmetic_note(report)
        + "\n"
    )


def _arithmetic_note(report: dict[str, Any]) -> str:
    arithmetic = report.get("arithmetic") or {}
    gemm = arithmetic.get("gemm")
    if not gemm:
        return ""
    per_model = "; ".join(
        f"{model} {info['tokensPerPassage']} tokens, {info['gflopPerPassage']} GFLOP per passage"
        for model, info in arithmetic.items()
        if model != "gemm"
    )
    rows, inner, cols = gemm["shape"]
    needed = [
        f"{r['model']} {round(3 * r['passageGflops'], 1)}"
        for r in report["rows"]
        if r.get("encoder") == "torch" and r.get("passageGflops")
    ]
    return (
        f"\n\nGFLOP/s: the transformer's matrix products over the passages' real tokens ({per_model}). "
        f"A float32 matrix product of the feed-forward shape ({rows}x{inner} @ {inner}x{cols}, numpy) reaches "
        f"{gemm['gflops']} GFLOP/s on these cores; 3x torch's passage throughput would take "
        f"{', '.join(needed)} GFLOP/s.\n"
    )
