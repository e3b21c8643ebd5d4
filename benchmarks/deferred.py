"""Quality before a merge: search over a graph that deferred writes left behind, against the merged graph.

A share of the dataset's documents (the same share of its judged documents and of the others, drawn with a
fixed seed) is held back; the index is built from the rest, then the held-back documents are written in
batches as the documents API writes them (`IndexBuilder.apply(..., defer_graph=True)`: the graph kept as it
is, the new passages linked to its entities, `stores.graph_delta`). The dev queries are searched three
times: before the merge with the links, before the merge without them (the graph blind to the new passages,
as before the links existed), and after the merge, whose graph is a full build's of the same documents
(`tests/unit/test_graph_merge.py`). nDCG@10 and R@5 per system and state.
"""

from __future__ import annotations

import json
import random
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from hybridrag.benchmarks.common import load_beir, machine, markdown_table, now
from hybridrag.benchmarks.quality import run_strategy, scored

SYSTEMS = ("graph", "keyword+semantic", "hybrid")


def held_back(corpus: Path, judged: set[str], share: float, seed: int) -> tuple[list[str], list[str]]:
    """The corpus' lines split into (kept, held back): `share` of the judged documents and of the others."""
    lines = [line for line in corpus.read_text("utf-8").splitlines() if line.strip()]
    rng = random.Random(seed)
    held: set[int] = set()
    for group in (True, False):
        members = [i for i, line in enumerate(lines) if (json.loads(line)["_id"] in judged) is group]
        held.update(rng.sample(members, round(share * len(members))))
    return (
        [line for i, line in enumerate(lines) if i not in held],
        [line for i, line in enumerate(lines) if i in held],
    )


def run_deferred(
    dataset_dir: Path,
    split: str,
    embedding_model: str,
    encoder: str = "torch",
    share: float = 0.2,
    batch: int = 100,
    seed: int = 0,
) -> dict[str, Any]:
    from hybridrag.indexing.builds.build import BuildConfig, IndexBuilder
    from hybridrag.indexing.documents.sources import SourceReport, iter_documents
    from hybridrag.indexing.stores import versions
    from hybridrag.indexing.stores.graph_delta import DELTA
    from hybridrag.pipeline.engine import SearchEngine
    from hybridrag.pipeline.settings import Settings

    dataset = load_beir(dataset_dir, split)
    judged = {d for rels in dataset.qrels.values() for d in rels}
    kept, held = held_back(dataset.corpus, judged, share, seed)
    config = BuildConfig(embedding_model=embedding_model, encoder=encoder)
    results: dict[str, dict[str, Any]] = {}
    seconds: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="bench-deferred-") as tmp:
        work = Path(tmp)
        (work / "kept.jsonl").write_text("\n".join(kept) + "\n", "utf-8")
        (work / "held.jsonl").write_text("\n".join(held) + "\n", "utf-8")
        index_dir = work / "index"
        builder = IndexBuilder(index_dir, config)
        t0 = time.perf_counter()
        builder.build(work / "kept.jsonl")
        seconds["build"] = time.perf_counter() - t0
        docs = list(iter_documents(work / "held.jsonl", SourceReport()))
        t0 = time.perf_counter()
        for at in range(0, len(docs), batch):
            builder.apply(docs[at : at + batch], [], defer_graph=True)
        seconds["writes"] = time.perf_counter() - t0
        settings = Settings(index_dir=index_dir, embedding_model=embedding_model, _env_file=None)

        def search(state: str) -> None:
            engine = SearchEngine(settings)
            engine.start()
            try:
                if not engine.components["index"].ready:
                    raise RuntimeError(engine.components["index"].detail)
                for name in SYSTEMS:
                    run, latencies = run_strategy(engine, dataset, name.split("+"))
                    results[f"{name} ({state})"] = scored(dataset, run, latencies)
            finally:
                engine.close()

        search("before the merge, linked")
        delta = versions.current_version(index_dir).path / "graph" / DELTA
        aside = work / "delta.arrow"
        shutil.move(delta, aside)
        search("before the merge, not linked")
        shutil.move(aside, delta)
        t0 = time.perf_counter()
        builder.merge_graph()
        seconds["merge"] = time.perf_counter() - t0
        search("after the merge")
    return {
        "benchmark": "deferred",
        "dataset": dataset.name,
        "split": split,
        "queries": len(dataset.queries),
        "date": now(),
        "machine": machine(),
        "config": {
            "embeddingModel": embedding_model,
            "encoder": encoder,
            "heldBackShare": share,
            "heldBackDocuments": len(held),
            "batch": batch,
            "seed": seed,
        },
        "seconds": {k: round(v, 1) for k, v in seconds.items()},
        "results": results,
    }


def to_markdown(report: dict[str, Any]) -> str:
    config = report["config"]
    rows = []
    for name in SYSTEMS:
        after = report["results"][f"{name} (after the merge)"]["metrics"]
        for state in ("before the merge, linked", "before the merge, not linked", "after the merge"):
            m = report["results"][f"{name} ({state})"]["metrics"]
            rows.append(
                [
                    name,
                    state,
                    m["ndcg@10"],
                    m["recall@5"],
                    round(m["ndcg@10"] - after["ndcg@10"], 4),
                ]
            )
    return (
        f"### Before a merge — {report['dataset']} {report['split']}, {report['queries']} queries, "
        f"{config['heldBackDocuments']} documents ({config['heldBackShare']:.0%} of the judged and of the "
        f"others) written in batches of {config['batch']} after the build, {config['embeddingModel']}, "
        f"{report['date'][:10]}\n\n"
        + markdown_table(["system", "state", "nDCG@10", "R@5", "nDCG@10 - after the merge"], rows)
    )
