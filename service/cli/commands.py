"""The `hybridrag` commands: serve, build and update indexes, export the contract, models.

Benchmark commands live in `bench.py` and are added to the same app there."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer

from hybridrag.indexing.models.embedders import DEFAULT_EMBEDDING_MODEL, NO_EMBEDDING_MODEL

app = typer.Typer(help="hybridrag: hybrid BM25 + vector + graph search service.", no_args_is_help=True)
index_app = typer.Typer(help="Build and update indexes.", no_args_is_help=True)
schema_app = typer.Typer(help="The search contract.", no_args_is_help=True)
models_app = typer.Typer(help="Embedding models available offline.", no_args_is_help=True)
app.add_typer(index_app, name="index")
app.add_typer(schema_app, name="schema")
app.add_typer(models_app, name="models")

SAMPLE_CORPUS = Path(__file__).parent / "sample_corpus"


def offline() -> None:
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


IndexOpt = Annotated[
    str,
    typer.Option("--index", help="Index directory, or an object-storage URL (s3://bucket/prefix)"),
]
CacheOpt = Annotated[
    Path | None,
    typer.Option(
        "--cache-dir",
        help="Where a remote index is mirrored locally (default: $HYBRIDRAG_CACHE_DIR or ~/.cache/hybridrag)",
    ),
]


@contextlib.contextmanager
def _index_location(location: str, cache_dir: Path | None) -> Iterator[Path]:
    """The local folder to build or update in; for an s3:// URL its mirror, uploaded when a version was made."""
    from hybridrag.indexing.stores.remote import (
        DamagedVersion,
        RemoteIndex,
        RemoteUnavailable,
        default_cache_dir,
        is_remote,
        remote_workspace,
    )

    if not is_remote(location):
        yield Path(location)
        return
    try:
        RemoteIndex.open(location)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--index/--out") from None
    try:
        with remote_workspace(location, cache_dir or default_cache_dir()) as mirror:
            yield mirror
    except (RemoteUnavailable, DamagedVersion) as exc:  # raised only by the object store, never the build
        typer.echo(f"error: {exc}; the remote index was not changed", err=True)
        raise typer.Exit(2) from None
    typer.echo(f"remote    {location} (current moved to the new version)", err=True)


def _nothing_indexed(exc: Exception) -> NoReturn:
    """Say that nothing was indexed (and what was skipped, why), then exit non-zero; `current` is untouched."""
    typer.echo(f"error: {exc}; the index was not changed", err=True)
    for item in getattr(exc, "report").skipped[:50]:  # noqa: B009 - NothingToIndex, imported lazily
        typer.echo(f"  - {item}", err=True)
    raise typer.Exit(1)


ModelOpt = Annotated[
    str,
    typer.Option(
        "--embedding-model", help="minilm, e5-multilingual, a local sentence-transformers folder, or none"
    ),
]


#: `index build`'s longer option texts, said once.
_BUILD_HELP = {
    "synonyms": "Embed entity names and link near-identical ones in the graph (costs one embedding per entity)",
    "encoder": "How passages are embedded: auto (the model's export from `hybridrag models install` when "
    "there is one, else torch), onnx (the export, or an error) or torch",
    "engine": "Where chunks are made and embedded: local (this process) or ray (a Ray cluster; needs "
    "hybridrag[ray])",
    "address": "Address (host:port) of a running Ray cluster on a private network; default: $RAY_ADDRESS",
    "typing": "What types the English names capitalisation finds: tagger (the name tagger and the typer "
    "together; better types, a tagger pass over cased sentences, and Japanese names read by the piece tagger "
    "beside the CRF) or typer (the typer alone and the CRF alone; faster); writes keep the index's choice",
    "device": "Where passages are embedded: auto (a CUDA device when torch sees one, else the CPU), cpu or cuda "
    "(an error without one); with --engine ray, the actors ask for the cluster's GPUs, one each",
}


def _name_typing(value: str) -> str:
    from hybridrag.indexing.builds.config import NAME_TYPINGS

    if value not in NAME_TYPINGS:
        raise typer.BadParameter(f"use one of {', '.join(NAME_TYPINGS)}")
    return value


NameTypingOpt = Annotated[
    str, typer.Option("--name-typing", help=_BUILD_HELP["typing"], callback=_name_typing)
]


def _ray_passages(address: str | None, batch_size: int, out: str, device: str) -> Any:
    """The Ray passage engine on a running cluster (never one started here: Ray binds every interface)."""
    import importlib.util

    if importlib.util.find_spec("ray") is None:
        typer.echo("error: --engine ray needs Ray: pip install 'hybridrag[ray]'", err=True)
        raise typer.Exit(2)
    address = address or os.environ.get("RAY_ADDRESS")
    if not address:
        raise typer.BadParameter(
            "give the address of a running Ray cluster (or set RAY_ADDRESS)", param_hint="--address"
        )
    from hybridrag.indexing.builds.distributed import RayPassages
    from hybridrag.indexing.stores.remote import is_remote

    # To an object store the actors write the vector table there themselves.
    return RayPassages(
        address, batch_size=batch_size, store_url=out if is_remote(out) else None, device=device
    )


