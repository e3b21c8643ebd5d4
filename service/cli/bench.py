"""`hybridrag bench ...`: quality, latency, load and build-cost benchmarks (JSON + markdown results).

The CLI sits above `hybridrag.benchmarks`, which imports the pipeline and indexing code, never the CLI.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from hybridrag.cli.commands import ModelOpt, app, offline
from hybridrag.indexing.models.embedders import DEFAULT_EMBEDDING_MODEL

if TYPE_CHECKING:
    from hybridrag.benchmarks.common import BeirDataset

bench_app = typer.Typer(
    help="Benchmarks (quality, latency, build cost); results as JSON + markdown.", no_args_is_help=True
)
app.add_typer(bench_app, name="bench")
app.add_typer(bench_app, name="bench")


def synthetic_index(name: str, base_index: Path, chunks: int, embedding_model: str, target: Path) -> Path:
    """The synthetic corpus of `chunks` chunks built from `base_index` (cached; its build report is written
    beside `target` when it is built), as an index directory."""
    from hybridrag.benchmarks.common import CACHE, regraph_if_older, write_results
    from hybridrag.benchmarks.synthetic import build_synthetic
    from hybridrag.benchmarks.synthetic import to_markdown as build_markdown

    synthetic_dir = CACHE / f"synthetic-{name}-{embedding_model}-{chunks}"
    if not (synthetic_dir / "index" / "current").exists():
        built = build_synthetic(base_index, chunks, synthetic_dir, embedding_model)
        write_results(target.with_name(f"build-synthetic-{chunks}.json"), built, build_markdown(built))
    else:
        regraph_if_older(synthetic_dir / "index")
    return synthetic_dir / "index"


def _queries_and_indexes(
    dataset: Path,
    split: str,
    max_queries: int,
    embedding_model: str,
    synthetic_chunks: int,
    target: Path | None,
    stem: str,
) -> tuple[BeirDataset, list[str], list[tuple[str, Path]], Path]:
    """The dataset, its first `max_queries` queries, its cached index (plus the synthetic corpus of
    `synthetic_chunks` chunks when > 0) and the result file (`target`, else results/<stem>-<name>-<model>.json)."""
    from hybridrag.benchmarks.common import RESULTS, cached_index, load_beir
    from hybridrag.indexing.builds.build import BuildConfig

    data = load_beir(dataset, split)
    queries = [data.queries[q][:1000] for q in sorted(data.queries)[:max_queries]]
    index_dir, _ = cached_index(data, BuildConfig(embedding_model=embedding_model))
    indexes = [(data.name, index_dir)]
    target = target or RESULTS / f"{stem}-{data.name}-{embedding_model}.json"
    if synthetic_chunks:
        synthetic = synthetic_index(data.name, index_dir, synthetic_chunks, embedding_model, target)
        indexes.append((f"synthetic {synthetic_chunks // 1000}k", synthetic))
    return data, queries, indexes, target


@bench_app.command("quality")
def bench_quality(
    dataset: Annotated[
        Path, typer.Option("--dataset", help="BEIR-layout folder (corpus.jsonl, queries.jsonl, qrels/)")
    ],
    split: Annotated[str, typer.Option("--split", help="qrels/<split>.tsv")] = "test",
    strategies: Annotated[
        str,
        typer.Option(
            help="Comma-separated systems; '+' combines strategies (keyword+semantic); '@rrf' or "
            "'@score-rrf' picks the fusion (hybrid@rrf)"
        ),
    ] = "keyword,semantic,graph,hybrid,hybrid@rrf,keyword+semantic",
    embedding_model: ModelOpt = DEFAULT_EMBEDDING_MODEL,
    chunk_size: Annotated[int, typer.Option(min=50)] = 800,
    casing: Annotated[
        str,
        typer.Option(
            help="Run on a copy with corpus and queries lower- or upper-cased (lower, upper; comma-separated "
            "for several reports), to see what depends on letter case; original: as written"
        ),
    ] = "original",
    max_queries: Annotated[int | None, typer.Option(min=1, help="Only the first N queries (by id)")] = None,
    baseline: Annotated[
        bool, typer.Option("--baseline/--no-baseline", help="Run the bm25s reference")
    ] = True,
    rerank_model: Annotated[
        str | None,
        typer.Option(
            help="Cross-encoder (local folder or HF cache) for a hybrid+rerank row; default: the service's"
        ),
    ] = None,
    encoders: Annotated[
        str,
        typer.Option(
            help="Further query encoders (comma-separated, e.g. onnx) for semantic[...] and hybrid[...] rows"
        ),
    ] = "",
    build_encoders: Annotated[
        str,
        typer.Option(
            help="Further passage encoders (comma-separated, e.g. onnx): a second index built with each, "
            "searched as semantic[built:...] and hybrid[built:...] rows"
        ),
    ] = "",
    out: Annotated[
        Path | None, typer.Option("--out", help="JSON file (a .md table is written beside it)")
    ] = None,
) -> None:
    """nDCG@10, Recall@100, MRR@10, Recall@2/5 per strategy, through the service's own search path."""
    offline()
    from hybridrag.benchmarks.common import RESULTS, write_results
    from hybridrag.benchmarks.quality import run_quality, to_markdown

    if not (dataset / "corpus.jsonl").is_file():
        raise typer.BadParameter(f"{dataset} has no corpus.jsonl", param_hint="--dataset")
    if not (dataset / "qrels" / f"{split}.tsv").is_file():
        raise typer.BadParameter(f"{dataset}/qrels/{split}.tsv does not exist", param_hint="--split")
    names = [s.strip() for s in strategies.split(",") if s.strip()]
    bad = [
        s
        for s in names
        if not set(s.partition("@")[0].split("+")) <= {"keyword", "semantic", "graph", "hybrid"}
        or s.partition("@")[2] not in ("", "rrf", "score-rrf")
    ]
    if bad or not names:
        raise typer.BadParameter(f"unknown strategy {bad}", param_hint="--strategies")
    casings = [c.strip() for c in casing.split(",") if c.strip()]
    if not casings or any(c not in ("original", "lower", "upper") for c in casings):
        raise typer.BadParameter("use original, lower or upper", param_hint="--casing")
    from hybridrag.benchmarks.common import recased

    for one in casings:
        source = dataset if one == "original" else recased(dataset, one)
        report = run_quality(
            source,
            split,
            names,
            embedding_model,
            chunk_size,
            max_queries,
            baseline=baseline,
            rerank_model=rerank_model,
            encoders=[e.strip() for e in encoders.split(",") if e.strip()],
            build_encoders=[e.strip() for e in build_encoders.split(",") if e.strip()],
        )
        markdown = to_markdown(report)
        target = out if out is not None and len(casings) == 1 else None
        target = target or RESULTS / f"quality-{source.name}-{embedding_model.replace('/', '_')}.json"
        write_results(target, report, markdown)
        typer.echo(markdown)
        typer.echo(f"written: {target} and {target.with_suffix('.md')}", err=True)


