"""The keyword search against N chunks (`hybridrag bench keyword-scale`): what a search and a count cost.

For each N a keyword index is written for the synthetic corpus `bench scale` serves (copy `c` of a base
passage is its title and text with the tag "Variant c.", `benchmarks/synthetic.py`), in tantivy with the
service's schema; a copy's tokens are its base passage's (analysed once) and its tag's, which is what the
analyzer makes of the whole. It is read through `KeywordIndex`, the service's own read side, with the
dataset's queries:
- `search`: the top 100 without a count (every keyword retrieval, at the depth the service fetches);
- `count`: every match counted (what `totalCount` of a keyword-only search read before it was bounded);
- `bounded`: the count up to `BOUND` matches, as `totalCount` under the default relevance cut reads it, and
  the share of queries answered from the terms' frequencies without a pass;
- `one term`: the top 10 of the tag's word, which every chunk holds with the same score: an engine that
  prunes by block maxima answers it at once; a scan takes time in proportion to N.
Milliseconds are p50 / p95 of the call itself (in process; the service adds HTTP, the query's analysis and
the other retrievers). The full-service view at N is `bench scale`.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from hybridrag.benchmarks.common import machine, markdown_table, now, percentile, timed_each
from hybridrag.benchmarks.synthetic import TAG

DEPTH = 100
BOUND = 500  # about where the default cut (0.3) stops a keyword-only list whose first 100 all pass


def _base_tokens(corpus: Path) -> list[str]:
    """Each base passage's tokens (title, then text), space-joined, as the keyword index stores them."""
    from hybridrag.indexing.analysis.analyzers import Analyzer

    analyzer = Analyzer()
    out = []
    with corpus.open(encoding="utf-8") as fh:
        for line in fh:
            record = json.loads(line)
            text = " ".join(str(record.get("text") or "").split())
            title = str(record.get("title") or "")
            out.append(" ".join(analyzer.tokens(f"{title}\n{text}" if title else text)))
    return out


def write_index(base: Sequence[str], chunks: int, path: Path) -> float:
    """The keyword index of `chunks` copies of the `base` passages at `path`; returns its seconds."""
    import tantivy

    from hybridrag.indexing.analysis.analyzers import Analyzer
    from hybridrag.indexing.stores.keyword import build_schema

    analyzer = Analyzer()
    t0 = time.perf_counter()
    index = tantivy.Index(build_schema(), path=str(path), reuse=False)
    writer = index.writer(heap_size=512_000_000, num_threads=1)
    tag = ""
    for i in range(chunks):
        if i % len(base) == 0:  # a new copy: its tag's tokens
            tag = " ".join(analyzer.tokens(TAG.format(copy=i // len(base))))
        doc = tantivy.Document(
            chunk_id=f"s{i}", doc_id=f"s{i}", file_id="f", tokens=f"{base[i % len(base)]} {tag}", bigrams=""
        )
        writer.add_document(doc)
    writer.commit()
    writer.wait_merging_threads()
    return time.perf_counter() - t0


def _timed(call: Callable[[str], Any], queries: Sequence[str]) -> tuple[dict[str, float], list[Any]]:
    results, took = timed_each(call, queries)
    return {"p50ms": round(percentile(took, 50), 2), "p95ms": round(percentile(took, 95), 2)}, results


@contextmanager
def counting_passes(index: Any) -> Iterator[list[int]]:
    """Within the block, a list that grows by one for each pass `index` (a `KeywordIndex`) makes over its
    matches (each call of its searcher's `search`)."""
    passes: list[int] = []
    searcher = index._searcher

    class Counting:
        def __getattr__(self, name: str) -> Any:
            return getattr(searcher, name)

        def search(self, *args: Any, **kwargs: Any) -> Any:
            passes.append(1)
            return searcher.search(*args, **kwargs)

    index._searcher = Counting()
    try:
        yield passes
    finally:
        index._searcher = searcher


def measure(path: Path, queries: Sequence[str]) -> dict[str, Any]:
    """The four timings of the module's docstring over the index at `path`."""
    from hybridrag.indexing.analysis.analyzers import Analyzer
    from hybridrag.indexing.stores.keyword import KeywordIndex

    index = KeywordIndex(path, Analyzer(), 0.0, False)
    for text in queries[:20]:  # warm the files into the page cache
        index.search(text, DEPTH, count=False)
    search, _ = _timed(lambda text: index.search(text, DEPTH, count=False), queries)
    count, counts = _timed(index.count, queries)
    with counting_passes(index) as passes:
        bounded, bounded_counts = _timed(lambda text: index.count(text, at_most=BOUND), queries)
    assert bounded_counts == [min(n, BOUND) for n in counts]
    word = TAG.split()[0]  # "Variant": every copy's tag holds it
    one_term, _ = _timed(lambda text: index.search(text, 10, count=False), [word] * 50)
    return {
        "search": search,
        "count": count,
        "bounded": {**bounded, "withoutPass": round(1 - len(passes) / max(1, len(queries)), 3)},
        "oneTerm": one_term,
        "matchesP50": int(percentile([float(n) for n in counts], 50)),
    }


def run_keyword_scale(
    corpus: Path, queries: Sequence[str], sizes: Sequence[int], workdir: Path | None = None
) -> dict[str, Any]:
    base = _base_tokens(corpus)
    points = []
    for chunks in sizes:
        folder = Path(tempfile.mkdtemp(prefix="keyword-scale-", dir=workdir))
        try:
            seconds = write_index(base, chunks, folder)
            size = sum(f.stat().st_size for f in folder.iterdir() if f.is_file())
            points.append(
                {
                    "chunks": chunks,
                    "buildSeconds": round(seconds, 1),
                    "bytesPerChunk": round(size / chunks, 1),
                    **measure(folder, queries),
                }
            )
        finally:
            shutil.rmtree(folder, ignore_errors=True)
    return {
        "benchmark": "keyword-scale",
        "date": now(),
        "machine": machine(),
        "basePassages": len(base),
        "queries": len(queries),
        "depth": DEPTH,
        "bound": BOUND,
        "points": points,
    }


def to_markdown(report: dict[str, Any]) -> str:
    header = [
        "chunks",
        "build s",
        "B/chunk",
        f"search (top {report['depth']}) p50 / p95",
        "count p50 / p95",
        f"count to {report['bound']} p50 / p95 (without a pass)",
        "one term top 10 p50",
        "matches p50",
    ]
    rows = [
        [
            f"{p['chunks']:,}",
            p["buildSeconds"],
            p["bytesPerChunk"],
            f"{p['search']['p50ms']} / {p['search']['p95ms']}",
            f"{p['count']['p50ms']} / {p['count']['p95ms']}",
            f"{p['bounded']['p50ms']} / {p['bounded']['p95ms']} ({p['bounded']['withoutPass']:.0%})",
            p["oneTerm"]["p50ms"],
            f"{p['matchesP50']:,}",
        ]
        for p in report["points"]
    ]
    return (
        f"### Keyword search at N chunks — {report['basePassages']} base passages, {report['queries']} queries, "
        f"{report['date']}, {report['machine'].get('cores', '?')} cores\n\n"
        + markdown_table(header, rows)
        + "\n\nIn process, ms a call (`KeywordIndex`); the synthetic corpus of `bench scale`.\n"
    )
