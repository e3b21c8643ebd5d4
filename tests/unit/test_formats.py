"""Every index format this project has shipped still loads, serves and takes writes (#48).

The fixtures in tests/data/formats were written by the releases that introduced each format
(`make_fixtures.py` there says how): a full build (format 1), a deferred add (2: table and vector
segments) and a deferred delete (3: deleted table rows); from format 4 every version with a graph stores it as
graph arrays alone (no JSON record), from format 5 its documents table leaves their texts to the chunks,
from format 6 its vector table holds float16 values; the fixtures of these are a deferred delete's.
"""

from __future__ import annotations

import tarfile
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from hybridrag.http.app import create_app
from hybridrag.indexing.builds.build import BuildConfig, IndexBuilder
from hybridrag.indexing.documents.sources import Document
from hybridrag.indexing.stores import versions
from hybridrag.pipeline.engine import SearchEngine
from hybridrag.pipeline.settings import Settings

FIXTURES = Path(__file__).resolve().parents[1] / "data" / "formats"
GLACIER = "A glacier is a river of ice; the Aletsch Glacier in Switzerland is the longest in the Alps."
# fixture -> (format, documents held, ids that must not be found)
EXPECTED = {
    "format-1-build": (1, 12, set()),
    "format-2-add": (2, 13, set()),
    "format-3-delete": (3, 12, {"doc-03"}),
    "format-4-delete": (4, 12, {"doc-03"}),
    "format-5-delete": (5, 12, {"doc-03"}),
    "format-6-delete": (6, 12, {"doc-03"}),
}


def _unpack(name: str, tmp_path: Path) -> Path:
    with tarfile.open(FIXTURES / f"{name}.tar.gz") as tar:
        tar.extractall(tmp_path, filter="tar")
    return tmp_path / "index"


def _search(client: TestClient, text: str, strategy: str) -> list[str]:
    body = {"text": text, "options": {"strategies": [strategy], "limit": 5}, "filters": {"minRelevance": 0}}
    answer = client.post("/v1/search", json=body)
    assert answer.status_code == 200, answer.text
    return [r["metadata"]["docId"] for r in answer.json()["results"] if r["type"] == "chunk"]


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_a_shipped_format_loads_serves_and_takes_writes(name: str, tmp_path: Path, embedder: Any) -> None:
    fmt, count, gone = EXPECTED[name]
    index_dir = _unpack(name, tmp_path)
    assert versions.current_version(index_dir).manifest["formatVersion"] == fmt
    settings = Settings(index_dir=index_dir, embedding_model="minilm", reload_interval_s=0, _env_file=None)  # type: ignore[call-arg]
    engine = SearchEngine(settings, embedder=embedder)
    with TestClient(create_app(settings, engine, wait=True)) as client:
        listed = client.get("/v1/documents", params={"limit": 100}).json()
        ids = [d["id"] for d in listed["documents"]]
        assert len(ids) == count and not gone & set(ids)
        assert client.get("/v1/documents/doc-02").json()["text"] == GLACIER
        assert _search(client, "Aletsch Glacier", "keyword")[0] == "doc-02"
        assert _search(client, "the longest river of ice in the Alps", "semantic")[0] == "doc-02"
        assert "doc-02" in _search(client, "Aletsch Glacier Switzerland", "graph")
        for doc in gone:
            assert doc not in _search(client, "Sognefjord Norway deepest inlet", "hybrid")
        if fmt >= 2:
            assert _search(client, "Mount Etna Sicily volcano", "hybrid")[0] == "doc-added"
    # This release writes on it (an add and a delete, the graph deferred), then merges.
    config = BuildConfig(embedding_model="minilm")
    new = Document(
        doc_id="doc-new", file_id="api", title="Reef", text="The Great Barrier Reef lies off Queensland."
    )
    IndexBuilder(index_dir, config, embedder=embedder).apply([new], ["doc-05"], defer_graph=True)
    IndexBuilder(index_dir, config, embedder=embedder).merge_graph()
    merged = versions.current_version(index_dir)
    assert merged.manifest["counts"]["documents"] == count
    # Compacted by the merge (no segment or tombstone left); its new graph is stored as arrays alone (4),
    # its documents' texts by their chunks (5); its vector table keeps the float32 values it was made with
    # (a table from format 6 on holds float16: 6).
    assert merged.manifest["formatVersion"] == max(fmt, 5)
    assert not (merged.path / "graph" / "graph.json.gz").exists()
    with TestClient(create_app(settings, SearchEngine(settings, embedder=embedder), wait=True)) as client:
        assert _search(client, "Great Barrier Reef Queensland", "hybrid")[0] == "doc-new"
        assert client.get("/v1/documents/doc-02").json()["text"] == GLACIER
        assert client.get("/v1/documents/doc-new").json()["text"] == new.text
        assert "doc-05" not in _search(client, "Nile Delta river sea", "hybrid")
        assert "doc-new" in _search(client, "Great Barrier Reef Queensland", "graph")