@bench_app.command("latency")
def bench_latency(
    dataset: Annotated[
        Path, typer.Option("--dataset", help="BEIR-layout folder: its queries, and its corpus indexed")
    ],
    split: Annotated[str, typer.Option(help="qrels split whose queries are sent")] = "test",
    synthetic_chunks: Annotated[
        int, typer.Option(min=0, help="Also measure a synthetic corpus of this many chunks (0: skip)")
    ] = 100_000,
    levels: Annotated[str, typer.Option(help="Concurrent clients, comma-separated")] = "1,4,16",
    strategies: Annotated[
        str, typer.Option(help="Comma-separated strategies")
    ] = "keyword,semantic,graph,hybrid",
    requests: Annotated[int, typer.Option(min=1, help="Requests per strategy per concurrency level")] = 160,
    embedding_model: ModelOpt = DEFAULT_EMBEDDING_MODEL,
    workers: Annotated[int, typer.Option(min=1, help="Service worker processes (serve --workers)")] = 1,
    baseline: Annotated[
        Path | None,
        typer.Option(
            help="Source tree of the code to compare with (e.g. `git worktree add /tmp/old <commit>`): served "
            "side by side on the same index, measured in alternating rounds; the table adds its figures "
            "and the ratios",
            exists=True,
            file_okay=False,
        ),
    ] = None,
    out: Annotated[
        Path | None, typer.Option("--out", help="JSON file (.md table and .png plot beside it)")
    ] = None,
) -> None:
    """p50/p95/p99 and requests/s per strategy at 1, 4 and 16 clients against the HTTP service on loopback."""
    offline()
    from hybridrag.benchmarks.common import RESULTS, cached_index, load_beir, write_results
    from hybridrag.benchmarks.latency import plot, run_latency, to_markdown
    from hybridrag.indexing.builds.build import BuildConfig

    try:
        level_list = [int(x) for x in levels.split(",") if x.strip()]
    except ValueError:
        raise typer.BadParameter(f"not a list of integers: {levels!r}", param_hint="--levels") from None
    if not level_list or min(level_list) < 1:
        raise typer.BadParameter("levels must be positive integers", param_hint="--levels")
    names = [x.strip() for x in strategies.split(",") if x.strip()]
    if not names or not set(names) <= {"keyword", "semantic", "graph", "hybrid"}:
        raise typer.BadParameter(f"unknown strategy in {strategies!r}", param_hint="--strategies")
    data = load_beir(dataset, split)
    queries = list(data.queries.values())
    index_dir, _ = cached_index(data, BuildConfig(embedding_model=embedding_model))
    target = out or RESULTS / f"latency-{data.name}-{embedding_model}.json"
    reports = [
        run_latency(
            index_dir,
            queries,
            embedding_model,
            level_list,
            names,
            requests,
            label=data.name,
            workers=workers,
            baseline=baseline,
        )
    ]
    markdown = to_markdown(reports[0])
    if synthetic_chunks:
        reports.append(
            run_latency(
                synthetic_index(data.name, index_dir, synthetic_chunks, embedding_model, target),
                queries,
                embedding_model,
                level_list,
                names,
                requests,
                label=f"synthetic {synthetic_chunks // 1000}k",
                workers=workers,
                baseline=baseline,
            )
        )
        markdown += "\n" + to_markdown(reports[1])
    write_results(target, {"benchmark": "latency", "reports": reports}, markdown)
    plot(reports, target.with_suffix(".png"))
    typer.echo(markdown)


