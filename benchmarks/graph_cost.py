"""What the graph costs: its size and load time per index, and the graph stage of a search, in process.

For each index (a real one and, optionally, the synthetic 100k-chunk corpus built from it): nodes, edges and
bytes of the matrices, seconds to load them, the build's graph stage from the manifest, and per query the
graph stage split into seeding (entity match + seed passages), the walk (the local push) and the
rest (ranking, entities, communities), plus the number of nodes the walk touched. The query vector is
computed once beforehand, as the engine does; the graph runs alone, so its seed search is included.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hybridrag.benchmarks.common import machine, markdown_table, now, percentile


def _matrix_bytes(m: Any) -> int:
    return int(m.data.nbytes + m.indices.nbytes + m.indptr.nbytes)


def measure_index(
    index_dir: Path, queries: Sequence[str], embedding_model: str, label: str, encoder: str = "auto"
) -> dict[str, Any]:
    import numpy as np

    from hybridrag.indexing.builds.build import BuildConfig
    from hybridrag.indexing.stores.filters import ChunkFilters
    from hybridrag.indexing.stores.graph_index import GraphIndex
    from hybridrag.indexing.stores.versions import current_version
    from hybridrag.pipeline.classifier import QueryClassifier
    from hybridrag.pipeline.engine import SearchEngine
    from hybridrag.pipeline.graph_retriever import GraphRetriever
    from hybridrag.pipeline.graph_walk import walk
    from hybridrag.pipeline.retrievers import RetrievalQuery
    from hybridrag.pipeline.settings import Settings

    version = current_version(index_dir)
    config = BuildConfig.from_manifest(version.manifest)
    engine = SearchEngine(
        Settings(index_dir=index_dir, embedding_model=embedding_model, encoder=encoder, _env_file=None)
    )
    engine.start()
    retriever = engine.index.retrievers["graph"]
    assert isinstance(retriever, GraphRetriever)
    graph = retriever.graph
    t0 = time.perf_counter()
    GraphIndex.load(version.path / "graph", engine.index.chunks)
    load_s = time.perf_counter() - t0
    classifier = QueryClassifier(engine.index.analyzer)
    seed_ms, walk_ms, total_ms, sizes = [], [], [], []
    for text in queries:
        classification = classifier.classify(text)
        vector = engine.embed_queries([text])[0]
        query = RetrievalQuery(
            text, ChunkFilters(), vector, classification.type, tuple(classification.extracted_entities)
        )
        t0 = time.perf_counter()
        restart = retriever.restart(query).restart
        t1 = time.perf_counter()
        if restart:
            nodes, _mass, _p = walk(graph, restart)
            sizes.append(len(nodes))
        t2 = time.perf_counter()
        retriever.retrieve(query, 100)  # the whole stage again, as a search runs it
        t3 = time.perf_counter()
        seed_ms.append((t1 - t0) * 1000)
        walk_ms.append((t2 - t1) * 1000)
        total_ms.append((t3 - t2) * 1000)
    engine.close()
    stage_s = version.manifest.get("stageSeconds", {})
    return {
        "label": label,
        "chunks": len(graph.chunks),
        "entities": len(graph.entities),
        "relations": graph.relation_count,
        "synonyms": len(graph.arrays.synonym_keys),
        "edges": int(graph.transition.nnz // 2),
        "matrixBytes": _matrix_bytes(graph.transition),
        "loadSeconds": round(load_s, 2),
        "buildGraphSeconds": stage_s.get("graph"),
        "buildEntitySeconds": stage_s.get("entities"),
        "graphSynonyms": config.graph_synonyms,
        "queries": len(queries),
        "seedP50ms": round(percentile(seed_ms, 50), 2),
        "walkP50ms": round(percentile(walk_ms, 50), 2),
        "stageP50ms": round(percentile(total_ms, 50), 2),
        "stageP95ms": round(percentile(total_ms, 95), 2),
        "neighbourhoodP50": int(np.median(sizes)) if sizes else 0,
        "neighbourhoodMax": int(max(sizes)) if sizes else 0,
    }


def run_graph_cost(
    indexes: Sequence[tuple[str, Path]], queries: Sequence[str], embedding_model: str, encoder: str = "auto"
) -> dict[str, Any]:
    return {
        "benchmark": "graph-cost",
        "date": now(),
        "machine": machine(),
        "embeddingModel": embedding_model,
        "encoder": encoder,
        "reports": [measure_index(path, queries, embedding_model, label, encoder) for label, path in indexes],
    }


def to_markdown(report: dict[str, Any]) -> str:
    rows = [
        [
            r["label"],
            r["chunks"],
            r["entities"],
            r["edges"],
            round(r["matrixBytes"] / 1e6, 1),
            r["loadSeconds"],
            r["buildGraphSeconds"],
            r["seedP50ms"],
            r["walkP50ms"],
            r["stageP50ms"],
            r["stageP95ms"],
            r["neighbourhoodP50"],
        ]
        for r in report["reports"]
    ]
    return (
        f"### Graph cost — {report['embeddingModel']}, {report['date'][:10]}, {report['machine']['cores']} cores\n\n"
        f"In process, {report['reports'][0]['queries']} queries per index, the query vector computed beforehand "
        "(the engine embeds once per search); the graph runs alone, so its stage includes its own seed search.\n\n"
        + markdown_table(
            [
                "index",
                "chunks",
                "entities",
                "edges",
                "matrix MB",
                "load s",
                "build graph s",
                "seed p50 ms",
                "walk p50 ms",
                "stage p50 ms",
                "stage p95 ms",
                "nodes walked p50",
            ],
            rows,
        )
    )