@index_app.command("build")
def index_build(
    source: Annotated[
        Path,
        typer.Argument(help="A folder of .md/.txt/.html/.jsonl/.pdf/.docx files, or a BEIR corpus.jsonl"),
    ],
    out: Annotated[
        str,
        typer.Option(
            "--out", help="Index directory (holds versions/ and current), or s3://bucket/prefix (see README)"
        ),
    ],
    embedding_model: ModelOpt = DEFAULT_EMBEDDING_MODEL,
    chunk_size: Annotated[int, typer.Option(min=50, help="Chunk size in characters")] = 800,
    chunk_overlap: Annotated[int, typer.Option(min=0, help="Overlap between chunks in characters")] = 120,
    progress: Annotated[
        bool | None, typer.Option("--progress/--no-progress", help="Default: on a terminal")
    ] = None,
    synonyms: Annotated[
        bool, typer.Option("--graph-synonyms/--no-graph-synonyms", help=_BUILD_HELP["synonyms"])
    ] = False,
    encoder: Annotated[str, typer.Option("--encoder", help=_BUILD_HELP["encoder"])] = "auto",
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON")] = False,
    cache_dir: CacheOpt = None,
    engine: Annotated[str, typer.Option("--engine", help=_BUILD_HELP["engine"])] = "local",
    address: Annotated[str | None, typer.Option("--address", help=_BUILD_HELP["address"])] = None,
    ray_batch_size: Annotated[
        int, typer.Option("--ray-batch-size", min=1, help="Chunks per embedding call on a Ray actor")
    ] = 64,
    device: Annotated[str, typer.Option("--device", help=_BUILD_HELP["device"])] = "auto",
    name_typing: NameTypingOpt = "tagger",
) -> None:
    """Build a new index version from SOURCE and switch `current` to it atomically."""
    offline()
    from hybridrag.indexing.builds.build import BuildConfig, IndexBuilder, NothingToIndex, tqdm_progress
    from hybridrag.indexing.models.embedders import DEVICES, ENCODERS, ModelUnavailable

    if not source.exists():
        raise typer.BadParameter(f"{source} does not exist", param_hint="SOURCE")
    if encoder not in ENCODERS:
        raise typer.BadParameter(f"use one of {', '.join(ENCODERS)}", param_hint="--encoder")
    if chunk_overlap >= chunk_size:
        raise typer.BadParameter("must be smaller than --chunk-size", param_hint="--chunk-overlap")
    if engine not in ("local", "ray"):
        raise typer.BadParameter("use local or ray", param_hint="--engine")
    if device not in DEVICES:
        raise typer.BadParameter(f"use one of {', '.join(DEVICES)}", param_hint="--device")
    passages = _ray_passages(address, ray_batch_size, out, device) if engine == "ray" else None
    config = BuildConfig(
        chunk_size=chunk_size,
        chunk_overlap=chunk_overlap,
        embedding_model=None if embedding_model == NO_EMBEDDING_MODEL else embedding_model,
        graph_synonyms=synonyms,
        encoder=encoder,
        name_typing=name_typing,
    )
    try:
        with _index_location(out, cache_dir) as local:
            # With Ray the cluster embeds the passages (on its GPUs with cuda); here only the few reports and
            # names are, wherever this machine can.
            local_device = "auto" if engine == "ray" and device == "cuda" else device
            builder = IndexBuilder(
                local, config, progress=tqdm_progress(progress), passages=passages, device=local_device
            )
            summary = builder.build(source)
    except ModelUnavailable as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    except NothingToIndex as exc:
        _nothing_indexed(exc)
    _print_summary(summary.as_dict(), as_json)


DeferGraphOpt = Annotated[
    bool,
    typer.Option(
        "--defer-graph",
        help="Keep the current graph: the documents are searchable by keyword and meaning at once and join "
        "the graph at the next `index merge` (a write then costs what it writes, not a graph rebuild)",
    ),
]


@index_app.command("add")
def index_add(
    source: Annotated[Path, typer.Argument(help="Documents to add (same formats as build)")],
    index: IndexOpt,
    as_json: Annotated[bool, typer.Option("--json")] = False,
    cache_dir: CacheOpt = None,
    defer_graph: DeferGraphOpt = False,
) -> None:
    """Add (or replace, by id) documents in a new version of the index."""
    offline()
    from hybridrag.indexing.builds.build import IndexBuilder, NothingToIndex
    from hybridrag.indexing.models.embedders import ModelUnavailable
    from hybridrag.indexing.stores.versions import IndexUnavailable

    try:
        with _index_location(index, cache_dir) as local:
            summary = IndexBuilder(local).add(source, defer_graph=defer_graph)
    except NothingToIndex as exc:
        _nothing_indexed(exc)
    except (ModelUnavailable, IndexUnavailable) as exc:
        typer.echo(f"error: {exc}; the index was not changed", err=True)
        raise typer.Exit(2) from None
    _print_summary(summary.as_dict(), as_json)