@bench_app.command("load")
def bench_load(
    dataset: Annotated[Path, typer.Option("--dataset", help="BEIR-layout folder: its queries and its index")],
    split: Annotated[str, typer.Option(help="qrels split whose queries are sent")] = "test",
    clients: Annotated[int, typer.Option(min=1, help="Concurrent clients")] = 16,
    duration: Annotated[float, typer.Option(min=0, help="Seconds of the load run (0: skip)")] = 60,
    soak: Annotated[float, typer.Option(min=0, help="Seconds of the soak run (0: skip)")] = 600,
    swap_duration: Annotated[
        float,
        typer.Option(min=0, help="Seconds of load during which the index is rebuilt and switched (0: skip)"),
    ] = 240,
    embedding_model: ModelOpt = DEFAULT_EMBEDDING_MODEL,
    out: Annotated[Path | None, typer.Option("--out", help="JSON file (.md table beside it)")] = None,
) -> None:
    """Load (errors, percentiles), soak (memory over time) and an index swap under load, on loopback."""
    offline()
    import shutil
    import tempfile

    from hybridrag.benchmarks.common import RESULTS, cached_index, load_beir, write_results
    from hybridrag.benchmarks.soak import run_load, to_markdown
    from hybridrag.indexing.builds.build import BuildConfig

    data = load_beir(dataset, split)
    queries = list(data.queries.values())
    index_dir, _ = cached_index(data, BuildConfig(embedding_model=embedding_model))
    reports = (
        [run_load(index_dir, queries, embedding_model, clients, duration, label="load")] if duration else []
    )
    if swap_duration:
        with tempfile.TemporaryDirectory() as tmp:
            # A copy, so the rebuild never touches the cached index other benchmarks reuse.
            copy = Path(tmp) / "index"
            shutil.copytree(index_dir, copy, symlinks=True)
            reports.append(
                run_load(
                    copy,
                    queries,
                    embedding_model,
                    clients,
                    swap_duration,
                    data.corpus,
                    label="swap under load",
                )
            )
    if soak:
        reports.append(run_load(index_dir, queries, embedding_model, clients, soak, label="soak"))
    target = out or RESULTS / f"load-{data.name}-{embedding_model}.json"
    if target.is_file():
        # Runs left out this time keep their earlier results; the ones run now replace theirs.
        fresh = {r["label"] for r in reports}
        earlier = json.loads(target.read_text("utf-8")).get("reports", [])
        reports = [r for r in earlier if r["label"] not in fresh] + reports
        order = {"load": 0, "swap under load": 1, "soak": 2}
        reports.sort(key=lambda r: order.get(r["label"], 3))
    markdown = to_markdown(reports)
    write_results(target, {"benchmark": "load", "reports": reports}, markdown)
    typer.echo(markdown)


