"""`hybridrag bench` commands that measure building and writing: build, documents, extract, encoders, scaleout."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from hybridrag.cli.bench import OutOpt, bench_app, synthetic_index
from hybridrag.cli.commands import ModelOpt, NameTypingOpt, offline
from hybridrag.indexing.models.embedders import DEFAULT_EMBEDDING_MODEL


@bench_app.command("build")
def bench_build(
    source: Annotated[Path, typer.Argument(help="Folder or corpus.jsonl to build")],
    embedding_model: ModelOpt = DEFAULT_EMBEDDING_MODEL,
    chunk_size: Annotated[int, typer.Option(min=50)] = 800,
    out: OutOpt = None,
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
    chunks: Annotated[
        int,
        typer.Option(
            min=0,
            help="Write into the synthetic corpus of this many chunks (built from --dataset; 0: the sample)",
        ),
    ] = 0,
    batches: Annotated[int, typer.Option(min=1, help="Batches of each size (1, 10, 100 documents)")] = 20,
    searches: Annotated[int, typer.Option(min=10, help="Searches idle and during writes")] = 100,
    out: OutOpt = None,
) -> None:
    """How soon a write through the documents API is searchable (batches of 1, 10, 100: p50 / p95 from the
    request to `succeeded` and found), documents/s, the background merge, and search latency while writes
    and merges run against search idle, in one service."""
    offline()
    from hybridrag.benchmarks.common import RESULTS, cached_index, load_beir, write_results
    from hybridrag.benchmarks.documents import run_documents, to_markdown
    from hybridrag.indexing.builds.build import BuildConfig

    if not (dataset / "corpus.jsonl").is_file():
        raise typer.BadParameter(f"{dataset} has no corpus.jsonl", param_hint="--dataset")
    suffix = f"-{chunks}" if chunks else ""
    target = out or RESULTS / f"documents-{dataset.name}-{embedding_model.replace('/', '_')}{suffix}.json"
    index = None
    if chunks:
        data = load_beir(dataset, split)
        base, _ = cached_index(data, BuildConfig(embedding_model=embedding_model))
        index = synthetic_index(data.name, base, chunks, embedding_model, target)
    report = run_documents(dataset, split, embedding_model, batches=batches, searches=searches, index=index)
    markdown = to_markdown(report)
    write_results(target, report, markdown)
    typer.echo(markdown)


@bench_app.command("deferred")
def bench_deferred(
    dataset: Annotated[Path, typer.Option("--dataset", help="BEIR-layout folder")],
    split: Annotated[str, typer.Option(help="qrels split whose queries are searched")] = "test",
    embedding_model: ModelOpt = DEFAULT_EMBEDDING_MODEL,
    encoder: Annotated[str, typer.Option(help="Passage encoder of the build: torch or onnx")] = "torch",
    share: Annotated[
        float,
        typer.Option(min=0.01, max=0.9, help="Share of the judged and of the other documents held back"),
    ] = 0.2,
    batch: Annotated[int, typer.Option(min=1, help="Held-back documents a write")] = 100,
    out: OutOpt = None,
) -> None:
    """Quality before a merge: documents written after the build with the graph left behind (linked to it,
    and not), against the merged graph."""
    offline()
    from hybridrag.benchmarks.common import RESULTS, write_results
    from hybridrag.benchmarks.deferred import run_deferred, to_markdown

    if not (dataset / "corpus.jsonl").is_file():
        raise typer.BadParameter(f"{dataset} has no corpus.jsonl", param_hint="--dataset")
    report = run_deferred(dataset, split, embedding_model, encoder, share, batch)
    markdown = to_markdown(report)
    target = out or RESULTS / f"deferred-{dataset.name}-{embedding_model.replace('/', '_')}.json"
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
    name_typing: NameTypingOpt = "tagger",
    out: OutOpt = None,
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
            name_typing=name_typing,
        )
    markdown = to_markdown(report)
    write_results(out or RESULTS / f"scaleout-{data.name}.json", report, markdown)
    typer.echo(markdown)
