"""Writes that cost what they write: table segments, vector serving segments and tombstones (#48)."""

from __future__ import annotations

import hashlib
import os
import random
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from conftest import jsonl_corpus

from hybridrag.indexing.builds.build import IndexBuilder
from hybridrag.indexing.builds.config import BuildConfig
from hybridrag.indexing.documents.sources import Document
from hybridrag.indexing.stores import segments, vector_segments, versions
from hybridrag.indexing.stores.filters import ChunkFilters
from hybridrag.indexing.stores.keys import KeyIndex
from hybridrag.indexing.stores.mapped import ChunkTable, DocumentTable, keys_path, write_keys
from hybridrag.indexing.stores.quantized import FILES
from hybridrag.indexing.stores.tables import (
    CHUNK_SCHEMA,
    CHUNKS,
    DOCUMENTS,
    chunk_row,
    dead_rows,
    deleted_path,
    read_version_table,
    table_files,
    table_segments,
    write_table,
)
from hybridrag.indexing.stores.tables import Chunk as ChunkRow
from hybridrag.indexing.stores.vectors import VECTOR_TYPE, VectorIndex, VectorIndexWriter


def _digests(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def _clone(src: Path, dst: Path) -> Path:
    """What an update's staging copy is: every file hard-linked."""
    shutil.copytree(src, dst, copy_function=os.link)
    return dst


def test_key_index_appended_and_kept_equal_a_fresh_build() -> None:
    rng = random.Random(3)
    ids = [f"d{rng.randrange(40)}" for _ in range(200)]  # repeated ids, as the doc_id lookup has
    more = [f"d{rng.randrange(60)}" for _ in range(37)]
    grown, fresh = KeyIndex.build(ids).appended(more), KeyIndex.build(ids + more)
    assert np.array_equal(grown.hashes, fresh.hashes) and np.array_equal(grown.rows, fresh.rows)
    keep = np.array([rng.random() < 0.7 for _ in ids])
    kept = KeyIndex.build(ids).kept(keep)
    fresh = KeyIndex.build([i for i, k in zip(ids, keep, strict=True) if k])
    assert np.array_equal(kept.hashes, fresh.hashes) and np.array_equal(kept.rows, fresh.rows)


def _chunk(doc: str, i: int) -> ChunkRow:
    return ChunkRow(f"c-{doc}-{i}", doc, "f", i, 0, 5, f"text {doc} {i}", "en", ["person"] if i % 2 else [])


@pytest.mark.parametrize("dead_share", [0.1, 1.0, 0.0])
def test_table_segments_follow_a_random_sequence_of_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, dead_share: float
) -> None:
    """Appends, removals (tombstones; past `dead_share` deleted, a rewrite) and folds give the table (and
    lookups) a whole rewrite would, never change a file of the version they were cloned from, and a merge's
    compaction gives what a fresh write of the live rows gives."""
    monkeypatch.setattr(segments, "MAX_FILES", 4)
    monkeypatch.setattr(segments, "FOLD_TO", 2)
    monkeypatch.setattr(segments, "DEAD_SHARE", dead_share)
    rng = random.Random(7)
    expected = [_chunk(f"d{d}", i) for d in range(5) for i in range(rng.randint(1, 3))]
    folder = tmp_path / "v0"
    folder.mkdir()
    write_table(folder / CHUNKS, [chunk_row(c) for c in expected], CHUNK_SCHEMA, "uncompressed")
    write_keys(folder / CHUNKS, [c.chunk_id for c in expected], "chunk_id")
    write_keys(folder / CHUNKS, [c.doc_id for c in expected], "doc_id")
    next_doc, folded, tombstoned = 5, False, False
    for step in range(1, 25):
        before = _digests(folder)
        staging = _clone(folder, tmp_path / f"v{step}")
        held = sorted({c.doc_id for c in expected})
        gone = rng.sample(held, rng.randint(1, 2)) if step % 5 == 0 else []
        added = [_chunk(f"d{next_doc + j}", i) for j in range(rng.randint(0, 2)) for i in range(2)]
        next_doc += 3
        table = pa.Table.from_pylist([chunk_row(c) for c in added], CHUNK_SCHEMA)
        segments.update_table(staging, CHUNKS, table, f"s{step:03d}", "doc_id", gone)
        assert _digests(folder) == before
        expected = [c for c in expected if c.doc_id not in gone] + added
        got = read_version_table(staging, CHUNKS)
        assert got.to_pylist() == [chunk_row(c) for c in expected]
        assert len(table_files(staging, CHUNKS)) <= segments.MAX_FILES
        folded = folded or len(table_segments(staging, CHUNKS)) < len(table_segments(folder, CHUNKS))
        tombstoned = tombstoned or deleted_path(staging, CHUNKS).is_file()
        mapped = ChunkTable(staging / CHUNKS)
        assert len(mapped) == len(expected) and list(mapped) == [c.chunk_id for c in expected]
        for c in expected:
            row = mapped.row(c.chunk_id)
            assert row is not None and mapped.id_at(row) == c.chunk_id and row not in mapped.dead
        for doc in {c.doc_id for c in expected}:
            assert [c.chunk_id for c in mapped.of_doc(doc)] == [
                c.chunk_id for c in expected if c.doc_id == doc
            ]
        for doc in gone:
            assert mapped.of_doc(doc) == [] and mapped.count_of_doc(doc) == 0
            assert all(mapped.row(c) is None for c in (f"c-{doc}-0", f"c-{doc}-1"))
        folder = staging
    assert folded
    # Tombstones kept unless every removal rewrites (DEAD_SHARE 0); a rewrite at every removal otherwise.
    assert tombstoned == (dead_share > 0)
    merged = _clone(folder, tmp_path / "merge")
    segments.compact(merged, CHUNKS)
    assert table_files(merged, CHUNKS) == [merged / CHUNKS] and not deleted_path(merged, CHUNKS).is_file()
    assert read_version_table(merged, CHUNKS).to_pylist() == [chunk_row(c) for c in expected]
    for column in ("chunk_id", "doc_id"):
        fresh = KeyIndex.build([getattr(c, column) for c in expected])
        got = KeyIndex.load(keys_path(merged / CHUNKS, column))
        assert np.array_equal(got.hashes, fresh.hashes) and np.array_equal(got.rows, fresh.rows)