@bench_app.command("build")
def bench_build(
    source: Annotated[Path, typer.Argument(help="Folder or corpus.jsonl to build")],
    embedding_model: ModelOpt = DEFAULT_EMBEDDING_MODEL,
    chunk_size: Annotated[int, typer.Option(min=50)] = 800,
    out: Annotated[
        Path | None, typer.Option("--out", help="JSON file (a .md table is written beside it)")
    ] = None,
) -> None:
    """Seconds and documents/s per build stage, and the index size on disk (built in a temporary folder)."""
    offline()
    from hybridrag.benchmarks.build_cost import run_build, to_markdown
    from hybridrag.benchmarks.common import RESULTS, write_results

    if not source.exists():
        raise typer.BadParameter(f"{source} does not exist", param_hint="SOURCE")
    report = run_build(source, None if embedding_model == "none" else embedding_model, chunk_size)
    markdown = to_markdown(report)
    name = source.parent.name if source.is_file() else source.name
    target = out or RESULTS / f"build-{name}-{embedding_model.replace('/', '_')}.json"
    write_results(target, report, markdown)
    typer.echo(markdown)


@bench_app.command("documents")
def bench_documents(
    dataset: Annotated[Path, typer.Option("--dataset", help="BEIR-layout folder whose abstracts are added")],
    split: Annotated[str, typer.Option(help="qrels split whose queries are searched")] = "test",
    embedding_model: ModelOpt = DEFAULT_EMBEDDING_MODEL,
    searches: Annotated[int, typer.Option(min=10, help="Searches alone and during writes")] = 100,
    out: Annotated[
        Path | None, typer.Option("--out", help="JSON file (a .md table is written beside it)")
    ] = None,
) -> None:
    """Documents per second through the documents API (1, 10, 100 per request) and search latency while
    writes run, against search alone, in one service."""
    offline()
    from hybridrag.benchmarks.common import RESULTS, write_results
    from hybridrag.benchmarks.documents import run_documents, to_markdown

    if not (dataset / "corpus.jsonl").is_file():
        raise typer.BadParameter(f"{dataset} has no corpus.jsonl", param_hint="--dataset")
    report = run_documents(dataset, split, embedding_model, searches=searches)
    markdown = to_markdown(report)
    target = out or RESULTS / f"documents-{dataset.name}-{embedding_model.replace('/', '_')}.json"
    write_results(target, report, markdown)
    typer.echo(markdown)


