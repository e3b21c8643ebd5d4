"""Choose CRAG's upper/lower thresholds on dev data.

For every query's top-10 hybrid chunk results, the evidence score (the chunk's semantic similarity; the
cross-encoder probability when one is used) is paired with the judgement (is the chunk's document relevant?).
The upper threshold is the lowest score above which at least 80% of results are relevant ("correct"); the
lower threshold is the highest score below which at least 90% are not ("incorrect"); in between is
"ambiguous", as in the CRAG paper's two-threshold evaluator.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np

from hybridrag.benchmarks.common import RESULTS, load_beir, machine, markdown_table, now, write_results

TOP = 10
PRECISION_CORRECT = 0.8
PRECISION_INCORRECT = 0.9


def collect(dataset_dir: Path, split: str, index_dir: Path, model: str) -> tuple[np.ndarray, np.ndarray]:
    from hybridrag.pipeline.engine import SearchEngine
    from hybridrag.pipeline.settings import Settings
    from hybridrag.schemas.search import SearchRequest

    dataset = load_beir(dataset_dir, split)
    engine = SearchEngine(Settings(index_dir=index_dir, embedding_model=model, _env_file=None))
    engine.start()
    scores, labels = [], []
    for qid, text in dataset.queries.items():
        request = SearchRequest.model_validate(
            {"text": text[:1000], "filters": {"minRelevance": 0}, "options": {"rerankEnabled": False}}
        )
        ranking = engine.rank(request)
        semantic = {c.id: c.score for c in ranking.retrieved["semantic"].candidates}
        for item in [f for f in ranking.kept if f.id in ranking.index.chunks][:TOP]:
            scores.append(semantic.get(item.id, 0.0))
            labels.append(ranking.index.chunks[item.id].doc_id in dataset.qrels[qid])
    engine.close()
    return np.asarray(scores), np.asarray(labels)


def thresholds(scores: np.ndarray, labels: np.ndarray) -> tuple[float, float]:
    grid = np.unique(np.round(scores, 3))
    upper = next((float(t) for t in grid if labels[scores >= t].mean() >= PRECISION_CORRECT), float(grid[-1]))
    lower = float(grid[0])
    for t in grid:
        below = labels[scores < t]
        if below.size and (1 - below.mean()) >= PRECISION_INCORRECT:
            lower = float(t)
    return upper, min(lower, upper)


def main(args: list[str]) -> dict[str, Any]:
    model = args[0]
    rows: list[list[Any]] = []
    datasets: dict[str, Any] = {}
    report: dict[str, Any] = {
        "benchmark": "crag-calibration",
        "model": model,
        "date": now(),
        "machine": machine(),
        "datasets": datasets,
    }
    all_scores, all_labels = [], []
    for spec in args[1:]:
        dataset_dir, split, index_dir = spec.split(":")
        s, lab = collect(Path(dataset_dir), split, Path(index_dir), model)
        all_scores.append(s)
        all_labels.append(lab)
        up, lo = thresholds(s, lab)
        datasets[Path(dataset_dir).name] = {"upper": up, "lower": lo, "results": int(s.size)}
        rows.append([Path(dataset_dir).name, up, lo, int(s.size), float(lab.mean())])
    s, lab = np.concatenate(all_scores), np.concatenate(all_labels)
    up, lo = thresholds(s, lab)
    report["pooled"] = {"upper": up, "lower": lo}
    rows.append(["pooled", up, lo, int(s.size), float(lab.mean())])
    markdown = f"### CRAG thresholds for {model}, {report['date'][:10]}\n\n" + markdown_table(
        ["dataset", "upper", "lower", "results", "relevant share"], rows
    )
    write_results(RESULTS / f"crag-calibration-{model}.json", report, markdown)
    print(markdown)
    return report


if __name__ == "__main__":
    main(sys.argv[1:])