def _vector_rows(ids: list[str], rng: np.random.Generator, dim: int) -> tuple[dict, np.ndarray]:
    rows = {
        "chunk_id": ids,
        "doc_id": [i.split(":")[0] for i in ids],
        "file_id": [f"f{len(i) % 3}" for i in ids],
        "date": [None] * len(ids),
        "entity_types": [[] for _ in ids],
    }
    return rows, rng.standard_normal((len(ids), dim)).astype(np.float32)


def _stored(vectors: np.ndarray) -> np.ndarray:
    """Vectors as a new table holds them (`VECTOR_TYPE`), widened back to float32."""
    return vectors.astype(VECTOR_TYPE.to_pandas_dtype()).astype(np.float32)


def test_vector_segments_and_tombstones_search_as_the_rewritten_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Adds as segments, deletes as tombstones, segment folds and rewrites: every search (filtered or not)
    returns what an exact search over the live rows returns, and the version cloned from is unchanged."""
    monkeypatch.setattr(vector_segments, "SEGMENTS_MAX", 3)
    monkeypatch.setattr(vector_segments, "SEGMENT_ROWS_FLOOR", 40)
    dim, rng, pick = 16, np.random.default_rng(5), random.Random(5)
    live: dict[str, np.ndarray] = {}
    folder = tmp_path / "v0" / "vectors"
    folder.mkdir(parents=True)
    writer = VectorIndexWriter(folder, dim, create=True)
    ids = [f"d{d}:{i}" for d in range(12) for i in range(2)]
    rows, vectors = _vector_rows(ids, rng, dim)
    writer.add(rows, vectors)
    writer.finish()
    live.update(zip(ids, _stored(vectors), strict=True))
    seen = {"segments": 0, "tombstones": 0, "rewrites": 0}
    next_doc = 12
    for step in range(1, 16):
        before = _digests(folder)
        staging = _clone(folder.parent, tmp_path / f"v{step}") / "vectors"
        writer = VectorIndexWriter(staging, dim, create=False)
        docs = sorted({i.split(":")[0] for i in live})
        gone = pick.sample(docs, pick.randint(0, 2))
        # A replaced document: the same chunk ids come back with new vectors.
        replaced = pick.sample([d for d in docs if d not in gone], 1) if step % 3 == 0 else []
        removed = gone + replaced
        writer.delete_documents(removed, [i for i in live if i.split(":")[0] in removed])
        new_ids = [f"d{next_doc + j}:{i}" for j in range(pick.randint(1, 3)) for i in range(2)]
        new_ids += [i for i in live if i.split(":")[0] in replaced]
        next_doc += 3
        for i in [i for i in live if i.split(":")[0] in removed]:
            live.pop(i)
        rows, vectors = _vector_rows(new_ids, rng, dim)
        writer.add(rows, vectors)
        writer.finish(segment=f"s{step:03d}")
        live.update(zip(new_ids, _stored(vectors), strict=True))
        assert _digests(folder) == before
        names = vector_segments.segment_names(staging)
        seen["segments"] += bool(names)
        seen["tombstones"] += (staging / vector_segments.DELETED).is_file()
        seen["rewrites"] += not names
        assert len(names) <= vector_segments.SEGMENTS_MAX
        index = VectorIndex(staging, dim)
        assert index._quantized is not None and index._quantized.rows == len(live)
        live_ids = sorted(live)
        matrix = np.stack([live[i] / np.linalg.norm(live[i]) for i in live_ids])
        for q in rng.standard_normal((4, dim)).astype(np.float32):
            unit = q / np.linalg.norm(q)
            sims = matrix @ unit
            for filters in (None, ChunkFilters(file_ids=["f1"])):
                allowed = [k for k, i in enumerate(live_ids) if filters is None or f"f{len(i) % 3}" == "f1"]
                want = sorted(allowed, key=lambda k: -sims[k])[:5]
                hits, eligible = index.search(q, 5, filters)
                assert eligible == len(allowed)
                assert [h.chunk_id for h in hits] == [live_ids[k] for k in want]
                assert np.allclose([h.similarity for h in hits], sims[want], atol=1e-5)
        for i in pick.sample(live_ids, 3):
            stored = index.vectors([i])[i]
            assert np.allclose(stored, live[i] / np.linalg.norm(live[i]), atol=1e-6)
        folder = staging
    assert all(seen.values()), seen  # every path was taken
    rewritten = tmp_path / "rewritten"
    _clone(folder.parent, rewritten)
    vector_segments.rewrite(
        rewritten / "vectors", VectorIndexWriter(rewritten / "vectors", dim, False)._table, dim
    )
    assert not vector_segments.segment_names(rewritten / "vectors")
    assert all((rewritten / "vectors" / name).is_file() for name in FILES)
    assert VectorIndex(rewritten / "vectors", dim)._quantized.rows == len(live)  # type: ignore[union-attr]


MINILM = BuildConfig(embedding_model="minilm")


def test_updates_write_segments_and_serve_what_a_full_build_serves(
    tmp_path: Path,
    embedder,  # type: ignore[no-untyped-def]
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Documents added, replaced and deleted over several updates: the version's tables and serving files
    are base + segments + tombstones, and its documents, chunks and semantic results are a full build's."""
    monkeypatch.setattr(segments, "DEAD_SHARE", 1.0)  # tombstones kept however many (a small corpus)
    rng = random.Random(11)
    words = "harbour tidal estuary granite basalt lichen glacier moraine fjord delta".split()

    def doc(i: int, extra: str = "") -> Document:
        text = " ".join(rng.choice(words) for _ in range(25)) + f" note {i}." + (f" {extra}" if extra else "")
        return Document(doc_id=f"n{i}", file_id="api", title=f"Note {i}", text=text)

    held = {f"n{i}": doc(i) for i in range(6)}
    index_dir = tmp_path / "idx"
    rows = [{"_id": d.doc_id, "title": d.title, "text": d.text, "fileId": "api"} for d in held.values()]
    IndexBuilder(index_dir, MINILM, embedder=embedder).build(jsonl_corpus(tmp_path / "c0", rows))
    for step in range(1, 8):
        adds = [doc(10 * step + j) for j in range(2)]
        # Replacements and deletions rewrite the tables and tombstone vectors; the last step only adds.
        replaced = (
            [doc(int(i[1:]), f"revised {step}") for i in rng.sample(sorted(held), 1)]
            if step in (1, 3, 5)
            else []
        )
        deletes = rng.sample(sorted(set(held) - {d.doc_id for d in replaced}), 1) if step in (3, 6) else []
        IndexBuilder(index_dir, MINILM, embedder=embedder).apply(adds + replaced, deletes, defer_graph=True)
        held.update({d.doc_id: d for d in adds + replaced})
        for i in deletes:
            held.pop(i)
    version = versions.current_version(index_dir)
    assert table_segments(version.path, CHUNKS) and vector_segments.segment_names(version.path / "vectors")
    assert deleted_path(version.path, CHUNKS).is_file() and deleted_path(version.path, DOCUMENTS).is_file()
    # A reader of format 2 would serve the deleted rows (3); one of format 3 would look for a graph record (4).
    assert version.manifest["formatVersion"] == versions.FORMAT_VERSION
    full_dir = tmp_path / "full"
    rows = [{"_id": d.doc_id, "title": d.title, "text": d.text, "fileId": "api"} for d in held.values()]
    IndexBuilder(full_dir, MINILM, embedder=embedder).build(jsonl_corpus(tmp_path / "final", rows))
    full = versions.current_version(full_dir)
    assert version.manifest["counts"] == full.manifest["counts"]
    for name, key in ((DOCUMENTS, "doc_id"), (CHUNKS, "chunk_id")):
        ours = sorted(read_version_table(version.path, name).to_pylist(), key=lambda r: r[key])
        theirs = sorted(read_version_table(full.path, name).to_pylist(), key=lambda r: r[key])
        for a, b in zip(ours, theirs, strict=True):
            a.pop("metadata", None), b.pop("metadata", None)  # the JSONL reader keeps `fileId` there
            assert a == b, {k: (a[k], b[k]) for k in a if a[k] != b[k]}
    docs = DocumentTable(version.path / DOCUMENTS)
    assert [d.doc_id for d in docs.page(0, 100)] == sorted(held) and len(docs) == len(held)
    assert sorted(docs) == sorted(held) and all(d in docs for d in held)
    theirs_v = VectorIndex(full.path / "vectors", 384)

    def same_semantic_results(path: Path) -> None:
        ours_v = VectorIndex(path / "vectors", 384)
        for query in ("granite glacier", "tidal harbour note 31", "revised"):
            vector = embedder.embed_queries([query])[0]
            a, _ = ours_v.search(vector, 5)
            b, _ = theirs_v.search(vector, 5)
            assert [h.chunk_id for h in a] == [h.chunk_id for h in b]
            assert np.allclose([h.similarity for h in a], [h.similarity for h in b], atol=1e-5)

    same_semantic_results(version.path)
    # The merge compacts what the writes left: one file a table, serving files without segments.
    chunks_before = read_version_table(version.path, CHUNKS)
    assert IndexBuilder(index_dir, MINILM, embedder=embedder).merge_graph() is not None
    merged = versions.current_version(index_dir)
    assert not table_segments(merged.path, CHUNKS) and not table_segments(merged.path, DOCUMENTS)
    assert (
        not deleted_path(merged.path, CHUNKS).is_file() and not deleted_path(merged.path, DOCUMENTS).is_file()
    )
    assert not vector_segments.segment_names(merged.path / "vectors")
    assert not (merged.path / "vectors" / vector_segments.DELETED).is_file()
    # Compacted: no segment or tombstone is left (1-3); its graph is its arrays alone (4).
    assert merged.manifest["formatVersion"] == versions.FORMAT_VERSION
    assert read_version_table(merged.path, CHUNKS).equals(chunks_before)
    table = ChunkTable(merged.path / CHUNKS)
    assert [table.row(i) for i in chunks_before.column("chunk_id").to_pylist()] == list(range(len(table)))
    same_semantic_results(merged.path)


