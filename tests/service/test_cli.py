"""The `hybridrag` console script."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import free_port
from typer.testing import CliRunner

from hybridrag.cli.bench import app
from hybridrag.cli.commands import SAMPLE_CORPUS

runner = CliRunner()


@pytest.mark.parametrize(
    "args",
    [
        [],
        ["serve"],
        ["index"],
        ["index", "build"],
        ["index", "add"],
        ["index", "delete"],
        ["index", "merge"],
        ["index", "info"],
        ["schema", "export"],
    ],
)
def test_help(args: list[str]) -> None:
    result = runner.invoke(app, [*args, "--help"])
    assert result.exit_code == 0, result.output
    assert "Usage" in result.output


def test_build_info_delete_via_cli(tmp_path: Path) -> None:
    out = tmp_path / "idx"
    result = runner.invoke(
        app, ["index", "build", str(SAMPLE_CORPUS), "--out", str(out), "--embedding-model", "none", "--json"]
    )
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output)
    assert summary["documents"] == 12 and summary["chunks"] >= 12 and summary["skipped"] == []
    info = json.loads(runner.invoke(app, ["index", "info", str(out)]).output)
    assert info["version"] == summary["version"]
    # --disk: what each part of the version takes, in all and per chunk.
    disk = json.loads(runner.invoke(app, ["index", "info", str(out), "--disk"]).output)
    assert disk["version"] == summary["version"] and disk["chunks"] == summary["chunks"]
    parts = disk["parts"]
    assert {
        "chunks.arrow",
        "documents.arrow",
        "keyword",
        "graph/arrays/entities.arrow",
        "manifest.json",
    } <= set(parts)
    assert sum(p["bytes"] for p in parts.values()) == disk["bytes"] > 0
    version_dir = out / "versions" / summary["version"]
    assert parts["chunks.arrow"]["bytes"] == (version_dir / "chunks.arrow").stat().st_size
    assert disk["bytesPerChunk"] == round(disk["bytes"] / summary["chunks"], 1)
    sizes = [p["bytes"] for p in parts.values()]
    assert sizes == sorted(sizes, reverse=True)
    remote = runner.invoke(app, ["index", "info", "s3://bucket/prefix", "--disk"])
    assert remote.exit_code == 2 and "--disk" in remote.output
    again = runner.invoke(
        app, ["index", "build", str(SAMPLE_CORPUS), "--out", str(out), "--embedding-model", "none", "--json"]
    )
    rebuilt = json.loads(again.output)
    assert rebuilt["version"] != summary["version"] and rebuilt["chunks"] == summary["chunks"]
    bad = runner.invoke(app, ["index", "delete", "--index", str(out), "--doc-id", "missing"])
    assert bad.exit_code == 2


def test_deferred_add_and_delete_then_merge_via_cli(tmp_path: Path) -> None:
    out = tmp_path / "idx"
    build = ["index", "build", str(SAMPLE_CORPUS), "--out", str(out), "--embedding-model", "none", "--json"]
    assert runner.invoke(app, build).exit_code == 0
    nothing = runner.invoke(app, ["index", "merge", "--index", str(out), "--json"])
    assert nothing.exit_code == 0 and json.loads(nothing.output) == {"merged": False}
    extra = tmp_path / "extra"
    extra.mkdir()
    (extra / "note.md").write_text(
        "# Hedy Lamarr\n\nHedy Lamarr and George Antheil patented frequency hopping."
    )
    added = runner.invoke(app, ["index", "add", str(extra), "--index", str(out), "--defer-graph", "--json"])
    assert added.exit_code == 0, added.output
    manifest = json.loads((out / "current" / "manifest.json").read_text("utf-8"))
    assert manifest["graph"]["builtFor"] != manifest["version"]  # the graph is behind the new document
    merged = runner.invoke(app, ["index", "merge", "--index", str(out), "--json"])
    assert merged.exit_code == 0, merged.output
    summary = json.loads(merged.output)
    manifest = json.loads((out / "current" / "manifest.json").read_text("utf-8"))
    assert summary["version"] == manifest["version"] == manifest["graph"]["builtFor"]
    assert summary["documents"] == 13 and manifest["merge"]["graphOf"] == json.loads(added.output)["version"]


@pytest.mark.parametrize(
    "command",
    [["merge"], ["delete", "--doc-id", "x"], ["add", str(Path(__file__).parent)]],
    ids=["merge", "delete", "add"],
)
def test_an_update_of_a_folder_with_no_index_says_so_and_creates_nothing(
    tmp_path: Path, command: list[str]
) -> None:
    missing = tmp_path / "nothing-here"
    result = runner.invoke(app, ["index", command[0], "--index", str(missing), *command[1:]])
    assert result.exit_code == 2 and "no index at" in result.output
    assert "Traceback" not in result.output and not missing.exists()


def test_bad_options_name_the_option(tmp_path: Path) -> None:
    r = runner.invoke(
        app, ["index", "build", str(SAMPLE_CORPUS), "--out", str(tmp_path / "i"), "--chunk-overlap", "900"]
    )
    assert r.exit_code == 2 and "--chunk-overlap" in r.output
    r = runner.invoke(app, ["index", "build", str(tmp_path / "missing"), "--out", str(tmp_path / "i")])
    assert r.exit_code == 2 and "SOURCE" in r.output
    r = runner.invoke(
        app, ["index", "build", str(SAMPLE_CORPUS), "--out", str(tmp_path / "i"), "--name-typing", "crf"]
    )
    assert r.exit_code == 2 and "--name-typing" in r.output and "tagger, typer" in r.output
    assert not (tmp_path / "i").exists()


def test_schema_export(tmp_path: Path) -> None:
    target = tmp_path / "contract.json"
    assert runner.invoke(app, ["schema", "export", "--out", str(target)]).exit_code == 0
    doc = json.loads(target.read_text("utf-8"))
    assert doc["version"] == "1.0.0" and "SearchWeights" in doc["$defs"]


def test_console_script_is_installed() -> None:
    exe = Path(sys.executable).with_name("hybridrag")
    result = subprocess.run(
        [str(exe), "--help"], capture_output=True, text=True, env={**os.environ}, check=False
    )
    assert result.returncode == 0 and "serve" in result.stdout and "index" in result.stdout


@pytest.mark.slow
def test_serve_answers_real_hits_on_loopback(sample_index: Path) -> None:
    import time

    import httpx

    port = free_port()
    exe = Path(sys.executable).with_name("hybridrag")
    env = {**os.environ, "HYBRIDRAG_LOG_JSON": "true", "HYBRIDRAG_EMBEDDING_MODEL": "minilm"}
    proc = subprocess.Popen(
        [str(exe), "serve", "--index-dir", str(sample_index), "--host", "127.0.0.1", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=env,
    )
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.time() + 120
        while time.time() < deadline:
            try:
                if httpx.get(f"{base}/readyz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            time.sleep(0.5)
        r = httpx.post(
            f"{base}/v1/search", json={"text": "Who founded Sony?", "options": {"limit": 2}}, timeout=15
        )
        assert r.status_code == 200
        assert r.json()["results"][0]["metadata"]["title"] == "Sony: Masaru Ibuka and Akio Morita"
        assert r.headers["x-request-id"]
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@pytest.mark.slow
def test_serve_runs_several_workers_on_one_port(sample_index: Path) -> None:
    """`--workers 2`: two processes, each with its own engine, answer on one port (loopback only)."""
    import time

    import httpx

    port = free_port()
    exe = Path(sys.executable).with_name("hybridrag")
    env = {**os.environ, "HYBRIDRAG_EMBEDDING_MODEL": "minilm"}
    proc = subprocess.Popen(
        [str(exe), "serve", "--index-dir", str(sample_index), "--host", "127.0.0.1", "--port", str(port),
         "--workers", "2"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=env,
    )  # fmt: skip
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.time() + 180
        pids: set[int] = set()
        while time.time() < deadline and len(pids) < 2:
            try:  # new connections are spread over the workers; each reports its own process id
                with httpx.Client(timeout=5) as client:
                    r = client.get(f"{base}/readyz")
                    if r.status_code == 200:
                        pids.add(int(r.json()["pid"]))
            except (httpx.TransportError, KeyError, ValueError):
                pass
            time.sleep(0.2)
        assert len(pids) == 2 and proc.pid not in pids
        r = httpx.post(f"{base}/v1/search", json={"text": "Who founded Sony?"}, timeout=15)
        assert r.status_code == 200 and r.json()["results"]
    finally:
        proc.terminate()
        proc.wait(timeout=60)


def test_ray_engine_needs_a_running_clusters_address(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`--engine ray` never starts a cluster itself (Ray would bind every interface of the machine)."""
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    source = Path(__file__).resolve().parents[2] / "service" / "cli" / "sample_corpus"
    runner = CliRunner()
    result = runner.invoke(
        app, ["index", "build", str(source), "--out", str(tmp_path / "i"), "--engine", "ray"]
    )
    assert result.exit_code == 2 and "RAY_ADDRESS" in result.output
    result = runner.invoke(
        app, ["index", "build", str(source), "--out", str(tmp_path / "i"), "--engine", "spark"]
    )
    assert result.exit_code == 2 and "local or ray" in result.output
    assert not (tmp_path / "i").exists()


