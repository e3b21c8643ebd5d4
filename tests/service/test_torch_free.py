"""Serving without torch: the `server-onnx` extra builds and serves an index with the ONNX export of the
embedding model, in a virtual environment that has neither torch nor sentence-transformers.

The models come from `hybridrag models install` run beforehand where torch is installed (scripts/setup.sh
does it for this checkout); the torch-free environment only points HYBRIDRAG_MODELS_DIR at them. Also
measures what leaving torch out saves (install size, cold start, resident memory): with
HYBRIDRAG_WRITE_RESULTS=1 the figures go to benchmarks/results/torch-free.json.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from conftest import SAMPLE, serve_process, shared_path, venv_with

ROOT = Path(__file__).resolve().parents[2]
MODELS = Path(os.environ.get("HYBRIDRAG_MODELS_DIR", Path.home() / ".cache" / "hybridrag" / "models"))
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not (MODELS / "onnx" / "e5-multilingual" / "model.onnx").is_file(),
        reason=f"no ONNX export of e5-multilingual under {MODELS}: run `hybridrag models install e5-multilingual`",
    ),
]


def _site_packages_mb(venv: Path) -> float:
    total = sum(p.stat().st_size for p in (venv / "lib").rglob("*") if p.is_file() and not p.is_symlink())
    return round(total / 1e6, 1)


@pytest.fixture(scope="module")
def torch_free(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A virtual environment with `pip install '.[server-onnx]'` (the project as a wheel) and nothing else."""
    return venv_with("server-onnx", tmp_path_factory.mktemp("torch-free"))


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HYBRIDRAG_")}
    return {**env, "HYBRIDRAG_MODELS_DIR": str(MODELS), "HF_HUB_OFFLINE": "1", **extra}


@pytest.fixture(scope="module")
def onnx_index(torch_free: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("onnx-index") / "index"
    done = subprocess.run(
        [
            str(torch_free / "bin" / "hybridrag"),
            "index",
            "build",
            str(SAMPLE),
            "--out",
            str(out),
            "--encoder",
            "onnx",
            "--json",
        ],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return out


def _serve(venv: Path, index: Path) -> tuple[subprocess.Popen[bytes], str, float]:
    command = [str(venv / "bin" / "hybridrag"), "serve", "--index-dir", str(index)]
    proc, url, seconds = serve_process(command, _env(HYBRIDRAG_RELOAD_INTERVAL_S="0"))
    return proc, url, seconds


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 1024, 1)
    return 0.0


@pytest.fixture()
def stop() -> Iterator[list[subprocess.Popen[bytes]]]:
    procs: list[subprocess.Popen[bytes]] = []
    yield procs
    for proc in procs:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)


def test_the_environment_has_no_torch(torch_free: Path) -> None:
    for module in ("torch", "sentence_transformers", "transformers"):
        done = subprocess.run(
            [str(torch_free / "bin" / "python"), "-c", f"import {module}"], capture_output=True
        )
        assert done.returncode != 0, f"{module} is installed in the torch-free environment"