@bench_app.command("entities")
def bench_entities(
    dataset: Annotated[
        Path, typer.Option("--dataset", help="A CoNLL (BIO) file or a JSON-lines file of typed spans")
    ],
    casings: Annotated[
        str, typer.Option(help="Comma-separated copies of the text: original, lower, upper")
    ] = "original,lower,upper",
    limit: Annotated[
        int | None, typer.Option(min=1, help="Only the first N sentences (after --offset)")
    ] = None,
    offset: Annotated[
        int,
        typer.Option(
            min=0, help="Skip the first N sentences (the Japanese tagger was fitted on the first 2,000)"
        ),
    ] = 0,
    rules_only: Annotated[
        bool,
        typer.Option("--rules-only", help="Name entities by the rules alone (no typer, no taggers)"),
    ] = False,
    out: Annotated[
        Path | None, typer.Option("--out", help="JSON file (a .md table is written beside it)")
    ] = None,
) -> None:
    """Untyped and typed F1 of the index's entity extraction, overall and per type, per casing."""
    from hybridrag.benchmarks.common import RESULTS, write_results
    from hybridrag.benchmarks.entities import CASINGS, run_entities, to_markdown

    if not dataset.is_file():
        raise typer.BadParameter(f"{dataset} is not a file", param_hint="--dataset")
    names = [c.strip() for c in casings.split(",") if c.strip()]
    bad = [c for c in names if c not in CASINGS]
    if bad or not names:
        raise typer.BadParameter(f"use {', '.join(CASINGS)}", param_hint="--casings")
    report = run_entities(dataset, names, limit, rules_only, offset)
    markdown = to_markdown(report)
    target = out or RESULTS / f"entities-{dataset.stem}.json"
    write_results(target, report, markdown)
    typer.echo(markdown)


@bench_app.command("graph")
def bench_graph(
    dataset: Annotated[
        Path, typer.Option("--dataset", help="BEIR-layout folder: its queries, and its corpus indexed")
    ],
    split: Annotated[str, typer.Option(help="qrels split whose queries are used")] = "test",
    synthetic_chunks: Annotated[
        int, typer.Option(min=0, help="Also measure the synthetic corpus of this many chunks (0: skip)")
    ] = 100_000,
    max_queries: Annotated[int, typer.Option(min=1, help="Queries per index")] = 200,
    embedding_model: ModelOpt = DEFAULT_EMBEDDING_MODEL,
    out: Annotated[
        Path | None, typer.Option("--out", help="JSON file (a .md table is written beside it)")
    ] = None,
) -> None:
    """Graph size, load time, build stage and the graph stage of a search (seed / walk / total), in process."""
    offline()
    from hybridrag.benchmarks.common import write_results
    from hybridrag.benchmarks.graph_cost import run_graph_cost, to_markdown

    _data, queries, indexes, target = _queries_and_indexes(
        dataset, split, max_queries, embedding_model, synthetic_chunks, out, "graph-cost"
    )
    report = run_graph_cost(indexes, queries, embedding_model)
    markdown = to_markdown(report)
    write_results(target, report, markdown)
    typer.echo(markdown)


