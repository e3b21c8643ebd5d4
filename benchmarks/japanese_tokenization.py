"""Which Japanese keyword analysis wins: Sudachi words, character bigrams, or both (and at what bigram weight).

All variants are query-time settings of one keyword index (it always holds both fields), so this runs on an
index the quality benchmark already built; the winner becomes `BuildConfig`'s default.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hybridrag.benchmarks.common import load_beir, machine, markdown_table, now
from hybridrag.benchmarks.quality import METRICS, documents_in_order, evaluate

VARIANTS: dict[str, tuple[bool, float]] = {
    "sudachi": (True, 0.0),
    "bigram": (False, 1.0),
    "sudachi + bigram x0.3": (True, 0.3),
    "sudachi + bigram x0.5": (True, 0.5),
    "sudachi + bigram x1.0": (True, 1.0),
}


def run(dataset_dir: Path, split: str, index_dir: Path) -> dict[str, Any]:
    from hybridrag.indexing.analysis.analyzers import Analyzer
    from hybridrag.indexing.stores.keyword import KeywordIndex
    from hybridrag.indexing.stores.tables import CHUNKS, read_version_table
    from hybridrag.indexing.stores.versions import current_version

    dataset = load_beir(dataset_dir, split)
    version = current_version(index_dir)
    table = read_version_table(version.path, CHUNKS).select(["chunk_id", "doc_id"]).to_pydict()
    to_doc = dict(zip(table["chunk_id"], table["doc_id"], strict=True))
    analyzer = Analyzer()
    results = {}
    for name, (tokens, bigram_weight) in VARIANTS.items():
        index = KeywordIndex(version.path / "keyword", analyzer, bigram_weight, tokens)
        run_: dict[str, dict[str, float]] = {}
        for qid, text in dataset.queries.items():
            hits = index.search(text, 300).hits
            run_[qid] = documents_in_order(to_doc[hit.chunk_id] for hit in hits)
        results[name] = evaluate(dataset.qrels, run_)
    return {
        "benchmark": "japanese-tokenization",
        "dataset": dataset.name,
        "split": split,
        "queries": len(dataset.queries),
        "date": now(),
        "machine": machine(),
        "results": results,
    }


def to_markdown(report: dict[str, Any]) -> str:
    rows = [[name, *(m[k] for k in METRICS)] for name, m in report["results"].items()]
    return (
        f"### Japanese keyword analysis on {report['dataset']} ({report['split']}, {report['queries']} queries), "
        f"{report['date'][:10]}\n\n" + markdown_table(["analysis", *METRICS], rows)
    )


if __name__ == "__main__":
    import sys

    from hybridrag.benchmarks.common import RESULTS, write_results

    report = run(Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3]))
    write_results(RESULTS / f"japanese-tokenization-{report['dataset']}.json", report, to_markdown(report))
    print(to_markdown(report))