def test_serves_and_searches_an_onnx_built_index(
    torch_free: Path, onnx_index: Path, stop: list[subprocess.Popen[bytes]]
) -> None:
    manifest = json.loads((onnx_index / "current" / "manifest.json").read_text("utf-8"))
    assert manifest["embedding"]["encoder"].startswith("onnx")
    proc, url, cold = _serve(torch_free, onnx_index)
    stop.append(proc)
    ready = httpx.get(f"{url}/readyz").json()
    assert "onnx" in ready["components"]["embedder"]["detail"]
    # No torch, so no cross-encoder: an optional component that says what to install.
    reranker = ready["components"]["reranker"]
    assert not reranker["ready"] and not reranker["required"] and "hybridrag[server]" in reranker["detail"]
    answer = httpx.post(
        f"{url}/v1/search", json={"text": "Who founded Sony?", "options": {"limit": 3}}
    ).json()
    assert "Sony" in answer["results"][0]["metadata"]["title"]
    assert answer["results"][0]["relevance"]["semantic"] > 0
    ja = httpx.post(f"{url}/v1/search", json={"text": "トヨタ自動車を設立したのは誰ですか"}).json()
    assert any("トヨタ" in (r["metadata"].get("title") or "") for r in ja["results"][:3])
    rerank = httpx.post(
        f"{url}/v1/search", json={"text": "Sony", "options": {"rerankEnabled": True, "limit": 2}}
    ).json()
    assert any(n["stage"] == "rerank" and n["status"] == "skipped" for n in rerank["notes"])
    for _ in range(20):
        httpx.post(f"{url}/v1/search", json={"text": "Who founded Sony?"})
    figures: dict[str, Any] = {
        "torchFree": {
            "sitePackagesMB": _site_packages_mb(torch_free),
            "coldStartSeconds": round(cold, 2),
            "rssMB": _rss_mb(proc.pid),
        }
    }
    full = ROOT / ".venv"
    if (full / "bin" / "hybridrag").is_file() and os.environ.get("HYBRIDRAG_WRITE_RESULTS"):
        full_proc, full_url, full_cold = _serve(full, onnx_index)
        stop.append(full_proc)
        for _ in range(20):
            httpx.post(f"{full_url}/v1/search", json={"text": "Who founded Sony?"})
        figures["full"] = {
            "sitePackagesMB": _site_packages_mb(full),
            "coldStartSeconds": round(full_cold, 2),
            "rssMB": _rss_mb(full_proc.pid),
        }
        target = ROOT / "benchmarks" / "results" / "torch-free.json"
        target.write_text(json.dumps({"benchmark": "torch-free", **figures}, indent=2) + "\n", "utf-8")
    print(json.dumps(figures))


def test_torch_only_steps_say_what_to_install(torch_free: Path, tmp_path: Path) -> None:
    hybridrag = str(torch_free / "bin" / "hybridrag")
    done = subprocess.run(
        [hybridrag, "models", "install", "e5-multilingual"], capture_output=True, text=True, env=_env()
    )
    assert done.returncode == 2 and "hybridrag[index]" in done.stderr
    done = subprocess.run(
        [hybridrag, "index", "build", str(SAMPLE), "--out", str(tmp_path / "i"), "--encoder", "torch"],
        capture_output=True,
        text=True,
        env=_env(),
    )
    assert done.returncode == 2 and "hybridrag[index]" in done.stderr
    assert not (tmp_path / "i" / "current").exists()


_EXTRACT = """
import json, sys
from hybridrag.indexing.analysis.analyzers import Analyzer
from hybridrag.indexing.analysis.entities import EntityExtractor
extractor = EntityExtractor(Analyzer())
texts = json.load(sys.stdin)
found = [[[m.key, m.surface, m.type, m.sentence_start] for m in ms] for ms in extractor.extract_many(texts)]
print(json.dumps({"version": extractor.version, "found": found}))
"""