@bench_app.command("profile")
def bench_profile(
    dataset: Annotated[
        Path, typer.Option("--dataset", help="BEIR-layout folder: its queries, and its corpus indexed")
    ],
    split: Annotated[str, typer.Option(help="qrels split whose queries are used")] = "test",
    synthetic_chunks: Annotated[
        int, typer.Option(min=0, help="Also profile the synthetic corpus of this many chunks (0: skip)")
    ] = 100_000,
    max_queries: Annotated[int, typer.Option(min=1, help="Queries per index")] = 200,
    embedding_model: ModelOpt = DEFAULT_EMBEDDING_MODEL,
    out: Annotated[
        Path | None, typer.Option("--out", help="JSON file (a .md table is written beside it)")
    ] = None,
) -> None:
    """Where a hybrid search's milliseconds go: classify, embed, each retriever, fusion, response."""
    offline()
    from hybridrag.benchmarks.common import write_results
    from hybridrag.benchmarks.profile import run_profile, to_markdown

    _data, queries, indexes, target = _queries_and_indexes(
        dataset, split, max_queries, embedding_model, synthetic_chunks, out, "profile"
    )
    report = run_profile(indexes, queries, embedding_model)
    markdown = to_markdown(report)
    write_results(target, report, markdown)
    typer.echo(markdown)


@bench_app.command("vectors")
def bench_vectors(
    dataset: Annotated[
        Path, typer.Option("--dataset", help="BEIR-layout folder: its queries, and its corpus indexed")
    ],
    split: Annotated[str, typer.Option(help="qrels split whose queries are used")] = "test",
    synthetic_chunks: Annotated[
        int, typer.Option(min=0, help="Also the synthetic corpus of this many chunks (0: skip)")
    ] = 100_000,
    max_queries: Annotated[int, typer.Option(min=1, help="Queries per index")] = 300,
    embedding_model: ModelOpt = DEFAULT_EMBEDDING_MODEL,
    out: Annotated[
        Path | None, typer.Option("--out", help="JSON file (a .md table is written beside it)")
    ] = None,
) -> None:
    """In-memory vector search, exact vs two-stage (projected scan + exact rescoring): recall, milliseconds."""
    offline()
    from hybridrag.benchmarks.common import write_results
    from hybridrag.benchmarks.vector_search import run_vector_search, to_markdown

    data, queries, indexes, target = _queries_and_indexes(
        dataset, split, max_queries, embedding_model, synthetic_chunks, out, "vectors"
    )
    report = run_vector_search(indexes, queries, embedding_model, dataset=data)
    markdown = to_markdown(report)
    write_results(target, report, markdown)
    typer.echo(markdown)


@bench_app.command("scale")
def bench_scale(
    dataset: Annotated[
        Path,
        typer.Option("--dataset", help="BEIR-layout folder: its corpus is the base of the synthetic ones"),
    ],
    chunks: Annotated[
        str, typer.Option("--chunks", help="Comma-separated corpus sizes in chunks, e.g. 1000,20000,100000")
    ] = "1000,20000,100000",
    split: Annotated[str, typer.Option(help="qrels split whose queries are sent")] = "test",
    searches: Annotated[int, typer.Option(min=4, help="Searches per size (a quarter per strategy)")] = 1000,
    embedding_model: ModelOpt = DEFAULT_EMBEDDING_MODEL,
    out: Annotated[
        Path | None, typer.Option("--out", help="JSON file (.md table and .png plot beside it)")
    ] = None,
) -> None:
    """Memory (anonymous / file-backed), load time, p50/p95 per strategy and vector recall@10 against N."""
    offline()
    from hybridrag.benchmarks.common import RESULTS, cached_index, load_beir, write_results
    from hybridrag.benchmarks.scale import plot, run_scale, to_markdown
    from hybridrag.indexing.builds.build import BuildConfig

    try:
        sizes = sorted({int(x) for x in chunks.split(",") if x.strip()})
    except ValueError:
        raise typer.BadParameter(f"not a list of integers: {chunks!r}", param_hint="--chunks") from None
    if not sizes or sizes[0] < 1:
        raise typer.BadParameter("sizes must be positive integers", param_hint="--chunks")
    data = load_beir(dataset, split)
    queries = [data.queries[q][:1000] for q in sorted(data.queries)]
    base, _ = cached_index(data, BuildConfig(embedding_model=embedding_model))
    target = out or RESULTS / f"scale-{data.name}-{embedding_model}.json"

    def index_for(n: int) -> tuple[Path, dict[str, Any] | None]:
        index_dir = synthetic_index(data.name, base, n, embedding_model, target)
        # The build report is written beside the results when the index is built (a cached one: the last).
        for folder in (target.parent, RESULTS):
            report = folder / f"build-synthetic-{n}.json"
            if report.is_file():
                return index_dir, json.loads(report.read_text("utf-8"))
        return index_dir, None

    report = run_scale(sizes, index_for, queries, embedding_model, searches)
    markdown = to_markdown(report)
    write_results(target, report, markdown)
    plot(report, target.with_suffix(".png"))
    typer.echo(markdown)


