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

With the `lance` engine, the same copies are also written as a Lance table with Lance's own inverted index
(BM25 over the same tokens, split at spaces only) and timed the same way (`search`, `oneTerm`, the query's
analysis included as in `KeywordIndex.search`), beside how far its top 100 agree with tantivy's: copies of
one passage tie, so agreement is counted in base passages (`basesAt100`: the share of tantivy's top 100's
base passages Lance's top 100 also holds; `firstBase`: the share of queries whose first hit is a copy of the
same passage). The service reads tantivy; this measures an engine that prunes, for comparison.
"""

from __future__ import annotations

import itertools
import json
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from hybridrag.benchmarks.common import BeirDataset, machine, markdown_table, now, percentile, timed_each
from hybridrag.benchmarks.synthetic import TAG

DEPTH = 100
BOUND = 500  # about where the default cut (0.3) stops a keyword-only list whose first 100 all pass
ENGINES = ("tantivy", "lance")


def _documents(corpus: Path) -> tuple[list[str], list[str]]:
    """Each passage's id and its tokens (title, then text), space-joined, as the keyword index stores them."""
    from hybridrag.indexing.analysis.analyzers import Analyzer

    analyzer = Analyzer()
    ids, tokens = [], []
    with corpus.open(encoding="utf-8") as fh:
        for line in fh:
            record = json.loads(line)
            text = " ".join(str(record.get("text") or "").split())
            title = str(record.get("title") or "")
            ids.append(str(record["_id"]))
            tokens.append(" ".join(analyzer.tokens(f"{title}\n{text}" if title else text)))
    return ids, tokens


