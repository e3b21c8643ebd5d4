"""Shared fixtures: one small real index (the bundled sample corpus, real models) built once per session."""

from __future__ import annotations

import os

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"

from collections.abc import Iterator
from pathlib import Path

import pytest

SAMPLE = Path(__file__).resolve().parents[1] / "service" / "sample_corpus"


@pytest.fixture(scope="session")
def embedder():  # type: ignore[no-untyped-def]
    from indexing.embedders import load_embedder

    return load_embedder("minilm")


@pytest.fixture(scope="session")
def sample_index(tmp_path_factory: pytest.TempPathFactory, embedder) -> Path:  # type: ignore[no-untyped-def]
    from indexing.build import BuildConfig, IndexBuilder

    index_dir = tmp_path_factory.mktemp("sample-index")
    IndexBuilder(index_dir, BuildConfig(embedding_model="minilm"), embedder=embedder).build(SAMPLE)
    return index_dir


@pytest.fixture(scope="session")
def client(sample_index: Path, embedder) -> Iterator:  # type: ignore[no-untyped-def]
    from fastapi.testclient import TestClient

    from service.app import create_app
    from service.engine import SearchEngine
    from service.settings import Settings

    settings = Settings(index_dir=sample_index, embedding_model="minilm", _env_file=None)  # type: ignore[call-arg]
    app = create_app(settings, SearchEngine(settings, embedder=embedder), wait=True)
    with TestClient(app) as test_client:
        yield test_client
