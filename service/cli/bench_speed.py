"""`hybridrag bench` commands that measure speed and size: latency, load, profile, vectors, scale, swap."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from hybridrag.cli.bench import (
    IndexedDatasetOpt,
    OutOpt,
    QuerySplitOpt,
    SyntheticOpt,
    _queries_and_indexes,
    bench_app,
    synthetic_build,
    synthetic_index,
)
from hybridrag.cli.commands import ModelOpt, offline
from hybridrag.indexing.models.embedders import DEFAULT_EMBEDDING_MODEL


def _sizes(text: str, option: str) -> list[int]:
    """A comma-separated list of positive sizes, ascending and without repeats; a clear error naming `option`."""
    try:
        sizes = sorted({int(x) for x in text.split(",") if x.strip()})
    except ValueError:
        raise typer.BadParameter(f"not a list of integers: {text!r}", param_hint=option) from None
    if not sizes or sizes[0] < 1:
        raise typer.BadParameter("sizes must be positive integers", param_hint=option)
    return sizes


@bench_app.command("latency")
def bench_latency(
    dataset: IndexedDatasetOpt,
    split: Annotated[str, typer.Option(help="qrels split whose queries are sent")] = "test",
    synthetic_chunks: SyntheticOpt = 100_000,
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


@bench_app.command("profile")
def bench_profile(
    dataset: IndexedDatasetOpt,
    split: QuerySplitOpt = "test",
    synthetic_chunks: SyntheticOpt = 100_000,
    max_queries: Annotated[int, typer.Option(min=1, help="Queries per index")] = 200,
    embedding_model: ModelOpt = DEFAULT_EMBEDDING_MODEL,
    out: OutOpt = None,
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
    dataset: IndexedDatasetOpt,
    split: QuerySplitOpt = "test",
    synthetic_chunks: SyntheticOpt = 100_000,
    max_queries: Annotated[int, typer.Option(min=1, help="Queries per index")] = 300,
    embedding_model: ModelOpt = DEFAULT_EMBEDDING_MODEL,
    out: OutOpt = None,
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

    sizes = _sizes(chunks, "--chunks")
    data = load_beir(dataset, split)
    queries = data.query_texts()
    base, _ = cached_index(data, BuildConfig(embedding_model=embedding_model))
    target = out or RESULTS / f"scale-{data.name}-{embedding_model}.json"

    def index_for(n: int) -> tuple[Path, dict[str, Any] | None]:
        index_dir = synthetic_index(data.name, base, n, embedding_model, target)
        return index_dir, synthetic_build(index_dir)

    report = run_scale(sizes, index_for, queries, embedding_model, searches)
    markdown = to_markdown(report)
    write_results(target, report, markdown)
    plot(report, target.with_suffix(".png"))
    typer.echo(markdown)


@bench_app.command("vector-scale")
def bench_vector_scale(
    dataset: Annotated[
        Path,
        typer.Option(
            "--dataset", help="BEIR-layout folder: its index's vectors are the base of the synthetic ones"
        ),
    ],
    rows: Annotated[
        str, typer.Option("--rows", help="Comma-separated numbers of vectors, e.g. 300000,1000000,3000000")
    ] = "300000,1000000,3000000",
    split: Annotated[str, typer.Option(help="qrels split whose queries are searched")] = "train",
    max_queries: Annotated[int, typer.Option(min=1, help="Queries searched at each size")] = 200,
    embedding_model: ModelOpt = DEFAULT_EMBEDDING_MODEL,
    workdir: Annotated[
        Path | None, typer.Option(help="Where the serving files are written (needs ~3 KB a row)")
    ] = None,
    out: OutOpt = None,
) -> None:
    """The served vector search at N rows, flat codes against the inverted file: ms, recall@10, filters."""
    offline()
    import numpy as np

    from hybridrag.benchmarks.common import RESULTS, cached_index, load_beir, write_results
    from hybridrag.benchmarks.vector_scale import run_vector_scale, to_markdown
    from hybridrag.indexing.builds.build import BuildConfig
    from hybridrag.indexing.models.embedders import load_embedder
    from hybridrag.indexing.stores.quantized import IVF_MIN_ROWS, open_rows
    from hybridrag.indexing.stores.versions import current_version

    sizes = _sizes(rows, "--rows")
    data = load_beir(dataset, split)
    queries = data.query_texts(max_queries)
    base, _ = cached_index(data, BuildConfig(embedding_model=embedding_model))
    version = current_version(base)
    base_vectors = open_rows(version.path / "vectors", int(version.manifest["embedding"]["dim"])).all()
    query_vectors = np.asarray(load_embedder(embedding_model).embed_queries(queries), dtype=np.float32)
    report = run_vector_scale(base_vectors, sizes, query_vectors, IVF_MIN_ROWS, workdir)
    target = out or RESULTS / f"vector-scale-{data.name}-{embedding_model}.json"
    markdown = to_markdown(report)
    write_results(target, report, markdown)
    typer.echo(markdown)


@bench_app.command("keyword-scale")
def bench_keyword_scale(
    dataset: Annotated[
        Path,
        typer.Option("--dataset", help="BEIR-layout folder: its corpus is the base of the synthetic one"),
    ],
    chunks: Annotated[
        str, typer.Option("--chunks", help="Comma-separated numbers of chunks, e.g. 300000,1000000,3000000")
    ] = "300000,1000000,3000000",
    split: Annotated[str, typer.Option(help="qrels split whose queries are searched")] = "train",
    max_queries: Annotated[int, typer.Option(min=1, help="Queries searched at each size")] = 300,
    workdir: Annotated[
        Path | None, typer.Option(help="Where the keyword indexes are written (~0.2 KB a chunk)")
    ] = None,
    engines: Annotated[
        str,
        typer.Option(
            help="tantivy (the service's), or tantivy,lance: Lance's inverted index over the same copies "
            "beside it (~0.7 KB a chunk more)"
        ),
    ] = "tantivy",
    out: OutOpt = None,
) -> None:
    """The keyword search at N synthetic chunks: a search, a count and a bounded count, in ms."""
    offline()
    from hybridrag.benchmarks.common import RESULTS, load_beir, write_results
    from hybridrag.benchmarks.keyword_scale import check_engines, run_keyword_scale, to_markdown

    sizes = _sizes(chunks, "--chunks")
    names = tuple(e.strip() for e in engines.split(",") if e.strip())
    try:
        check_engines(names)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--engines") from None
    data = load_beir(dataset, split)
    queries = data.query_texts(max_queries)
    report = run_keyword_scale(data.corpus, queries, sizes, workdir, names, judged=data)
    target = out or RESULTS / f"keyword-scale-{data.name}.json"
    markdown = to_markdown(report)
    write_results(target, report, markdown)
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
    queries = data.query_texts()
    base, _ = cached_index(data, BuildConfig(embedding_model=embedding_model))
    target = out or RESULTS / f"swap-{data.name}-{chunks}-{second_version}-{embedding_model}.json"
    index_dir = synthetic_index(data.name, base, chunks, embedding_model, target)
    report = run_swap(index_dir, queries, embedding_model, clients, second_version)
    markdown = to_markdown(report)
    write_results(target, report, markdown)
    typer.echo(markdown)