@bench_app.command("swap")
def bench_swap(
    dataset: Annotated[
        Path,
        typer.Option("--dataset", help="BEIR-layout folder: its corpus is the base of the synthetic one"),
    ],
    chunks: Annotated[
        int, typer.Option("--chunks", min=1, help="Size of the synthetic index in chunks")
    ] = 1_000_000,
    split: Annotated[str, typer.Option(help="qrels split whose queries are sent")] = "test",
    clients: Annotated[int, typer.Option(min=1, help="Concurrent clients")] = 4,
    second_version: Annotated[
        str,
        typer.Option(
            "--second-version",
            help="copy: a full copy published outside the service; documents: a document added through the API",
        ),
    ] = "copy",
    embedding_model: ModelOpt = DEFAULT_EMBEDDING_MODEL,
    out: Annotated[Path | None, typer.Option("--out", help="JSON file (.md table beside it)")] = None,
) -> None:
    """A hot swap between two versions of an N-chunk index under load: zero failed requests."""
    offline()
    from hybridrag.benchmarks.common import RESULTS, cached_index, load_beir, write_results
    from hybridrag.benchmarks.swap import SECOND_VERSIONS, run_swap, to_markdown
    from hybridrag.indexing.builds.build import BuildConfig

    if second_version not in SECOND_VERSIONS:
        raise typer.BadParameter(f"one of {', '.join(SECOND_VERSIONS)}", param_hint="--second-version")
    data = load_beir(dataset, split)
    queries = [data.queries[q][:1000] for q in sorted(data.queries)]
    base, _ = cached_index(data, BuildConfig(embedding_model=embedding_model))
    target = out or RESULTS / f"swap-{data.name}-{chunks}-{second_version}-{embedding_model}.json"
    index_dir = synthetic_index(data.name, base, chunks, embedding_model, target)
    report = run_swap(index_dir, queries, embedding_model, clients, second_version)
    markdown = to_markdown(report)
    write_results(target, report, markdown)
    typer.echo(markdown)


@bench_app.command("extract")
def bench_extract(
    source: Annotated[Path, typer.Option("--source", help="A folder of PDFs (e.g. ../shared/data/pdf)")],
    repeats: Annotated[int, typer.Option(min=1, help="Passes; the median is reported")] = 3,
    out: Annotated[
        Path | None, typer.Option("--out", help="Result JSON (a .md is written beside it)")
    ] = None,
) -> None:
    """PDF text extraction, pypdf (used by the build) against pypdfium2: pages/s and text quality."""
    from hybridrag.benchmarks.common import RESULTS, write_results
    from hybridrag.benchmarks.extraction import run_extraction, to_markdown

    if not source.is_dir():
        raise typer.BadParameter(f"{source} is not a folder", param_hint="--source")
    report = run_extraction(source, repeats)
    markdown = to_markdown(report)
    write_results(out or RESULTS / "extraction-pdf.json", report, markdown)
    typer.echo(markdown)


