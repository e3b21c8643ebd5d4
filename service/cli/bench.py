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


#: The build report of a cached synthetic index, kept beside it (`synthetic_index`, `synthetic_build`).
BUILD_REPORT = "build-report.json"


def synthetic_index(name: str, base_index: Path, chunks: int, embedding_model: str, target: Path) -> Path:
    """The synthetic corpus of `chunks` chunks built from `base_index` (cached; built in a child process,
    its build report written beside `target` and beside the index), as an index directory."""
    from hybridrag.benchmarks.common import CACHE, regraph_if_older, write_results
    from hybridrag.benchmarks.synthetic import build_synthetic
    from hybridrag.benchmarks.synthetic import to_markdown as build_markdown
    from hybridrag.indexing.builds.shards import Aside

    synthetic_dir = CACHE / f"synthetic-{name}-{embedding_model}-{chunks}"
    if not (synthetic_dir / "index" / "current").exists():
        # Built in a child process: what a build leaves in its process' heap (~12 GB after 3M chunks) would
        # otherwise stay resident through what the caller measures next (benchmarks/docs/scale.md, "3M chunks
        # built and served").
        with Aside(build_synthetic, base_index, chunks, synthetic_dir, embedding_model) as child:
            built = child.result()
        write_results(target.with_name(f"build-synthetic-{chunks}.json"), built, build_markdown(built))
        (synthetic_dir / BUILD_REPORT).write_text(json.dumps(built, indent=2) + "\n", encoding="utf-8")
    else:
        regraph_if_older(synthetic_dir / "index")
    return synthetic_dir / "index"


def synthetic_build(index_dir: Path) -> dict[str, Any] | None:
    """The build report of the synthetic index `index_dir` (`synthetic_index`'s), None when it has none
    (built before the report was kept beside it): a report of another build of that size is not its."""
    path = index_dir.parent / BUILD_REPORT
    return json.loads(path.read_text("utf-8")) if path.is_file() else None


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
    queries = data.query_texts(max_queries)
    index_dir, _ = cached_index(data, BuildConfig(embedding_model=embedding_model))
    indexes = [(data.name, index_dir)]
    target = target or RESULTS / f"{stem}-{data.name}-{embedding_model}.json"
    if synthetic_chunks:
        synthetic = synthetic_index(data.name, index_dir, synthetic_chunks, embedding_model, target)
        indexes.append((f"synthetic {synthetic_chunks // 1000}k", synthetic))
    return data, queries, indexes, target


#: The quality benchmark's options, each said once.
_QUALITY_HELP = {
    "strategies": "Comma-separated systems; '+' combines strategies (keyword+semantic); '@rrf' or "
    "'@score-rrf' picks the fusion (hybrid@rrf)",
    "casing": "Run on a copy with corpus and queries lower- or upper-cased (lower, upper; comma-separated "
    "for several reports), to see what depends on letter case; original: as written",
    "titles": "--no-titles: a copy with every document's title emptied (with --casing, text with no titles "
    "and no capitals)",
    "rerank": "Cross-encoder (local folder or HF cache) for a hybrid+rerank row; default: the service's",
    "encoders": "Further query encoders (comma-separated, e.g. onnx) for semantic[...] and hybrid[...] rows",
    "build_encoders": "Further passage encoders (comma-separated, e.g. onnx): a second index built with each, "
    "searched as semantic[built:...] and hybrid[built:...] rows",
    "build_encoder": "The passage encoder of the index itself: torch, or onnx (faster)",
}
DatasetOpt = Annotated[
    Path, typer.Option("--dataset", help="BEIR-layout folder (corpus.jsonl, queries.jsonl, qrels/)")
]
OutOpt = Annotated[Path | None, typer.Option("--out", help="JSON file (a .md table is written beside it)")]
# The options the speed and cost benchmarks share (a dev set's queries over its index and synthetic ones).
IndexedDatasetOpt = Annotated[
    Path, typer.Option("--dataset", help="BEIR-layout folder: its queries, and its corpus indexed")
]
QuerySplitOpt = Annotated[str, typer.Option(help="qrels split whose queries are used")]
SyntheticOpt = Annotated[
    int, typer.Option(min=0, help="Also the synthetic corpus of this many chunks (0: skip)")
]