@index_app.command("delete")
def index_delete(
    index: IndexOpt,
    doc_id: Annotated[list[str], typer.Option("--doc-id", help="Document id to delete (repeatable)")],
    as_json: Annotated[bool, typer.Option("--json")] = False,
    cache_dir: CacheOpt = None,
    defer_graph: DeferGraphOpt = False,
) -> None:
    """Delete documents from every store, in a new version of the index."""
    offline()
    from hybridrag.indexing.builds.build import IndexBuilder
    from hybridrag.indexing.stores.versions import IndexUnavailable

    try:
        with _index_location(index, cache_dir) as local:
            summary = IndexBuilder(local).delete(doc_id, defer_graph=defer_graph)
    except KeyError as exc:
        typer.echo(f"error: {exc.args[0]}", err=True)
        raise typer.Exit(2) from None
    except IndexUnavailable as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    _print_summary(summary.as_dict(), as_json)


@index_app.command("merge")
def index_merge(
    index: IndexOpt,
    as_json: Annotated[bool, typer.Option("--json")] = False,
    cache_dir: CacheOpt = None,
) -> None:
    """Bring a graph that deferred writes left behind up to date (what the service's merger does once
    writes pause): a new version whose graph holds every document. Says so when there is nothing to do."""
    offline()
    from hybridrag.indexing.builds.build import IndexBuilder, tqdm_progress
    from hybridrag.indexing.stores.versions import IndexUnavailable

    try:
        with _index_location(index, cache_dir) as local:
            summary = IndexBuilder(local, progress=tqdm_progress()).merge_graph()
    except IndexUnavailable as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    if summary is None:
        if as_json:
            typer.echo(json.dumps({"merged": False}))
        else:
            typer.echo("the graph holds every document (or another merge is running): nothing to merge")
        return
    _print_summary(summary.as_dict(), as_json)


@index_app.command("regraph")
def index_regraph(
    index: IndexOpt,
    synonyms: Annotated[
        bool | None,
        typer.Option(
            "--graph-synonyms/--no-graph-synonyms", help="Turn synonym edges on or off (default: as built)"
        ),
    ] = None,
    reextract: Annotated[
        bool,
        typer.Option(
            "--reextract",
            help="Extract every chunk's entities again with this release's extractor (new entity types reach "
            "the filters); vectors are kept",
        ),
    ] = False,
    as_json: Annotated[bool, typer.Option("--json")] = False,
    cache_dir: CacheOpt = None,
) -> None:
    """Rebuild the knowledge graph from the stored entity mentions, in a new version of the index."""
    offline()
    from hybridrag.indexing.builds.build import IndexBuilder
    from hybridrag.indexing.models.embedders import ModelUnavailable
    from hybridrag.indexing.stores.versions import IndexUnavailable

    try:
        with _index_location(index, cache_dir) as local:
            summary = IndexBuilder(local).regraph(synonyms, reextract)
    except (ValueError, IndexUnavailable, ModelUnavailable) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    _print_summary(summary.as_dict(), as_json)


@index_app.command("info")
def index_info(
    index: Annotated[str, typer.Argument(help="Index directory or object-storage URL")],
    disk: Annotated[
        bool,
        typer.Option(
            "--disk",
            help="Bytes on disk per part of the current version, in all and per chunk (local indexes)",
        ),
    ] = False,
) -> None:
    """Print the manifest of the current version (or, with --disk, what each part of it takes on disk)."""
    from hybridrag.indexing.stores.remote import RemoteIndex, RemoteUnavailable, is_remote
    from hybridrag.indexing.stores.versions import IndexUnavailable, current_version, disk_report, disk_usage

    if disk and is_remote(index):
        raise typer.BadParameter("--disk reads a local index directory", param_hint="--disk")
    try:
        if is_remote(index):
            remote = RemoteIndex.open(index)
            name = remote.current()
            manifest = remote.manifest(name) if name is not None else None
            if manifest is None:
                raise IndexUnavailable(f"no index published at {index}")
        else:
            version = current_version(Path(index))
            manifest = version.manifest
            if disk:
                manifest = disk_report(manifest, disk_usage(version.path))
    except (IndexUnavailable, RemoteUnavailable, ValueError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    typer.echo(json.dumps(manifest, ensure_ascii=False, indent=2))


# `serve`, `schema` and `models` live in `service_commands` and register on the same apps when imported
# (after the apps exist: it imports them from here).
from hybridrag.cli import service_commands  # noqa: E402, F401
