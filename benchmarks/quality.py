"""Retrieval quality on a BEIR-layout dataset, through the same code path as the service.

For each strategy (and hybrid) every query goes through `SearchEngine.rank`, chunks are mapped to their
documents (a document takes its best chunk's rank), and nDCG@10, Recall@100, MRR@10, Recall@2 and Recall@5
are computed with ranx. A reference BM25 (bm25s, k1=0.9, b=0.4, the same tokens as our keyword index) runs
beside it so the ratio of our BM25 to a reference BM25 is known.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from hybridrag.benchmarks.common import (
    BeirDataset,
    cached_index,
    load_beir,
    machine,
    markdown_table,
    now,
    percentile,
)

METRICS = ("ndcg@10", "recall@100", "mrr@10", "recall@2", "recall@5")
DOC_DEPTH = 100
CHUNK_DEPTH = 300

# Published anchors (BEIR paper / Anserini / SBERT), quoted beside our numbers; SciFact's test split, not ours.
ANCHORS = {
    "scifact": {
        "BM25 (BEIR paper)": 0.665,
        "BM25 (Anserini)": 0.679,
        "BM25 + ms-marco-MiniLM-L-6-v2 rerank (BEIR paper)": 0.688,
        "all-MiniLM-L6-v2 (SBERT)": 0.645,
    }
}


def evaluate(qrels: dict[str, dict[str, int]], run: dict[str, dict[str, float]]) -> dict[str, float]:
    """ranx metrics; a query with no result counts as zero (ranx needs a non-empty run per query)."""
    from ranx import Qrels, Run
    from ranx import evaluate as ranx_evaluate

    filled = {q: (run.get(q) or {"__none__": 0.0}) for q in qrels}
    scores = ranx_evaluate(Qrels(qrels), Run(filled), list(METRICS), make_comparable=True)
    return {m: round(float(scores[m]), 4) for m in METRICS}


def documents_in_order(doc_ids: Iterable[str | None]) -> dict[str, float]:
    """Chunk hits -> documents: a document ranks where its best chunk ranks (None = a hit with no document)."""
    docs: dict[str, float] = {}
    for doc_id in doc_ids:
        if doc_id is not None and doc_id not in docs:
            docs[doc_id] = float(DOC_DEPTH - len(docs))  # rank-preserving score
            if len(docs) >= DOC_DEPTH:
                break
    return docs


def run_strategy(
    engine: Any,
    dataset: BeirDataset,
    strategies: Sequence[str],
    fusion: str | None = None,
    rerank: bool = False,
) -> tuple[dict[str, dict[str, float]], list[float]]:
    from hybridrag.schemas.search import SearchRequest

    run: dict[str, dict[str, float]] = {}
    latencies = []
    chunks = engine.index.chunks
    for qid, text in dataset.queries.items():
        request = SearchRequest.model_validate(
            {
                "text": text[:1000],
                "filters": {"minRelevance": 0},
                "options": {"strategies": list(strategies), "limit": 100, "rerankEnabled": rerank},
                **({"fusion": fusion} if fusion else {}),
            }
        )
        t0 = time.perf_counter()
        ranking = engine.rank(request, min_depth=CHUNK_DEPTH)
        if rerank:
            engine.rerank(request, ranking, time.perf_counter() + 60)
        latencies.append((time.perf_counter() - t0) * 1000)
        # Entity and community results have no document of their own.
        run[qid] = documents_in_order(chunks[f.id].doc_id if f.id in chunks else None for f in ranking.kept)
    return run, latencies


def bm25s_baseline(dataset: BeirDataset) -> tuple[dict[str, dict[str, float]], list[float]]:
    """bm25s over whole documents (title + text) with our analyzer's tokens, k1=0.9, b=0.4."""
    import bm25s

    from hybridrag.indexing.analysis.analyzers import Analyzer
    from hybridrag.indexing.documents.sources import SourceReport, iter_documents

    analyzer = Analyzer()
    ids, corpus_tokens = [], []
    for doc in iter_documents(dataset.corpus, SourceReport()):
        ids.append(doc.doc_id)
        corpus_tokens.append(analyzer.tokens(f"{doc.title}\n{doc.text}"))
    vocab: dict[str, int] = {}
    as_ids = [[vocab.setdefault(t, len(vocab)) for t in toks] for toks in corpus_tokens]
    retriever = bm25s.BM25(k1=0.9, b=0.4)
    retriever.index(bm25s.tokenization.Tokenized(ids=as_ids, vocab=vocab), show_progress=False)
    run: dict[str, dict[str, float]] = {}
    latencies = []
    for qid, text in dataset.queries.items():
        t0 = time.perf_counter()
        q = [vocab[t] for t in analyzer.tokens(text) if t in vocab]
        if not q:
            run[qid] = {}
            continue
        results, scores = retriever.retrieve(
            [q], k=min(DOC_DEPTH, len(ids)), show_progress=False, n_threads=1
        )
        latencies.append((time.perf_counter() - t0) * 1000)
        run[qid] = {ids[int(d)]: float(s) for d, s in zip(results[0], scores[0], strict=True) if s > 0}
    return run, latencies


