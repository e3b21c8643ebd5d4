"""In-memory vector search: every vector scored (exact) against the two-stage search (a scan of the vectors'
projections on their principal components, then the best candidates rescored exactly), on the same index.

For each index the same query vectors (the dataset's queries, embedded once) are searched both ways; reported:
recall of the two-stage top k against the exact top k (k = 10 and 100; mean, and the worst query), the
milliseconds per search (p50 / p95, one BLAS thread as the service runs it) and how long fitting the
projection takes when the index loads. Its effect on retrieval quality is in the quality tables.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from hybridrag.benchmarks.common import machine, markdown_table, now, percentile

KS = (10, 100)


def _vector_dir(index_dir: Path) -> tuple[Path, int]:
    from hybridrag.indexing.stores import versions

    version = versions.current_version(index_dir)
    return version.path / "vectors", int(version.manifest["embedding"]["dim"])


def compare_index(label: str, index_dir: Path, queries: np.ndarray) -> dict[str, Any]:
    from threadpoolctl import threadpool_limits

    from hybridrag.indexing.stores.vectors import PROJECTED_DIMS, VectorIndex

    path, dim = _vector_dir(index_dir)
    exact = VectorIndex(path, dim, projected_min_rows=10**12, quantized=False)
    t0 = time.perf_counter()
    # The served two-stage search: 8-bit codes rescored exactly when the version has its serving files,
    # else the projected scan, forced on whatever the index's size.
    two_stage = VectorIndex(path, dim, projected_min_rows=1)
    fit_s = time.perf_counter() - t0
    recalls: dict[int, list[float]] = {k: [] for k in KS}
    lost: dict[int, list[float]] = {k: [] for k in KS}
    times: dict[str, dict[int, list[float]]] = {
        "exact": {k: [] for k in KS},
        "two-stage": {k: [] for k in KS},
    }
    with threadpool_limits(limits=1, user_api="blas"):
        for vector in queries:
            for k in KS:
                found, mean_sim = {}, {}
                for name, index in (("exact", exact), ("two-stage", two_stage)):
                    t = time.perf_counter()
                    hits, _ = index.search(vector, k)
                    times[name][k].append((time.perf_counter() - t) * 1000)
                    found[name] = {h.chunk_id for h in hits}
                    mean_sim[name] = float(np.mean([h.similarity for h in hits]))
                recalls[k].append(len(found["exact"] & found["two-stage"]) / max(1, len(found["exact"])))
                # What a miss costs: how much lower the returned similarities are than the exact ones.
                lost[k].append(mean_sim["exact"] - mean_sim["two-stage"])
    return {
        "label": label,
        "rows": exact._rows,
        "twoStageKind": two_stage.kind,
        "dims": PROJECTED_DIMS,
        "loadSeconds": round(fit_s, 2),
        "queries": len(queries),
        "recall": {str(k): round(float(np.mean(v)), 4) for k, v in recalls.items()},
        "recallMin": {str(k): round(float(np.min(v)), 4) for k, v in recalls.items()},
        "similarityLost": {str(k): round(float(np.mean(v)), 5) for k, v in lost.items()},
        "similarityLostMax": {str(k): round(float(np.max(v)), 5) for k, v in lost.items()},
        "p50ms": {n: {str(k): round(percentile(v, 50), 2) for k, v in t.items()} for n, t in times.items()},
        "p95ms": {n: {str(k): round(percentile(v, 95), 2) for k, v in t.items()} for n, t in times.items()},
    }


def quality(index_dir: Path, dataset: Any, embedding_model: str) -> dict[str, Any]:
    """nDCG@10 and Recall@5 of semantic and hybrid search through the service's engine, exact vs two-stage
    (forced on), over every judged query of `dataset` (whose corpus `index_dir` holds)."""
    from hybridrag.benchmarks.quality import evaluate, run_strategy
    from hybridrag.pipeline.engine import SearchEngine
    from hybridrag.pipeline.settings import Settings

    out: dict[str, Any] = {}
    for label, rows in (("exact", 10**12), ("two-stage", 1)):
        settings = Settings(
            index_dir=index_dir, embedding_model=embedding_model, projected_min_rows=rows, _env_file=None
        )
        engine = SearchEngine(settings)
        engine.start()
        for strategy in ("semantic", "hybrid"):
            run, _ = run_strategy(engine, dataset, [strategy])
            out[f"{strategy} {label}"] = evaluate(dataset.qrels, run)
        engine.close()
    return out


def run_vector_search(
    indexes: Sequence[tuple[str, Path]],
    queries: Sequence[str],
    embedding_model: str,
    dataset: Any = None,
) -> dict[str, Any]:
    """`indexes`: (label, index dir); `dataset`: a BEIR dataset whose corpus the first index holds, for the
    quality comparison (None: skipped)."""
    from hybridrag.indexing.models.embedders import load_embedder

    embedder = load_embedder(embedding_model)
    vectors = np.asarray(embedder.embed_queries(list(queries)), dtype=np.float32)
    report: dict[str, Any] = {
        "benchmark": "vector-search",
        "date": now(),
        "machine": machine(),
        "embeddingModel": embedding_model,
        "rescored": _rescored(),
        "reports": [compare_index(label, path, vectors) for label, path in indexes],
    }
    # With serving files the engine always runs the 8-bit search (there is no exact engine to compare):
    # the recall table above is the comparison, and `bench quality` the retrieval quality.
    if dataset is not None and report["reports"][0]["twoStageKind"] != "sq8-rescored":
        report["quality"] = {
            "dataset": f"{dataset.name}",
            "queries": len(dataset.queries),
            "metrics": quality(indexes[0][1], dataset, embedding_model),
        }
    return report


def to_markdown(report: dict[str, Any]) -> str:
    rows = []
    for r in report["reports"]:
        for k in map(str, KS):
            exact, two = r["p50ms"]["exact"][k], r["p50ms"]["two-stage"][k]
            rows.append(
                [
                    r["label"],
                    r["rows"],
                    k,
                    r["recall"][k],
                    r["recallMin"][k],
                    f"{r['similarityLost'][k]} / {r['similarityLostMax'][k]}",
                    f"{exact} / {r['p95ms']['exact'][k]}",
                    f"{two} / {r['p95ms']['two-stage'][k]}",
                    round(exact / max(two, 1e-9), 1),
                    r["loadSeconds"],
                ]
            )
    first = report["reports"][0]
    extra: list[str] = []
    if "quality" in report:
        q = report["quality"]
        metrics = q["metrics"]
        extra = [
            "",
            f"Retrieval quality on {q['dataset']} ({q['queries']} queries, the service's engine, two-stage forced "
            "on this index):",
            "",
            markdown_table(
                ["system", "nDCG@10 exact", "nDCG@10 two-stage", "R@5 exact", "R@5 two-stage"],
                [
                    [
                        s,
                        metrics[f"{s} exact"]["ndcg@10"],
                        metrics[f"{s} two-stage"]["ndcg@10"],
                        metrics[f"{s} exact"]["recall@5"],
                        metrics[f"{s} two-stage"]["recall@5"],
                    ]
                    for s in ("semantic", "hybrid")
                ],
            ),
        ]
    return "\n".join(
        [
            f"### In-memory vector search, exact vs two-stage — {report['embeddingModel']}, "
            f"{report['date'][:10]}, {report['machine']['cores']} cores",
            "",
            "Two-stage search measured per index: "
            + ", ".join(f"{i['label']} {i.get('twoStageKind', 'projected')}" for i in report["reports"])
            + f" (`sq8-rescored`: the serving files' 8-bit codes scanned, {report.get('rescored', 'max(200, 3 x k)')}"
            " candidates rescored exactly; `projected`: as described next).",
            "",
            f"{first['queries']} queries, one BLAS thread (as served). Two-stage: every vector's projection on "
            f"its {first['dims']} leading principal components is scanned, the best 2,000 (40 per result "
            "beyond 50) are rescored with their full vectors. Recall: share of the exact top k that the "
            "two-stage search returns (mean; worst query). Similarity lost: the exact top k's mean cosine minus the "
            "two-stage top k's (what a miss costs; mean and worst query). The service turns it on from "
            "`HYBRIDRAG_PROJECTED_MIN_ROWS` vectors (50,000); here it is forced on every index to measure "
            "it. Load: fitting the projection when the index opens.",
            "",
            markdown_table(
                [
                    "index",
                    "vectors",
                    "k",
                    "recall@k",
                    "worst",
                    "similarity lost mean / max",
                    "exact p50 / p95 ms",
                    "two-stage p50 / p95 ms",
                    "x",
                    "load s",
                ],
                rows,
            ),
            *extra,
        ]
    )


def _rescored() -> str:
    """How many candidates the serving files' search rescores, as the report states it."""
    from hybridrag.indexing.stores.quantized import RESCORE_MIN, RESCORE_PER_RESULT

    return f"max({RESCORE_MIN}, {RESCORE_PER_RESULT:g} x k)"
