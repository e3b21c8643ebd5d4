"""Where the milliseconds of a search go, per stage, in process (the service's own code path).

Per query: the classifier, the query embedding, each retriever (keyword and semantic run concurrently, the
graph after them with their seeds), everything else of the ranking (fusion, the relevance cut), and the
response (result items: highlights, context, sources). Medians over the queries, one index at a time.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hybridrag.benchmarks.common import machine, markdown_table, now, percentile

STAGES = ("classify", "embed", "keyword", "semantic", "graph", "fusion+cut", "response", "total")


def profile_index(
    index_dir: Path, queries: Sequence[str], embedding_model: str, label: str, strategies: Sequence[str]
) -> dict[str, Any]:
    from hybridrag.pipeline.classifier import QueryClassifier
    from hybridrag.pipeline.engine import SearchEngine
    from hybridrag.pipeline.settings import Settings
    from hybridrag.schemas.search import SearchRequest

    engine = SearchEngine(Settings(index_dir=index_dir, embedding_model=embedding_model, _env_file=None))
    engine.start()
    classifier = QueryClassifier(engine.index.analyzer)
    samples: dict[str, list[float]] = {stage: [] for stage in STAGES}
    for text in queries:
        request = SearchRequest.model_validate({"text": text, "options": {"strategies": list(strategies)}})
        t0 = time.perf_counter()
        classifier.classify(text)
        t1 = time.perf_counter()
        vector = engine.embed_queries([text])[0]
        t2 = time.perf_counter()
        ranking = engine.rank(request, precomputed=vector)
        t3 = time.perf_counter()
        engine.search(request, precomputed=vector)
        t4 = time.perf_counter()
        timings = ranking.timings
        concurrent = max(timings.get("keyword", 0.0), timings.get("semantic", 0.0))
        rank_ms = (t3 - t2) * 1000
        samples["classify"].append((t1 - t0) * 1000)
        samples["embed"].append((t2 - t1) * 1000)
        for name in ("keyword", "semantic", "graph"):
            samples[name].append(timings.get(name, 0.0))
        samples["fusion+cut"].append(
            max(0.0, rank_ms - (t1 - t0) * 1000 - concurrent - timings.get("graph", 0.0))
        )
        samples["response"].append(max(0.0, (t4 - t3) * 1000 - rank_ms))
        samples["total"].append((t1 - t0 + t2 - t1 + t4 - t3) * 1000)
    engine.close()
    return {
        "label": label,
        "chunks": len(engine.index.chunks),
        "queries": len(queries),
        "p50ms": {stage: round(percentile(v, 50), 2) for stage, v in samples.items()},
        "p95ms": {stage: round(percentile(v, 95), 2) for stage, v in samples.items()},
    }


def run_profile(
    indexes: Sequence[tuple[str, Path]],
    queries: Sequence[str],
    embedding_model: str,
    strategies: Sequence[str] = ("hybrid",),
) -> dict[str, Any]:
    return {
        "benchmark": "profile",
        "date": now(),
        "machine": machine(),
        "embeddingModel": embedding_model,
        "strategies": list(strategies),
        "reports": [profile_index(p, queries, embedding_model, label, strategies) for label, p in indexes],
    }


def to_markdown(report: dict[str, Any]) -> str:
    rows = [
        [f"{r['label']} ({r['chunks']} chunks)", *(f"{r['p50ms'][s]} / {r['p95ms'][s]}" for s in STAGES)]
        for r in report["reports"]
    ]
    return (
        f"### Per-stage profile of a {'+'.join(report['strategies'])} search — {report['embeddingModel']}, "
        f"{report['date'][:10]}, {report['machine']['cores']} cores\n\n"
        f"In process, p50 / p95 ms over {report['reports'][0]['queries']} queries. keyword and semantic run "
        "concurrently (the slower of the two counts), the graph after them with their top passages as seeds; "
        "`fusion+cut` is the rest of the ranking, `response` the result items (highlights, context, sources); "
        "`total` is classify + embed + the whole search.\n\n" + markdown_table(["index", *STAGES], rows)
    )