def test_a_newer_format_is_refused_naming_both_formats(tmp_path: Path) -> None:
    import json

    from typer.testing import CliRunner

    from hybridrag.cli.commands import app

    index_dir = tmp_path / "idx"
    rows = [{"_id": "a", "title": "A", "text": "Granite and basalt."}]
    IndexBuilder(index_dir, BuildConfig(embedding_model=None)).build(jsonl_corpus(tmp_path / "c", rows))
    version = versions.current_version(index_dir)
    assert version.manifest["formatVersion"] == 5  # no vector table, so none of float16 (6)
    manifest = json.loads((version.path / versions.MANIFEST).read_text("utf-8"))
    (version.path / versions.MANIFEST).write_text(json.dumps({**manifest, "formatVersion": 7}), "utf-8")
    with pytest.raises(
        versions.IndexUnavailable,
        match=r"format 7, newer than this release reads \(formats 1, 2, 3, 4, 5, 6\)",
    ):
        versions.current_version(index_dir)
    result = CliRunner().invoke(app, ["index", "info", str(index_dir)])
    assert result.exit_code == 2 and "format 7, newer than" in result.output
    assert "Traceback" not in result.output


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a small tmpfs needs root")
def test_a_full_disk_fails_writes_and_merges_cleanly_and_they_resume_once_freed(
    tmp_path: Path, embedder
) -> None:  # type: ignore[no-untyped-def]
    """On a full file system a documents-API write fails with the reason, a merge fails too, the served
    version stays as it was (byte for byte, searchable) with no staging or merge copy left; freed, both work."""
    import errno
    import subprocess

    from hybridrag.pipeline.loaded_index import load_index
    from hybridrag.schemas.documents import DocumentIn
    from hybridrag.writes.writer import DocumentWriter

    disk = tmp_path / "disk"
    disk.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=48m", "tmpfs", str(disk)], check=True)
    try:
        index_dir = disk / "idx"
        rows = [
            {"_id": f"d{i}", "title": f"Note {i}", "text": f"Granite and basalt, note {i}."} for i in range(6)
        ]
        IndexBuilder(index_dir, MINILM, embedder=embedder).build(jsonl_corpus(tmp_path / "c", rows))
        writer = DocumentWriter(index_dir, merge_after_s=None, tasks_dir=tmp_path / "tasks")
        writer._embedders[("minilm", MINILM.encoder)] = embedder
        filler = disk / "filler"

        def fill() -> None:
            with open(filler, "wb") as fh:
                try:
                    while True:
                        fh.write(b"\0" * 2**20)
                        fh.flush()
                except OSError as exc:
                    assert exc.errno == errno.ENOSPC

        def write(doc_id: str) -> Any:
            task = writer.submit_documents([DocumentIn(id=doc_id, text=f"Lichen on {doc_id} moraine.")])
            assert writer.run_once() == 1
            return writer.store.get(task.task_id)

        served = versions.current_version(index_dir)
        before = _digests(served.path)
        fill()
        failed = write("n1")
        assert failed.status == "failed" and "No space left on device" in (failed.error or "")
        assert versions.current_version(index_dir).version == served.version
        assert _digests(served.path) == before
        assert not list(index_dir.glob(".staging-*"))
        loaded = load_index(index_dir, "minilm", embedder)
        assert loaded.keyword.search("granite", 3).hits
        filler.unlink()
        assert write("n1").status == "succeeded"
        written = versions.current_version(index_dir)
        assert written.version != served.version and "n1" in DocumentTable(written.path / DOCUMENTS)
        fill()
        with pytest.raises(OSError):
            IndexBuilder(index_dir, MINILM, embedder=embedder).merge_graph()
        assert versions.current_version(index_dir).version == written.version
        assert not list(index_dir.glob(".merge-*")) and not list(index_dir.glob(".staging-*"))
        filler.unlink()
        assert IndexBuilder(index_dir, MINILM, embedder=embedder).merge_graph() is not None
        assert "n1" in DocumentTable(versions.current_version(index_dir).path / DOCUMENTS)
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