def copies(base: Sequence[str], chunks: int) -> Iterator[tuple[str, str]]:
    """`chunks` rows (id, tokens) of the synthetic corpus: copy c of base passage p is chunk "s{c * len(base)
    + p}", its tokens the passage's and its tag's (analysed once a copy)."""
    from hybridrag.indexing.analysis.analyzers import Analyzer

    analyzer = Analyzer()
    tag = ""
    for i in range(chunks):
        if i % len(base) == 0:  # a new copy: its tag's tokens
            tag = " ".join(analyzer.tokens(TAG.format(copy=i // len(base))))
        yield f"s{i}", f"{base[i % len(base)]} {tag}"


def write_index(rows: Iterable[tuple[str, str]], path: Path) -> float:
    """A keyword index with the service's schema of `rows` (id, tokens) at `path`; returns its seconds."""
    import tantivy

    from hybridrag.indexing.stores.keyword import build_schema

    t0 = time.perf_counter()
    index = tantivy.Index(build_schema(), path=str(path), reuse=False)
    writer = index.writer(heap_size=512_000_000, num_threads=1)
    for chunk_id, tokens in rows:
        writer.add_document(
            tantivy.Document(chunk_id=chunk_id, doc_id=chunk_id, file_id="f", tokens=tokens, bigrams="")
        )
    writer.commit()
    writer.wait_merging_threads()
    return time.perf_counter() - t0


def write_lance_index(rows: Iterable[tuple[str, str]], path: Path, batch: int = 100_000) -> float:
    """`rows` (id, tokens) as a Lance table at `path` with Lance's inverted index over the tokens (no further
    analysis: split at spaces, as tantivy's field is); returns its seconds."""
    import lance
    import pyarrow as pa

    schema = pa.schema([("chunk_id", pa.string()), ("tokens", pa.string())])

    def batches() -> Iterator[pa.RecordBatch]:
        rows_left = iter(rows)
        while part := list(itertools.islice(rows_left, batch)):
            ids, tokens = zip(*part, strict=True)
            yield pa.record_batch([pa.array(ids), pa.array(tokens)], schema=schema)

    t0 = time.perf_counter()
    dataset = lance.write_dataset(pa.RecordBatchReader.from_batches(schema, batches()), str(path))
    dataset.create_scalar_index(
        "tokens",
        index_type="INVERTED",
        base_tokenizer="whitespace",
        lower_case=False,
        stem=False,
        remove_stop_words=False,
        ascii_folding=False,
        with_position=False,
    )
    return time.perf_counter() - t0


def lance_searcher(path: Path) -> Callable[[str, int], list[tuple[str, float]]]:
    """Top hits (id, BM25 score) of a text over the Lance table at `path`, the text analysed as
    `KeywordIndex.search` analyses it."""
    import lance

    from hybridrag.indexing.analysis.analyzers import Analyzer

    analyzer = Analyzer()
    dataset = lance.dataset(str(path))

    def search(text: str, limit: int = DEPTH) -> list[tuple[str, float]]:
        tokens = " ".join(analyzer.tokens(text))
        if not tokens:
            return []
        found = dataset.to_table(full_text_query=tokens, columns=["chunk_id", "_score"], limit=limit)
        pairs = zip(found.column("chunk_id").to_pylist(), found.column("_score").to_pylist(), strict=True)
        return [(str(c), float(v)) for c, v in pairs]

    return search


def _base_of(chunk_id: str, passages: int) -> int:
    return int(chunk_id[1:]) % passages  # copy i of the corpus is chunk "s{i}"


def measure_lance(
    path: Path, queries: Sequence[str], reference: Sequence[Sequence[str]], passages: int
) -> dict[str, Any]:
    """`search` and `oneTerm` over the Lance table at `path`, and its agreement with `reference` (tantivy's
    top 100 chunk ids of each query) in base passages (module docstring)."""
    timings, found, one_term = _timed_searches(lance_searcher(path), queries)
    shares, firsts = [], []
    for hits, theirs in zip(found, reference, strict=True):
        if not theirs:
            continue
        ours = [chunk_id for chunk_id, _score in hits]
        wanted = {_base_of(c, passages) for c in theirs}
        shares.append(len(wanted & {_base_of(c, passages) for c in ours}) / len(wanted))
        firsts.append(bool(ours) and _base_of(ours[0], passages) == _base_of(theirs[0], passages))
    return {
        "search": timings,
        "oneTerm": one_term,
        "agreement": {
            "basesAt100": round(sum(shares) / max(1, len(shares)), 4),
            "firstBase": round(sum(firsts) / max(1, len(firsts)), 4),
        },
    }


def engine_quality(
    dataset: BeirDataset, documents: tuple[list[str], list[str]]
) -> dict[str, dict[str, float]]:
    """The dataset's own passages (one unit each, no copies) in tantivy, read by `KeywordIndex`, and in
    Lance's inverted index over the same tokens: `bench quality`'s metrics of each engine's top 100. Both
    read the analyser's tokens alone (the service adds Japanese bigrams beside them in tantivy).
    `documents`: the corpus' ids and tokens (`_documents`)."""
    from hybridrag.benchmarks.quality import evaluate
    from hybridrag.indexing.analysis.analyzers import Analyzer
    from hybridrag.indexing.stores.keyword import KeywordIndex
    from hybridrag.indexing.stores.manifest import JAPANESE_TOKENS

    ids, tokens = documents
    runs: dict[str, dict[str, dict[str, float]]] = {}
    with tempfile.TemporaryDirectory(prefix="keyword-quality-") as work:
        write_index(zip(ids, tokens, strict=True), Path(work))
        index = KeywordIndex(Path(work), Analyzer(), 0.0, JAPANESE_TOKENS)
        runs["tantivy"] = {
            qid: {h.chunk_id: float(h.score) for h in index.search(text, DEPTH, count=False).hits}
            for qid, text in dataset.queries.items()
        }
    with tempfile.TemporaryDirectory(prefix="keyword-quality-lance-") as work:
        write_lance_index(zip(ids, tokens, strict=True), Path(work) / "passages.lance")
        search = lance_searcher(Path(work) / "passages.lance")
        runs["lance"] = {qid: dict(search(text, DEPTH)) for qid, text in dataset.queries.items()}
    return {engine: evaluate(dataset.qrels, run) for engine, run in runs.items()}


def _timed(call: Callable[[str], Any], queries: Sequence[str]) -> tuple[dict[str, float], list[Any]]:
    results, took = timed_each(call, queries)
    return {"p50ms": round(percentile(took, 50), 2), "p95ms": round(percentile(took, 95), 2)}, results


def _timed_searches(
    search: Callable[[str, int], Any], queries: Sequence[str]
) -> tuple[dict[str, float], list[Any], dict[str, float]]:
    """One engine's `search(text, k)` timed as every engine is: warmed on the first 20 queries (its files
    into the page cache), then the top `DEPTH` of each query, then the top 10 of a word every copy's tag
    holds ("Variant") 50 times. Returns the first timings, each query's hits, the one word's timings."""
    for text in queries[:20]:
        search(text, DEPTH)
    timings, found = _timed(lambda text: search(text, DEPTH), queries)
    one_term, _ = _timed(lambda text: search(text, 10), [TAG.split()[0]] * 50)
    return timings, found, one_term


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


def measure(path: Path, queries: Sequence[str]) -> tuple[dict[str, Any], list[list[str]]]:
    """The four timings of the module's docstring over the index at `path`, and each query's top 100 chunk
    ids."""
    from hybridrag.indexing.analysis.analyzers import Analyzer
    from hybridrag.indexing.stores.keyword import KeywordIndex
    from hybridrag.indexing.stores.manifest import JAPANESE_TOKENS

    index = KeywordIndex(path, Analyzer(), 0.0, JAPANESE_TOKENS)
    search, found, one_term = _timed_searches(lambda text, k: index.search(text, k, count=False), queries)
    count, counts = _timed(index.count, queries)
    with counting_passes(index) as passes:
        bounded, bounded_counts = _timed(lambda text: index.count(text, at_most=BOUND), queries)
    assert bounded_counts == [min(n, BOUND) for n in counts]
    timings = {
        "search": search,
        "count": count,
        "bounded": {**bounded, "withoutPass": round(1 - len(passes) / max(1, len(queries)), 3)},
        "oneTerm": one_term,
        "matchesP50": int(percentile([float(n) for n in counts], 50)),
    }
    return timings, [[hit.chunk_id for hit in result.hits] for result in found]


def _bytes_under(folder: Path) -> int:
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())


def check_engines(engines: Sequence[str]) -> None:
    """A ValueError unless `engines` are tantivy, optionally with lance."""
    unknown = sorted(set(engines) - set(ENGINES))
    if unknown or "tantivy" not in engines:
        shown = ", ".join(unknown) or ", ".join(engines) or "none"
        raise ValueError(f"engines are tantivy and optionally lance, not {shown}")


def run_keyword_scale(
    corpus: Path,
    queries: Sequence[str],
    sizes: Sequence[int],
    workdir: Path | None = None,
    engines: Sequence[str] = ("tantivy",),
    judged: BeirDataset | None = None,
) -> dict[str, Any]:
    """Each size's tantivy index timed (`measure`), and with "lance" in `engines` Lance's beside it; with
    `judged` too (the dataset whose corpus `corpus` is), both engines' BM25 on its judgements
    (`engine_quality`, over the passages analysed once for both)."""
    check_engines(engines)
    ids, base = _documents(corpus)
    points = []
    for chunks in sizes:
        folder = Path(tempfile.mkdtemp(prefix="keyword-scale-", dir=workdir))
        try:
            seconds = write_index(copies(base, chunks), folder)
            timings, tops = measure(folder, queries)
            point = {
                "chunks": chunks,
                "buildSeconds": round(seconds, 1),
                "bytesPerChunk": round(_bytes_under(folder) / chunks, 1),
                **timings,
            }
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        if "lance" in engines:
            folder = Path(tempfile.mkdtemp(prefix="keyword-scale-lance-", dir=workdir))
            try:
                seconds = write_lance_index(copies(base, chunks), folder / "chunks.lance")
                point["lance"] = {
                    "buildSeconds": round(seconds, 1),
                    "bytesPerChunk": round(_bytes_under(folder) / chunks, 1),
                    **measure_lance(folder / "chunks.lance", queries, tops, len(base)),
                }
            finally:
                shutil.rmtree(folder, ignore_errors=True)
        points.append(point)
    report = {
        "benchmark": "keyword-scale",
        "date": now(),
        "machine": machine(),
        "basePassages": len(base),
        "queries": len(queries),
        "depth": DEPTH,
        "bound": BOUND,
        "points": points,
    }
    if "lance" in engines and judged is not None:
        report["quality"] = engine_quality(judged, (ids, base))
        report["split"] = judged.split  # whose judgements the quality is measured on
    return report


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
    text = (
        f"### Keyword search at N chunks — {report['basePassages']} base passages, {report['queries']} queries, "
        f"{report['date']}, {report['machine'].get('cores', '?')} cores\n\n"
        + markdown_table(header, rows)
        + "\n\nIn process, ms a call (`KeywordIndex`); the synthetic corpus of `bench scale`.\n"
    )
    compared = [p for p in report["points"] if "lance" in p]
    if not compared:
        return text
    header = [
        "chunks",
        "build s tantivy / lance",
        "B/chunk tantivy / lance",
        f"search (top {report['depth']}) p50 / p95 tantivy",
        "lance",
        "one term top 10 p50 tantivy / lance",
        "lance's top 100: tantivy's base passages / same first",
    ]
    rows = [
        [
            f"{p['chunks']:,}",
            f"{p['buildSeconds']} / {p['lance']['buildSeconds']}",
            f"{p['bytesPerChunk']} / {p['lance']['bytesPerChunk']}",
            f"{p['search']['p50ms']} / {p['search']['p95ms']}",
            f"{p['lance']['search']['p50ms']} / {p['lance']['search']['p95ms']}",
            f"{p['oneTerm']['p50ms']} / {p['lance']['oneTerm']['p50ms']}",
            f"{p['lance']['agreement']['basesAt100']:.3f} / {p['lance']['agreement']['firstBase']:.3f}",
        ]
        for p in compared
    ]
    text += (
        "\n#### tantivy beside Lance's inverted index (same copies, same tokens)\n\n"
        + markdown_table(header, rows)
        + "\n"
    )
    quality = report.get("quality")
    if quality:
        metrics = list(next(iter(quality.values())))
        text += (
            f"\nThe dataset's own passages, one unit each ({report.get('split', '')} queries):\n\n"
            + markdown_table(
                ["engine", *metrics], [[e, *(m[k] for k in metrics)] for e, m in quality.items()]
            )
            + "\n"
        )
    return text