def run_quality(
    dataset_dir: Path,
    split: str,
    strategies: Sequence[str],
    embedding_model: str = "e5-multilingual",
    chunk_size: int = 800,
    max_queries: int | None = None,
    cache: Path | None = None,
    baseline: bool = True,
    rerank: bool = True,
    rerank_model: str | None = None,
    encoders: Sequence[str] = (),
    build_encoders: Sequence[str] = (),
    build_encoder: str = "torch",
) -> dict[str, Any]:
    """`encoders`: further query encoders (e.g. "onnx") to run `semantic` and `hybrid` with, over the same
    index (built by torch), as rows "semantic[onnx]", "hybrid[onnx]": the quality cost of the fast path.
    `build_encoders`: further passage encoders to build a second index with (cached beside the first), searched
    with the same settings, as rows "semantic[built:onnx]", "hybrid[built:onnx]". `build_encoder`: the
    passage encoder of the main index (torch by default; onnx builds ~4x faster here)."""
    from hybridrag.indexing.builds.build import BuildConfig
    from hybridrag.pipeline.engine import SearchEngine
    from hybridrag.pipeline.settings import Settings

    dataset = load_beir(dataset_dir, split)
    if max_queries is not None:
        keep = sorted(dataset.queries)[:max_queries]
        dataset = dataset.subset(keep)
    model = None if embedding_model == "none" else embedding_model
    config = BuildConfig(embedding_model=model, chunk_size=chunk_size, encoder=build_encoder)
    index_dir, build = cached_index(dataset, config, cache)
    settings = Settings(
        index_dir=index_dir, embedding_model=embedding_model, load_embedder=model is not None, _env_file=None
    )
    if rerank_model:
        settings = settings.model_copy(update={"rerank_model": rerank_model})
    engine = SearchEngine(settings)
    engine.start()
    if not engine.components["index"].ready:
        raise RuntimeError(engine.components["index"].detail)
    results: dict[str, Any] = {}
    for name in strategies:
        combo, _, fusion = name.partition("@")  # "hybrid@rrf": plain RRF instead of the default fusion
        run, latencies = run_strategy(engine, dataset, combo.split("+"), fusion or None)
        results[name] = scored(dataset, run, latencies)
    skipped: dict[str, str] = {}
    if rerank:
        # Hybrid again with the cross-encoder over its top `rerankConfig.topK`, when one is on the machine.
        status = engine.components.get("reranker")
        if status is not None and status.ready:
            run, latencies = run_strategy(engine, dataset, ["hybrid"], rerank=True)
            results["hybrid+rerank"] = scored(dataset, run, latencies)
        else:
            skipped["hybrid+rerank"] = status.detail if status is not None else "no reranker component"
    engine.close()
    for encoder in encoders:
        fast = SearchEngine(settings.model_copy(update={"encoder": encoder}))
        fast.start()
        if not fast.components["embedder"].ready:
            skipped[f"semantic[{encoder}]"] = fast.components["embedder"].detail
            continue
        results.update(semantic_and_hybrid(fast, dataset, encoder))
        fast.close()
    builds = {}
    for encoder in build_encoders:
        other_dir, builds[encoder] = cached_index(dataset, replace(config, encoder=encoder), cache)
        other = SearchEngine(settings.model_copy(update={"index_dir": other_dir}))
        other.start()
        if not other.components["index"].ready:
            raise RuntimeError(other.components["index"].detail)
        results.update(semantic_and_hybrid(other, dataset, f"built:{encoder}"))
        other.close()
    if baseline:
        run, latencies = bm25s_baseline(dataset)
        results["bm25s (reference)"] = scored(dataset, run, latencies)
    return {
        "benchmark": "quality",
        "dataset": dataset.name,
        "split": split,
        "queries": len(dataset.queries),
        "date": now(),
        "machine": machine(),
        "config": {"embeddingModel": embedding_model, "chunkSize": chunk_size, "indexDir": str(index_dir)},
        "build": build,
        "otherBuilds": builds,
        "results": results,
        "skipped": skipped,
        "anchors": ANCHORS.get(dataset.name, {}),
    }


def scored(dataset: BeirDataset, run: dict[str, dict[str, float]], latencies: list[float]) -> dict[str, Any]:
    """One system's row of the report: its metrics against the qrels, and its latency percentiles."""
    return {
        "metrics": evaluate(dataset.qrels, run),
        "p50ms": round(percentile(latencies, 50), 2),
        "p95ms": round(percentile(latencies, 95), 2),
    }


def semantic_and_hybrid(engine: Any, dataset: BeirDataset, label: str) -> dict[str, dict[str, Any]]:
    """Rows "semantic[label]" and "hybrid[label]": the two systems an embedding change touches, on `engine`."""
    rows = {}
    for name in ("semantic", "hybrid"):
        run, latencies = run_strategy(engine, dataset, [name], None)
        rows[f"{name}[{label}]"] = scored(dataset, run, latencies)
    return rows


def to_markdown(report: dict[str, Any]) -> str:
    headers = ["system", *METRICS, "p50 ms", "p95 ms"]
    rows = [
        [name, *(r["metrics"][m] for m in METRICS), r["p50ms"], r["p95ms"]]
        for name, r in report["results"].items()
    ]
    title = (
        f"### {report['dataset']} ({report['split']}, {report['queries']} queries) — "
        f"{report['config']['embeddingModel']}, {report['date'][:10]}, {report['machine']['cores']} cores\n\n"
    )
    text = title + markdown_table(headers, rows)
    for name, reason in report.get("skipped", {}).items():
        text += f"\nNot run: {name} — {reason}\n"
    if report["anchors"]:
        text += (
            "\nPublished anchors (nDCG@10, test split): "
            + "; ".join(f"{k} {v:.3f}" for k, v in report["anchors"].items())
            + "\n"
        )
    return text