def test_build_device_cpu_and_auto_embed_alike_and_cuda_without_one_is_refused(tmp_path: Path) -> None:
    """On a machine without CUDA, `--device auto` embeds on the CPU exactly as `--device cpu` does (the
    manifest says where); `--device cuda` stops with a clear error before anything is written."""
    import numpy as np

    from hybridrag.indexing.models.embedders import cuda_available
    from hybridrag.indexing.stores.quantized import open_rows
    from hybridrag.indexing.stores.versions import current_version

    if cuda_available():
        pytest.skip("this machine has a CUDA device: the refusal cannot be shown here")
    vectors = {}
    for device in ("cpu", "auto"):
        out = tmp_path / device
        args = ["--out", str(out), "--embedding-model", "minilm", "--device", device, "--json"]
        r = runner.invoke(app, ["index", "build", str(SAMPLE_CORPUS), *args])
        assert r.exit_code == 0, r.output
        version = current_version(out)
        assert version.manifest["embedding"]["device"] == "cpu"
        vectors[device] = open_rows(version.path / "vectors", version.manifest["embedding"]["dim"]).all()
    np.testing.assert_allclose(vectors["cpu"], vectors["auto"], atol=1e-6)
    r = runner.invoke(
        app, ["index", "build", str(SAMPLE_CORPUS), "--out", str(tmp_path / "c"), "--device", "cuda"]
    )
    assert r.exit_code == 2 and "no CUDA device" in r.output
    assert not (tmp_path / "c" / "current").exists()
    r = runner.invoke(
        app, ["index", "build", str(SAMPLE_CORPUS), "--out", str(tmp_path / "t"), "--device", "tpu"]
    )
    assert r.exit_code == 2 and "--device" in r.output


def test_a_tagger_export_that_disagrees_with_torch_is_reported_not_installed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`models install` says why the name tagger's export was refused and exits 2, with nothing installed."""
    import typer

    from hybridrag.cli import service_commands
    from hybridrag.indexing.analysis import name_tagger

    def disagrees(*_args: object, **_kwargs: object) -> dict[str, object]:
        raise RuntimeError("the tagger's ONNX export tags the sample differently from torch: not installed")

    monkeypatch.setenv("HYBRIDRAG_MODELS_DIR", str(tmp_path))
    monkeypatch.setattr(name_tagger, "export_onnx", disagrees)
    with pytest.raises(typer.Exit) as stopped:
        service_commands._install_name_tagger(force=False)
    assert stopped.value.exit_code == 2
    assert "differently from torch" in capsys.readouterr().err
    assert not name_tagger.export_matches(name_tagger.onnx_folder())