@bench_app.command("encoders")
def bench_encoders(
    dataset: Annotated[
        list[Path], typer.Option("--dataset", help="BEIR folders to take texts from (repeat)")
    ],
    models: Annotated[str, typer.Option(help="Comma-separated embedding models")] = "e5-multilingual,minilm",
    queries: Annotated[int, typer.Option(min=1)] = 100,
    passages: Annotated[int, typer.Option(min=1)] = 256,
    out: Annotated[
        Path | None, typer.Option("--out", help="Result JSON (a .md is written beside it)")
    ] = None,
) -> None:
    """Query latency and passage throughput, torch against the ONNX export, with cosine agreement."""
    offline()
    from hybridrag.benchmarks.common import RESULTS, write_results
    from hybridrag.benchmarks.encoders import run_encoders, to_markdown

    for folder in dataset:
        if not (folder / "corpus.jsonl").is_file() or not (folder / "queries.jsonl").is_file():
            raise typer.BadParameter(f"{folder} is not a BEIR folder", param_hint="--dataset")
    report = run_encoders(dataset, [m.strip() for m in models.split(",") if m.strip()], queries, passages)
    markdown = to_markdown(report)
    write_results(out or RESULTS / "encoders.json", report, markdown)
    typer.echo(markdown)


@bench_app.command("scaleout")
def bench_scaleout(
    data: Annotated[Path, typer.Argument(help="A BEIR dataset folder (corpus.jsonl, queries.jsonl, qrels/)")],
    split: Annotated[str, typer.Option(help="Which qrels file picks the queries")] = "train",
    docs: Annotated[
        int, typer.Option(min=1, help="Corpus size (documents the queries judge are always kept)")
    ] = 500,
    queries: Annotated[int, typer.Option(min=1)] = 50,
    clients: Annotated[int, typer.Option(min=1, help="Client threads per replica during the rebuild")] = 1,
    rebuild_docs: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="Documents of the rebuild under load (default: the same corpus; fewer: a shorter rebuild)",
        ),
    ] = None,
    pause: Annotated[
        float, typer.Option(min=0, help="Seconds each client waits between requests (0: saturate)")
    ] = 0.25,
    settle: Annotated[
        float, typer.Option(min=0, help="Seconds of load before the rebuild and after the switch")
    ] = 5,
    compare_only: Annotated[
        bool,
        typer.Option(
            "--compare-only", help="Only the two builds and their comparison (no replicas, rebuild or kill)"
        ),
    ] = False,
    ray_write_rows: Annotated[
        int, typer.Option(min=1, help="Rows per vector-table fragment an actor writes to the bucket")
    ] = 4096,
    embedding_model: ModelOpt = "minilm",
    out: Annotated[
        Path | None, typer.Option("--out", help="JSON file (a .md table is written beside it)")
    ] = None,
) -> None:
    """Ray build (head + 2 workers) to an S3-protocol bucket vs a local build, and two replicas following it
    through a rebuild under load. Runs itself in a network namespace with loopback alone (root)."""
    import signal
    import sys
    import tempfile

    offline()
    from hybridrag.benchmarks.common import RESULTS, write_results
    from hybridrag.benchmarks.scaleout import private_network, reexec_in_namespace, run_scaleout, to_markdown

    if not data.is_dir():
        raise typer.BadParameter(f"{data} is not a folder", param_hint="DATA")
    if not private_network():
        try:
            code = reexec_in_namespace([sys.executable, "-m", "hybridrag.cli", *sys.argv[1:]])
        except RuntimeError as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(2) from None
        raise typer.Exit(code)
    # A SIGTERM (a timeout) must still stop the Ray nodes and the replicas this run started.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    with tempfile.TemporaryDirectory(prefix="hybridrag-scaleout-") as work:
        report = run_scaleout(
            data,
            split,
            Path(work),
            embedding_model,
            docs,
            queries,
            clients,
            pause,
            settle_s=settle,
            rebuild_docs=rebuild_docs,
            compare_only=compare_only,
            write_rows=ray_write_rows,
        )
    markdown = to_markdown(report)
    write_results(out or RESULTS / f"scaleout-{data.name}.json", report, markdown)
    typer.echo(markdown)