def _extracted_there(torch_free: Path, texts: list[str]) -> dict[str, Any]:
    """What the default extractor of the torch-free environment finds in `texts` (`_EXTRACT`), and its version."""
    done = subprocess.run(
        [str(torch_free / "bin" / "python"), "-c", _EXTRACT],
        input=json.dumps(texts),
        capture_output=True,
        text=True,
        env=_env(),
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def _dev_sentences() -> list[str]:
    """WikiNEuRal dev's first sentences as written, lower- and upper-cased, where ../shared has them; else a
    few."""
    conll = shared_path("data", "ner", "en-wikineural-dev.conll")
    sentences: list[str] = []
    if conll.is_file():
        words: list[str] = []
        for line in conll.read_text("utf-8").splitlines():
            parts = line.split("\t")
            if len(parts) >= 3:
                words.append(parts[1])
            elif words:
                sentences.append(" ".join(words))
                words = []
            if len(sentences) >= 150:
                break
    sentences = sentences or [
        "Sakichi Toyoda founded Toyoda Automatic Loom Works in Kariya in 1926.",
        "Christine Lagarde said the European Central Bank would raise rates, speaking in Frankfurt.",
        # The typer alone reads this name as an organisation; with the tagger it is a person.
        "Ada Lovelace, born Augusta Ada Byron in London in 1815, was the daughter of the poet Lord Byron.",
    ]
    # A structured abstract's labels: the tagger's vocabulary tells them from names (`_label_end`).
    sentences.append("RESULTS 20 of the 29 cases in Helsinki were positive. MAIN OUTCOME MEASURES The rate.")
    return sentences + [s.lower() for s in sentences] + [s.upper() for s in sentences]


def test_english_names_are_typed_as_in_the_full_environment(torch_free: Path) -> None:
    """The torch-free environment runs the English name taggers (their ONNX exports, made by `models
    install`) and finds and types names exactly as the full environment does, where the same exports run
    beside torch: with letter case (one tagger types the names capitalisation finds) and without (the
    case-less one finds them); same extraction version, same names, types and places."""
    from hybridrag.indexing.analysis.analyzers import Analyzer
    from hybridrag.indexing.analysis.entities import EntityExtractor
    from hybridrag.indexing.analysis.name_tagger import (
        CASELESS_FOLDER,
        NameTagger,
        export_matches,
        onnx_folder,
    )

    texts = _dev_sentences()
    theirs = _extracted_there(torch_free, texts)
    cased_export, caseless_export = onnx_folder(), onnx_folder(CASELESS_FOLDER)
    assert export_matches(cased_export), "run `hybridrag models install e5-multilingual`"
    assert export_matches(caseless_export, CASELESS_FOLDER), "run `hybridrag models install e5-multilingual`"
    # The full environment runs the same exports (torch is there, but the exports are what it runs).
    full = EntityExtractor(
        Analyzer(),
        tagger=NameTagger(onnx=cased_export),
        caseless=NameTagger(CASELESS_FOLDER, onnx=caseless_export),
    )
    ours = [[[m.key, m.surface, m.type, m.sentence_start] for m in ms] for ms in full.extract_many(texts)]
    assert theirs["version"] == full.version and "+tagger-" in theirs["version"]
    assert theirs["version"].count("+tagger-") == 2 and "-caseless+" in theirs["version"]
    caseless = ours[len(texts) // 3 :]
    tagged = sum(1 for ms in caseless if any(m[2] in ("person", "organization") for m in ms))
    assert tagged >= max(2, len(caseless) // 10)  # the tagger ran: case-less people and organisations found
    # Without the tagger the typer alone types the cased names: some differ, so the tagger typed them here.
    alone = EntityExtractor(Analyzer(), english_tagger=False).extract_many(texts[: len(texts) // 3])
    assert [[m.type for m in ms] for ms in alone] != [[m[2] for m in ms] for ms in ours[: len(texts) // 3]]
    assert theirs["found"] == ours


def _japanese_sentences() -> list[str]:
    """The Japanese named-entity file's held-back sentences (from number 2,001), where ../shared has them;
    else a few."""
    path = shared_path("data", "ner", "ja-stockmark-dev.jsonl")
    if path.is_file():
        lines = path.read_text("utf-8").splitlines()[2000:2150]
        return [json.loads(line)["text"] for line in lines if line.strip()]
    return [
        "豊田佐吉は1926年に愛知県刈谷町で豊田自動織機製作所を設立した。",
        "ソニーの井深大と盛田昭夫は東京通信工業を創業した。",
        "王子製紙釧路工場で働いた。",
    ]


def test_japanese_names_are_typed_as_in_the_full_environment(torch_free: Path) -> None:
    """The torch-free environment runs the Japanese piece tagger's ONNX export beside the CRF and finds and
    types Japanese names exactly as the full environment does with the same export: same extraction
    version (the piece tagger's digest in it), same names, types and places."""
    from hybridrag.indexing.analysis.analyzers import Analyzer
    from hybridrag.indexing.analysis.entities import RULES_REVISION, EntityExtractor
    from hybridrag.indexing.analysis.ja_tagger import JapaneseTagger
    from hybridrag.indexing.analysis.name_tagger import JA_FOLDER, NameTagger, export_matches, onnx_folder

    texts = _japanese_sentences()
    theirs = _extracted_there(torch_free, texts)
    exported = onnx_folder(JA_FOLDER)
    assert export_matches(exported, JA_FOLDER), "run `hybridrag models install e5-multilingual`"
    reader = NameTagger(JA_FOLDER, onnx=exported)
    full = EntityExtractor(Analyzer(), japanese=JapaneseTagger(reader=reader))
    ours = [[[m.key, m.surface, m.type, m.sentence_start] for m in ms] for ms in full.extract_many(texts)]
    assert theirs["version"] == full.version and f"-{reader.version}" in theirs["version"]
    assert f"rules-{RULES_REVISION}" in theirs["version"]
    assert sum(1 for ms in ours if ms) >= len(texts) // 2  # names were found
    assert theirs["found"] == ours