def test_a_full_build_leaves_lancedb_compacted_so_a_write_links_few_files(
    tmp_path: Path,
    embedder,  # type: ignore[no-untyped-def]
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every `add` of a build appends a LanceDB fragment, manifest and transaction; a version served with
    thousands of them made each later write hard-link and fsync them all (0.46 s at 300k chunks)."""
    from hybridrag.indexing.builds import stages

    monkeypatch.setattr(stages, "EMBED_BATCH", 2)  # five adds for nine chunks
    rows = [{"_id": f"d{i}", "title": f"Doc {i}", "text": f"granite glacier note {i}."} for i in range(9)]
    index_dir = tmp_path / "idx"
    IndexBuilder(index_dir, MINILM, embedder=embedder).build(jsonl_corpus(tmp_path / "c", rows))

    def lance_files(kind: str) -> int:
        lance = versions.current_version(index_dir).path / "vectors" / "chunks.lance"
        return sum(1 for p in (lance / kind).iterdir() if p.suffix in (".lance", ".manifest"))

    assert lance_files("data") == 1 and lance_files("_versions") == 1
    assert (
        len(VectorIndexWriter(versions.current_version(index_dir).path / "vectors", 384, False)._table) == 9
    )
    new = Document(doc_id="n1", file_id="api", title="New", text="basalt fjord moraine.")
    IndexBuilder(index_dir, MINILM, embedder=embedder).apply([new], [], defer_graph=True)
    # A write adds its own fragment and LanceDB version, nothing in proportion to the base.
    assert lance_files("data") == 2 and lance_files("_versions") == 2


def test_a_graph_whose_table_gained_and_lost_rows_beyond_it_serves_filtered_searches(
    tmp_path: Path,
    embedder,  # type: ignore[no-untyped-def]
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Rows added after the graph was built and deleted again stay in the table's files (tombstones): the
    graph, built for the rows before them, must still be served as the table's own order, filters and all."""
    from fastapi.testclient import TestClient

    from hybridrag.http.app import create_app
    from hybridrag.pipeline.engine import SearchEngine
    from hybridrag.pipeline.settings import Settings

    monkeypatch.setattr(segments, "DEAD_SHARE", 1.0)
    rows = [
        {
            "_id": f"d{i}",
            "title": t,
            "text": f"{t} lies in {p}, and Ada Lovelace wrote about it.",
            "fileId": f"f{i}",
        }
        for i, (t, p) in enumerate(
            [("Granite Hill", "Aberdeen"), ("Basalt Cove", "Antrim"), ("Fjord Bay", "Bergen")]
        )
    ]
    index_dir = tmp_path / "idx"
    IndexBuilder(index_dir, MINILM, embedder=embedder).build(jsonl_corpus(tmp_path / "c", rows))
    late = [
        Document(doc_id=f"late{i}", file_id="api", title="Late", text=f"Ada Lovelace in Leeds {i}.")
        for i in range(2)
    ]
    IndexBuilder(index_dir, MINILM, embedder=embedder).apply(late, [], defer_graph=True)
    IndexBuilder(index_dir, MINILM, embedder=embedder).apply([], ["late0", "late1"], defer_graph=True)
    version = versions.current_version(index_dir)
    assert (
        len(dead_rows(version.path, CHUNKS)) == 2
        and version.manifest["formatVersion"] == versions.FORMAT_VERSION
    )
    settings = Settings(index_dir=index_dir, embedding_model="minilm", reload_interval_s=0, _env_file=None)  # type: ignore[call-arg]
    with TestClient(create_app(settings, SearchEngine(settings, embedder=embedder), wait=True)) as client:
        for filters in ({}, {"fileIds": ["f1"]}):
            body = {
                "text": "Ada Lovelace Basalt Cove",
                "options": {"strategies": ["graph"], "limit": 5},
                "filters": {"minRelevance": 0, **filters},
            }
            answer = client.post("/v1/search", json=body)
            assert answer.status_code == 200, answer.text
            ids = [r["metadata"]["docId"] for r in answer.json()["results"] if r["type"] == "chunk"]
            assert ids and not {"late0", "late1"} & set(ids)
            assert "d1" in ids and (not filters or set(ids) == {"d1"})
        assert client.get("/readyz").json()["graph"]["chunksAhead"] == 0