@bench_app.command("quality")
def bench_quality(
    dataset: DatasetOpt,
    split: Annotated[str, typer.Option("--split", help="qrels/<split>.tsv")] = "test",
    strategies: Annotated[
        str, typer.Option(help=_QUALITY_HELP["strategies"])
    ] = "keyword,semantic,graph,hybrid,hybrid@rrf,keyword+semantic",
    embedding_model: ModelOpt = DEFAULT_EMBEDDING_MODEL,
    chunk_size: Annotated[int, typer.Option(min=50)] = 800,
    casing: Annotated[str, typer.Option(help=_QUALITY_HELP["casing"])] = "original",
    titles: Annotated[bool, typer.Option("--titles/--no-titles", help=_QUALITY_HELP["titles"])] = True,
    max_queries: Annotated[int | None, typer.Option(min=1, help="Only the first N queries (by id)")] = None,
    baseline: Annotated[
        bool, typer.Option("--baseline/--no-baseline", help="Run the bm25s reference")
    ] = True,
    rerank_model: Annotated[str | None, typer.Option(help=_QUALITY_HELP["rerank"])] = None,
    encoders: Annotated[str, typer.Option(help=_QUALITY_HELP["encoders"])] = "",
    build_encoders: Annotated[str, typer.Option(help=_QUALITY_HELP["build_encoders"])] = "",
    build_encoder: Annotated[str, typer.Option(help=_QUALITY_HELP["build_encoder"])] = "torch",
    out: OutOpt = None,
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
        source = dataset if one == "original" and titles else recased(dataset, one, titles=titles)
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
            build_encoder=build_encoder,
        )
        markdown = to_markdown(report)
        target = out if out is not None and len(casings) == 1 else None
        target = target or RESULTS / f"quality-{source.name}-{embedding_model.replace('/', '_')}.json"
        write_results(target, report, markdown)
        typer.echo(markdown)
        typer.echo(f"written: {target} and {target.with_suffix('.md')}", err=True)


@bench_app.command("relevance")
def bench_relevance(
    sets: Annotated[
        list[str],
        typer.Option(
            "--set",
            help="A dev set as PATH:SPLIT or PATH:SPLIT:CASING (lower, upper), repeated: each set's queries on "
            "its own index and on the others' (off topic)",
        ),
    ],
    embedding_model: ModelOpt = DEFAULT_EMBEDDING_MODEL,
    fit: Annotated[
        bool,
        typer.Option(
            "--fit/--no-fit",
            help="Fit the model on these sets and write it into the package (relevance_model.json), with a "
            "leave-one-set-out check; else measure the shipped model",
        ),
    ] = False,
    random_queries: Annotated[int, typer.Option(min=0, help="Strings of random words per index")] = 200,
    out: OutOpt = None,
) -> None:
    """Does `minRelevance` drop off-topic searches and keep answers? Recall@10 with the default cut against
    none, off-topic searches left empty, calibration (ECE, reliability) per dev set."""
    offline()
    import dataclasses

    from hybridrag.benchmarks import relevance as rel
    from hybridrag.benchmarks.common import CACHE, RESULTS, recased, write_results
    from hybridrag.pipeline.relevance import MODEL_FILE

    parsed: list[tuple[str, Path, str]] = []
    for spec in sets:
        path, _, rest = spec.partition(":")
        split, _, casing = rest.partition(":")
        folder = Path(path)
        if not (folder / "qrels" / f"{split or 'test'}.tsv").is_file():
            raise typer.BadParameter(f"{spec}: no qrels/{split or 'test'}.tsv", param_hint="--set")
        if casing and casing not in ("lower", "upper"):
            raise typer.BadParameter(f"{spec}: casing must be lower or upper", param_hint="--set")
        source = recased(folder, casing) if casing else folder
        parsed.append((source.name, source, split or "test"))
    searches = rel.collect_all(parsed, embedding_model, random_queries)
    if fit:
        model = rel.fit(searches)
        model["data"] = [f"{name} ({split})" for name, _p, split in parsed]
        rel.model_file(model, embedding_model, MODEL_FILE)
    else:
        shipped = json.loads(MODEL_FILE.read_text("utf-8"))
        if embedding_model not in shipped["models"]:
            raise typer.BadParameter(
                f"no fitted model for {embedding_model}: run with --fit", param_hint="--embedding-model"
            )
        model = {"decay": shipped["decay"], "kinds": shipped["models"][embedding_model]}
    report = rel.report(searches, model, embedding_model, loo=fit)
    report["searches"] = len(searches)
    markdown = rel.to_markdown(report)
    target = out or RESULTS / f"relevance-{embedding_model.replace('/', '_')}.json"
    write_results(target, report, markdown)
    # The searches' evidence, for refitting without searching again (beside the cached indexes).
    (CACHE / f"relevance-{embedding_model.replace('/', '_')}.searches.jsonl").write_text(
        "".join(json.dumps(dataclasses.asdict(s)) + "\n" for s in searches), "utf-8"
    )
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
    out: OutOpt = None,
) -> None:
    """Untyped and typed F1 of the index's entity extraction, overall and per type, per casing."""
    from hybridrag.benchmarks.common import CASINGS, RESULTS, write_results
    from hybridrag.benchmarks.entities import run_entities, to_markdown

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
    dataset: IndexedDatasetOpt,
    split: QuerySplitOpt = "test",
    synthetic_chunks: SyntheticOpt = 100_000,
    max_queries: Annotated[int, typer.Option(min=1, help="Queries per index")] = 200,
    embedding_model: ModelOpt = DEFAULT_EMBEDDING_MODEL,
    out: OutOpt = None,
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


# The other bench commands live in their own modules and register on `bench_app` when imported (after it
# exists: they import it from here).
from hybridrag.cli import bench_builds, bench_speed  # noqa: E402, F401
