"""Index builds: reading sources, idempotence, add/delete, bad input, and a crash mid-build."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import jsonl_corpus

from hybridrag.indexing.builds.build import BuildConfig, IndexBuilder
from hybridrag.indexing.stores import versions
from hybridrag.indexing.stores.mapped import DocumentTable
from hybridrag.indexing.stores.tables import CHUNKS, DOCUMENTS, read_table, read_version_table
from hybridrag.indexing.stores.vectors import VectorIndex

MINILM = BuildConfig(embedding_model="minilm")


def _documents(version: Path) -> dict[str, dict[str, Any]]:
    """A version's documents as rows, each with its text (which the table may leave to the chunks)."""
    table = DocumentTable(version / DOCUMENTS)
    return {d: {**dataclasses.asdict(table[d]), "doc_id": d} for d in table}


def write_corpus(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "a.md").write_text(
        "---\ndate: 2020-05-01\n---\n# Alpha\n\nAlan Turing worked at Bletchley Park.", "utf-8"
    )
    (folder / "b.txt").write_text(
        "Marie Curie discovered radium in Paris. She won two Nobel Prizes.", "utf-8"
    )
    (folder / "c.html").write_text(
        "<html><head><title>Gamma</title><script>var x=1;</script></head><body><p>湯川秀樹は中間子を予言した。</p></body></html>",
        "utf-8",
    )
    lines = [
        json.dumps(
            {
                "_id": "j1",
                "title": "Sony",
                "text": "Masaru Ibuka and Akio Morita founded Sony.",
                "url": "https://example.org/sony",
            }
        ),
        "{not json",
        json.dumps({"_id": "j2", "title": "", "text": "   "}),
        json.dumps(
            {"_id": "j3", "text": "Toyota was founded in 1937.", "date": "1937-08-28", "fileId": "toyota"}
        ),
        json.dumps(["not", "an", "object"]),
        json.dumps({"_id": "j4", "text": "bad date", "date": "yesterday"}),
    ]
    (folder / "d.jsonl").write_text("\n".join(lines) + "\n", "utf-8")
    # Binary bytes no encoding reads as text (b"\xff\xfe..." would be UTF-16 with its byte-order mark).
    (folder / "e.md").write_bytes(b"not text \x00\x81\x8d\x8f\x90\x9d\xff\x00")
    (folder / "ignored.bin").write_bytes(b"\x00binary")  # not a format we read: passed over silently
    (folder / "bad.pdf").write_bytes(b"%PDF")  # a format we read, but damaged: reported
    return folder


@pytest.fixture()
def corpus(tmp_path: Path) -> Path:
    return write_corpus(tmp_path / "src")


def digests(folder: Path) -> dict[str, str]:
    """Every file under `folder` by its path and a hash of its bytes."""
    return {
        str(f.relative_to(folder)): hashlib.sha256(f.read_bytes()).hexdigest()
        for f in sorted(folder.rglob("*"))
        if f.is_file()
    }


def build(index_dir: Path, source: Path, embedder) -> versions.IndexVersion:  # type: ignore[no-untyped-def]
    IndexBuilder(index_dir, MINILM, embedder=embedder).build(source)
    return versions.current_version(index_dir)


def test_build_reads_every_format_and_reports_bad_input(tmp_path: Path, corpus: Path, embedder) -> None:  # type: ignore[no-untyped-def]
    summary = IndexBuilder(tmp_path / "idx", MINILM, embedder=embedder).build(corpus)
    assert summary.documents == 5  # a.md, b.txt, c.html, j1, j3
    skipped = "\n".join(summary.skipped)
    assert "d.jsonl:2: invalid JSON" in skipped
    assert "d.jsonl:3: empty document" in skipped
    assert "d.jsonl:5: a line must be a JSON object" in skipped
    assert "d.jsonl:6: invalid date 'yesterday'" in skipped
    assert "e.md: undecodable bytes" in skipped
    assert "bad.pdf: damaged or truncated PDF" in skipped
    assert len(summary.skipped) == 6
    docs = _documents(Path(summary.path))
    assert docs["j1"]["url"] == "https://example.org/sony"
    assert docs["j3"]["date"] == "1937-08-28" and docs["j3"]["file_id"] == "toyota"
    by_file = {r["file_id"]: r for r in docs.values()}
    assert by_file["a.md"]["title"] == "Alpha" and by_file["a.md"]["date"] == "2020-05-01"
    assert "date:" not in by_file["a.md"]["text"]
    assert by_file["c.html"]["title"] == "Gamma" and "var x" not in by_file["c.html"]["text"]
    assert by_file["c.html"]["language"] == "ja"
    manifest = versions.current_version(tmp_path / "idx").manifest
    assert manifest["counts"] == {"documents": 5, "chunks": summary.chunks}
    assert manifest["embedding"]["model"] == "minilm" and manifest["embedding"]["dim"] == 384
    assert manifest["analyzer"]["japanese"].startswith("sudachi")


def test_rebuild_is_idempotent(tmp_path: Path, corpus: Path, embedder) -> None:  # type: ignore[no-untyped-def]
    first = build(tmp_path / "one", corpus, embedder)
    second = build(tmp_path / "two", corpus, embedder)
    for table in (DOCUMENTS, CHUNKS):
        assert read_table(first.path / table).equals(read_table(second.path / table))
    assert first.version != second.version


def test_add_and_delete_update_every_store(tmp_path: Path, corpus: Path, embedder) -> None:  # type: ignore[no-untyped-def]
    index_dir = tmp_path / "idx"
    v1 = build(index_dir, corpus, embedder)
    served = digests(v1.path)
    extra = jsonl_corpus(
        tmp_path / "extra",
        [
            {"_id": "n1", "title": "Kyoto Protocol", "text": "The Kyoto Protocol was adopted in 1997."},
            {"_id": "j1", "title": "Sony", "text": "Sony was renamed from Tokyo Tsushin Kogyo in 1958."},
        ],
    )
    summary = IndexBuilder(index_dir, MINILM, embedder=embedder).add(extra)
    v2 = versions.current_version(index_dir)
    assert v2.manifest["parent"] == v1.version and summary.documents == 6  # n1 new, j1 replaced
    docs = _documents(v2.path)
    assert "1958" in docs["j1"]["text"]
    chunk_docs = read_version_table(v2.path, CHUNKS).column("doc_id").to_pylist()
    assert chunk_docs.count("j1") == 1 and "n1" in chunk_docs
    vectors = VectorIndex(v2.path / "vectors", 384)
    assert vectors._table.count_rows() == len(chunk_docs)
    assert vectors._table.count_rows("doc_id = 'j1'") == 1
    # The version served before the update was not modified (hard links are never written through).
    assert digests(v1.path) == served
    assert read_version_table(v1.path, DOCUMENTS).num_rows == 5
    assert VectorIndex(v1.path / "vectors", 384)._table.count_rows() < len(chunk_docs)

    served = digests(v2.path)
    IndexBuilder(index_dir, MINILM, embedder=embedder).delete(["j1", "n1"])
    assert digests(v2.path) == served
    v3 = versions.current_version(index_dir)
    assert v3.manifest["counts"]["documents"] == 4
    assert "j1" not in read_version_table(v3.path, CHUNKS).column("doc_id").to_pylist()
    assert VectorIndex(v3.path / "vectors", 384)._table.count_rows("doc_id IN ('j1', 'n1')") == 0
    with pytest.raises(KeyError, match="nope"):
        IndexBuilder(index_dir, MINILM, embedder=embedder).delete(["nope"])
    assert versions.current_version(index_dir).version == v3.version


def test_keyword_index_follows_add_and_delete(tmp_path: Path, corpus: Path, embedder) -> None:  # type: ignore[no-untyped-def]
    from hybridrag.indexing.analysis.analyzers import Analyzer
    from hybridrag.indexing.stores.keyword import KeywordIndex

    index_dir = tmp_path / "idx"
    before = build(index_dir, corpus, embedder)
    assert KeywordIndex(before.path / "keyword", Analyzer(), 0.3, True).search("Toyota", 10).total == 1
    IndexBuilder(index_dir, MINILM, embedder=embedder).delete(["j3"])
    path = versions.current_version(index_dir).path
    found = KeywordIndex(path / "keyword", Analyzer(), 0.3, True).search("Toyota", 10)
    hits, total = found.hits, found.total
    assert total == 0 and hits == []
    # The version that was serving before the delete still finds it.
    assert KeywordIndex(before.path / "keyword", Analyzer(), 0.3, True).search("Toyota", 10).total == 1


def test_failure_mid_build_leaves_previous_version_serving(
    tmp_path: Path, corpus: Path, embedder, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    index_dir = tmp_path / "idx"
    before = build(index_dir, corpus, embedder)

    def boom(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise RuntimeError("disk on fire")

    monkeypatch.setattr("hybridrag.indexing.builds.stages.VectorIndexWriter.add", boom)
    with pytest.raises(RuntimeError, match="disk on fire"):
        IndexBuilder(index_dir, MINILM, embedder=embedder).build(corpus)
    after = versions.current_version(index_dir)
    assert after.version == before.version
    assert read_version_table(after.path, CHUNKS).num_rows > 0
    assert not list(index_dir.glob(".staging-*"))


def test_killed_build_leaves_previous_version_and_a_rerun_completes(tmp_path: Path, corpus: Path) -> None:
    index_dir = tmp_path / "idx"
    cmd = [
        sys.executable,
        "-m",
        "hybridrag.cli",
        "index",
        "build",
        str(corpus),
        "--out",
        str(index_dir),
        "--embedding-model",
        "none",
        "--json",
    ]
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    subprocess.run(cmd, check=True, capture_output=True, env=env)
    before = versions.current_version(index_dir)
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    # Kill it as soon as its staging directory appears (mid-build), or when it ends.
    deadline = time.time() + 60
    while time.time() < deadline and proc.poll() is None and not list(index_dir.glob(".staging-*")):
        time.sleep(0.005)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert versions.current_version(index_dir).manifest["counts"] == before.manifest["counts"]
    subprocess.run(cmd, check=True, capture_output=True, env=env)
    assert not list(index_dir.glob(".staging-*"))
    assert versions.current_version(index_dir).manifest["counts"] == before.manifest["counts"]


def test_incomplete_version_is_refused(tmp_path: Path, corpus: Path) -> None:
    index_dir = tmp_path / "idx"
    IndexBuilder(index_dir, BuildConfig(embedding_model=None)).build(corpus)
    (versions.current_version(index_dir).path / "manifest.json").unlink()
    with pytest.raises(versions.IndexUnavailable, match="incomplete"):
        versions.current_version(index_dir)
    with pytest.raises(versions.IndexUnavailable, match="no index"):
        versions.current_version(tmp_path / "missing")


def test_old_versions_are_pruned(tmp_path: Path, corpus: Path) -> None:
    index_dir = tmp_path / "idx"
    builder = IndexBuilder(index_dir, BuildConfig(embedding_model=None))
    for _ in range(4):
        builder.build(corpus)
    names = sorted(p.name for p in (index_dir / "versions").iterdir())
    assert len(names) == versions.KEEP_VERSIONS
    assert versions.current_version(index_dir).version == names[-1]


def test_embedder_must_match_the_configured_model(tmp_path: Path, corpus: Path, embedder) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValueError, match="does not match the configured model"):
        IndexBuilder(
            tmp_path / "idx", BuildConfig(embedding_model="e5-multilingual"), embedder=embedder
        ).build(corpus)
    assert not (tmp_path / "idx" / "current").exists()


def test_name_typing_is_the_index_own_and_writes_keep_it(tmp_path: Path) -> None:
    """`name_typing` says what types the names capitalisation finds: the tagger with the typer (default) or
    the typer alone; the manifest records it with the extraction, and a write into the index keeps it
    (its mentions are typed the same way, so the extraction is not "mixed"). A bad value is refused."""
    from hybridrag.indexing.analysis.analyzers import Analyzer
    from hybridrag.indexing.analysis.entities import TAGGER_ROLE, EntityExtractor
    from hybridrag.indexing.stores.tables import MENTIONS

    text = (
        "Ada Lovelace, born Augusta Ada Byron in London in 1815, was the daughter of the poet Lord Byron and "
        "the mathematician Anne Isabella Milbanke."
    )
    source = jsonl_corpus(tmp_path / "src", [{"_id": "d1", "title": "", "text": text}])
    extra = jsonl_corpus(tmp_path / "extra", [{"_id": "d2", "title": "", "text": text + " Again."}])
    types: dict[str, dict[str, str]] = {}
    for typing in ("tagger", "typer"):
        index_dir = tmp_path / typing
        config = BuildConfig(embedding_model=None, name_typing=typing)
        IndexBuilder(index_dir, config).build(source)
        IndexBuilder(index_dir).add(extra)  # no config: the index's own
        version = versions.current_version(index_dir)
        extractor = EntityExtractor(Analyzer(), tagger_types=typing == "tagger")
        assert version.manifest["config"]["name_typing"] == typing
        assert version.manifest["graph"]["extraction"] == extractor.version
        assert (f"-{TAGGER_ROLE}+" in extractor.version) == (typing == "tagger")
        rows = read_table(version.path / MENTIONS).to_pylist()
        types[typing] = {r["surface"]: r["type"] for r in rows if r.get("surface")}
        assert types[typing] == {m.surface: m.type for m in extractor.extract(text)}
    # The two typings read this name differently (the typer alone: an organisation).
    assert types["tagger"]["Augusta Ada Byron"] == "person"
    assert types["typer"]["Augusta Ada Byron"] != "person"
    with pytest.raises(ValueError, match="name_typing"):
        BuildConfig(name_typing="crf")


def test_a_build_in_shards_side_by_side_writes_what_one_process_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, embedder: Any
) -> None:
    """A large write extracts mentions and builds the graph over shards of its chunks in child processes
    (`builds.shards`), writes its keyword index in another child and finishes its vector files on a thread
    meanwhile; its mentions, graph files and serving vectors are byte for byte one process', its keyword
    index answers as one process' (the sample corpus in both languages, cut small; batches of 4 chunks, so
    that three shards cut it)."""
    from conftest import SAMPLE

    from hybridrag.indexing.analysis.analyzers import Analyzer
    from hybridrag.indexing.builds import shards, stages
    from hybridrag.indexing.stores.keyword import KeywordIndex
    from hybridrag.indexing.stores.tables import MENTIONS

    config = BuildConfig(embedding_model="minilm", chunk_size=300, chunk_overlap=0)
    IndexBuilder(tmp_path / "one", config, embedder=embedder).build(SAMPLE)
    monkeypatch.setattr(shards, "PARALLEL_MIN_ITEMS", 1)
    monkeypatch.setattr(shards, "available_cores", lambda: 3)
    monkeypatch.setattr(stages, "EXTRACT_BATCH", 4)
    started: list[int] = []
    start_child = shards._start_child
    monkeypatch.setattr(shards, "_start_child", lambda cores=None: started.append(1) or start_child(cores))
    finished_on: list[str] = []
    finish = stages.VersionWrite._finish_vectors

    def finish_noted(self: Any, *args: Any) -> Any:
        finished_on.append(threading.current_thread().name)
        return finish(self, *args)

    monkeypatch.setattr(stages.VersionWrite, "_finish_vectors", finish_noted)
    IndexBuilder(tmp_path / "three", config, embedder=embedder).build(SAMPLE)
    one, three = (versions.current_version(tmp_path / name).path for name in ("one", "three"))
    chunks = read_version_table(one, CHUNKS).num_rows
    # two children for the mentions, one for the keyword index, two for the graph
    assert chunks > 2 * 12 and len(started) == 5
    assert finished_on and finished_on[0].startswith("vectors")
    assert (one / MENTIONS).read_bytes() == (three / MENTIONS).read_bytes()
    files = sorted(p.relative_to(one) for p in (one / "graph").rglob("*") if p.is_file())
    # (serving-pages.json names LanceDB's data files, named at random: not compared)
    files += sorted(p.relative_to(one) for p in (one / "vectors").glob("serving-*") if p.suffix != ".json")
    assert any(f.parts[0] == "vectors" for f in files)
    assert all((one / f).read_bytes() == (three / f).read_bytes() for f in files)
    indexes = [KeywordIndex(path / "keyword", Analyzer(), 0.3, True) for path in (one, three)]
    assert indexes[0].num_chunks == indexes[1].num_chunks == chunks
    for query in ("Sony Walkman", "radium", "ソニー 創業", "computer"):
        hits = [[(h.chunk_id, round(h.score, 4)) for h in k.search(query, 20).hits] for k in indexes]
        assert hits[0] and hits[0] == hits[1]


def test_a_failure_beside_the_graph_leaves_nothing_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, embedder: Any
) -> None:
    """The keyword index written in a child beside the graph: its failure is raised with what went wrong,
    the vector thread is waited for and no version is published."""
    from conftest import SAMPLE

    from hybridrag.indexing.builds import shards, stages

    config = BuildConfig(embedding_model="minilm", chunk_size=300, chunk_overlap=0)
    monkeypatch.setattr(shards, "PARALLEL_MIN_ITEMS", 1)
    monkeypatch.setattr(shards, "available_cores", lambda: 2)
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    aside = shards.Aside

    def keyword_under_a_file(fn: Any, rows: Any, mode: str, path: Path, *rest: Any) -> Any:
        return aside(fn, rows, mode, blocker / "keyword", *rest)

    monkeypatch.setattr(stages, "Aside", keyword_under_a_file)
    with pytest.raises(RuntimeError, match=r"a shard's process failed: (NotADirectoryError|FileExistsError)"):
        IndexBuilder(tmp_path / "idx", config, embedder=embedder).build(SAMPLE)
    assert versions.current_target(tmp_path / "idx") is None and not list(
        versions.published(tmp_path / "idx")
    )
    assert not list((tmp_path / "idx").glob(".staging-*"))


def test_keyword_search_counts_its_matches_only_when_asked(sample_index: Path) -> None:
    """A search that does not count returns the same hits; `count` counts what a counting search counts,
    under filters too; the retriever counts only when its total is read, and only for a list as long as
    asked."""
    from hybridrag.indexing.analysis.analyzers import Analyzer
    from hybridrag.indexing.stores.filters import ChunkFilters
    from hybridrag.indexing.stores.keyword import KeywordIndex
    from hybridrag.pipeline.retrievers import KeywordRetriever, RetrievalQuery

    index = KeywordIndex(versions.current_version(sample_index).path / "keyword", Analyzer(), 0.3, True)
    files = ChunkFilters(file_ids=["sony-en.md"])
    for text, filters in (
        ("the company was founded in Tokyo", None),
        ("company", files),
        ("zzzz qqqq", None),
    ):
        counted = index.search(text, 3, filters)
        quick = index.search(text, 3, filters, count=False)
        assert (
            quick.hits == counted.hits and quick.ceiling == counted.ceiling and quick.absent == counted.absent
        )
        assert counted.counted and quick.total == len(quick.hits)
        assert quick.counted == (not counted.hits)  # nothing of the query in the corpus: 0 is a count
        assert index.count(text, filters) == counted.total
    assert index.search("the company was founded in Tokyo", 3).total > 3  # more match than were returned

    retriever = KeywordRetriever(index)
    calls: list[int] = []

    def counting(*args: object, **kwargs: object) -> int:
        calls.append(1)
        return KeywordIndex.count(index, *args, **kwargs)  # type: ignore[arg-type]

    index.count = counting  # type: ignore[method-assign]
    many = retriever.retrieve(RetrievalQuery("the company was founded in Tokyo", ChunkFilters()), 3)
    assert len(many.candidates) == 3 and many.total == 3 and calls == []
    assert many.matched() == index.search("the company was founded in Tokyo", 3).total and calls == [1]
    few = retriever.retrieve(RetrievalQuery("Walkman", ChunkFilters()), 50)
    assert few.counter is None and few.matched() == len(few.candidates) == index.search("Walkman", 50).total


def test_total_count_reads_a_count_only_where_one_strategy_alone_answers() -> None:
    from hybridrag.pipeline.engine import _total
    from hybridrag.pipeline.fusion import FusedItem
    from hybridrag.pipeline.retrievers import Candidate, Retrieved

    def never(_at_most: int | None = None) -> int:
        raise AssertionError("counted for nothing")

    def total(kept: list[FusedItem], retrieved: dict[str, Retrieved], cut: float = 0.0) -> int:
        return _total(kept, fused, retrieved, 3, cut, k=60, weighted=False)

    asked: list[int | None] = []

    def counter(at_most: int | None) -> int:
        asked.append(at_most)
        return 500 if at_most is None else min(500, at_most)

    cands = [Candidate(f"c{i}", 1.0, 1.0) for i in range(3)]
    fused = [FusedItem(c.id, 61 / (60 + i)) for i, c in enumerate(cands, start=1)]
    assert total(fused, {"keyword": Retrieved(cands, 3, counter=counter)}) == 500 and asked == [None]
    # Under a cut at 0.5 of the first's score plain RRF passes down to rank 61 / 0.5 - 60 = 62: so many
    # are counted at most, what pages down to the end would keep.
    assert total(fused, {"keyword": Retrieved(cands, 3, counter=counter)}, cut=0.5) == 62 and asked[-1] == 62
    assert total(fused, {"semantic": Retrieved(cands, 40)}, cut=0.5) == 40
    assert total(fused[:2], {"keyword": Retrieved(cands, 3, counter=never)}) == 2  # cut
    both = {"keyword": Retrieved(cands, 3, counter=never), "semantic": Retrieved(cands, 40)}
    assert total(fused, both) == 3


def test_a_keyword_count_up_to_a_bound_reads_term_frequencies_less_deleted_chunks(tmp_path: Path) -> None:
    """`count(at_most=n)`: `n` without a pass over the matches where a term's chunks, less the deleted
    ones its frequency still counts, reach it; a count otherwise, and always under filters."""
    from hybridrag.benchmarks.keyword_scale import counting_passes
    from hybridrag.indexing.analysis.analyzers import Analyzer
    from hybridrag.indexing.stores.filters import ChunkFilters
    from hybridrag.indexing.stores.keyword import KeywordIndex, KeywordIndexWriter, KeywordRow

    path = tmp_path / "keyword"
    writer = KeywordIndexWriter(path, Analyzer(), create=True)
    writer.add(KeywordRow(f"c{i}", f"d{i}", f"f{i % 2}", "", f"alpha beta {i}", None) for i in range(50))
    writer.commit()
    writer = KeywordIndexWriter(path, Analyzer(), create=False)
    writer.delete_documents(f"d{i}" for i in range(45))
    writer.commit()
    index = KeywordIndex(path, Analyzer(), 0.3, True)
    assert index._searcher.doc_freq("tokens", "alpha") == 50  # the deleted chunks still counted there
    with counting_passes(index) as passes:
        assert index.count("alpha") == 5 and len(passes) == 1
        assert index.count("alpha", at_most=3) == 3 and len(passes) == 1  # 50 - 45 deleted >= 3: no pass
        assert index.count("alpha beta", at_most=10) == 5 and len(passes) == 2  # 50 - 45 < 10: counted
        odd = ChunkFilters(file_ids=["f1"])
        assert index.count("alpha", odd, at_most=2) == 2 and len(passes) == 3  # filtered: counted


def test_a_write_collects_garbage_less_often_and_puts_the_thresholds_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, embedder: Any
) -> None:
    """A write (and a shard child, which does nothing else) runs with `BUILD_GC_THRESHOLDS`; the process'
    own thresholds come back after it, after a failure too, and a write inside another leaves them raised
    until the outer one ends, never raised after both."""
    import gc

    from conftest import SAMPLE

    from hybridrag.indexing.builds import shards, stages

    default = gc.get_threshold()
    assert default[0] < shards.BUILD_GC_THRESHOLDS[0]
    seen: list[tuple[int, int, int]] = []
    chunk = stages.VersionWrite.chunk

    def chunk_noted(self: Any, *args: Any) -> Any:
        seen.append(gc.get_threshold())
        return chunk(self, *args)

    monkeypatch.setattr(stages.VersionWrite, "chunk", chunk_noted)
    IndexBuilder(tmp_path / "index", BuildConfig(embedding_model="minilm"), embedder=embedder).build(SAMPLE)
    assert seen == [shards.BUILD_GC_THRESHOLDS] and gc.get_threshold() == default
    with pytest.raises(RuntimeError), shards.build_collections():
        with shards.build_collections():
            assert gc.get_threshold() == shards.BUILD_GC_THRESHOLDS
        assert gc.get_threshold() == shards.BUILD_GC_THRESHOLDS  # the inner write left the outer's alone
        raise RuntimeError("a write failed")
    assert gc.get_threshold() == default
    with shards.Shards([1, 2], 2) as two:
        assert two.map(_thresholds) == [default, shards.BUILD_GC_THRESHOLDS]  # this process, then a child


def _thresholds(_shard: Any) -> tuple[int, int, int]:
    import gc

    return gc.get_threshold()


def test_a_child_beside_the_write_exits_once_its_result_is_sent() -> None:
    """An `Aside` child ends when its work is done, not when the parent reads the result (a build's
    keyword child lived, with its heap, through the whole graph stage); a result larger than the socket's
    buffer still arrives whole, and leaving the block after a read result waits for a child already gone."""
    from hybridrag.indexing.builds import shards

    with shards.Aside(_repeated, "ab", 3) as small:
        assert small._process.wait(timeout=120) == 0  # gone before its result is asked for
        assert small.result() == "ababab"
    with shards.Aside(_repeated, "x", 8 * 2**20) as large:
        assert large.result() == "x" * 8 * 2**20
        assert large._process.wait(timeout=120) == 0


def _repeated(payload: str, times: int) -> str:
    return payload * times


def test_community_reports_are_embedded_beside_the_graphs_arrays(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, embedder: Any
) -> None:
    """The reports' vectors are embedded while the walk's arrays are derived (on another thread), saved in the
    communities' order as one call embeds them; a failure of that embedding fails the write, publishing
    nothing and leaving no staging directory."""
    from conftest import SAMPLE

    from hybridrag.indexing.builds import stages
    from hybridrag.indexing.stores.graph_arrays import load_graph

    started = threading.Event()
    seen: dict[str, Any] = {}
    embed_reports = stages.VersionWrite._embed_reports
    derive = stages.GraphArrays.derive

    def reports(self: Any, model: Any, texts: list[str]) -> Any:
        seen["thread"] = threading.current_thread().name
        started.set()
        return embed_reports(self, model, texts)

    def derive_when_embedding(*args: Any, **kwargs: Any) -> Any:
        # Set only if the reports are embedded beside this call (after it, this would wait in vain).
        seen["beside"] = started.wait(timeout=60)
        return derive(*args, **kwargs)

    monkeypatch.setattr(stages.VersionWrite, "_embed_reports", reports)
    monkeypatch.setattr(stages.GraphArrays, "derive", derive_when_embedding)
    index_dir = tmp_path / "idx"
    IndexBuilder(index_dir, MINILM, embedder=embedder).build(SAMPLE)
    assert seen["beside"] and seen["thread"] != threading.current_thread().name
    graph, vectors = load_graph(versions.current_version(index_dir).path / "graph")
    assert graph.communities and vectors is not None
    expected = embedder.embed_passages([c.report for c in graph.communities])
    assert vectors.shape == expected.shape and np.allclose(vectors, expected, atol=1e-6)

    def failing(self: Any, model: Any, texts: list[str]) -> Any:
        raise RuntimeError("the encoder fell over")

    before = versions.current_version(index_dir).version
    monkeypatch.setattr(stages.VersionWrite, "_embed_reports", failing)
    with pytest.raises(RuntimeError, match="the encoder fell over"):
        IndexBuilder(index_dir, MINILM, embedder=embedder).build(SAMPLE)
    assert versions.current_version(index_dir).version == before
    assert not list(index_dir.glob(".staging-*"))


def test_a_builds_vectors_are_written_in_few_large_adds(
    tmp_path: Path, corpus: Path, embedder, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    """Embedding batches are gathered into adds of `VECTOR_WRITE_ROWS` rows (a LanceDB fragment, version and
    transaction apiece), in chunk order, the same rows whatever the grouping."""
    from hybridrag.indexing.builds import stages
    from hybridrag.indexing.stores import vectors as vec

    sizes: list[int] = []
    real = vec.VectorIndexWriter.add

    def counted(self, rows, vectors):  # type: ignore[no-untyped-def]
        sizes.append(len(vectors))
        return real(self, rows, vectors)

    def table(version: versions.IndexVersion) -> Any:
        return vec._connect(version.path / "vectors").open_table(vec.TABLE).to_arrow()

    monkeypatch.setattr(vec.VectorIndexWriter, "add", counted)
    monkeypatch.setattr(stages, "EMBED_BATCH", 1)
    whole = table(build(tmp_path / "whole", corpus, embedder))
    assert sizes == [whole.num_rows] and whole.num_rows >= 5
    sizes.clear()
    monkeypatch.setattr(stages, "VECTOR_WRITE_ROWS", 2)
    grouped = table(build(tmp_path / "grouped", corpus, embedder))
    assert sizes == [2] * (whole.num_rows // 2) + [1] * (whole.num_rows % 2)
    assert grouped.column("chunk_id").to_pylist() == whole.column("chunk_id").to_pylist()
    assert grouped.drop_columns(["vector"]).equals(whole.drop_columns(["vector"]))
    assert np.array_equal(
        np.asarray(grouped.column("vector").to_pylist()), np.asarray(whole.column("vector").to_pylist())
    )


class _DroppingEmbedder:
    """An embedder that returns one vector too few for a batch of several passages."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def embed_passages(self, texts: list[str]) -> np.ndarray:
        vectors = self._inner.embed_passages(texts)
        return vectors[:-1] if len(texts) > 1 else vectors


def test_an_embedder_that_returns_too_few_vectors_fails_the_build(
    tmp_path: Path, corpus: Path, embedder
) -> None:  # type: ignore[no-untyped-def]
    """The vector rows are matched to the chunks by count: a batch short of a vector fails the write
    (nothing published), rather than shift every later vector onto the wrong chunk."""
    with pytest.raises(RuntimeError, match="vectors for"):
        build(tmp_path / "idx", corpus, _DroppingEmbedder(embedder))
    with pytest.raises(versions.IndexUnavailable):
        versions.current_version(tmp_path / "idx")


def test_a_shard_child_gets_its_share_of_the_cores(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Each of N shard processes sees cores // N (at least one): its ONNX sessions' threads and its other
    side-by-side work, so N shards do not run N threads a core; this process keeps what it had, and an
    `Aside` child (no model) is left alone."""
    from hybridrag.indexing.builds import shards
    from hybridrag.indexing.models import registry

    monkeypatch.delenv(registry.CORES_ENV, raising=False)
    cores = registry.available_cores()
    with shards.Shards([1, 2, 3], 3) as three:
        seen = three.map(_cores)
    assert three.cores == max(1, cores // 3)  # what this process' shard is run on (`on_cores`)
    assert shards.Shards([1, 2, 3], 1).cores is None
    assert seen[0] == (cores, None)
    assert seen[1:] == [(max(1, cores // 3), max(1, cores // 3))] * 2
    with shards.Aside(_aside_cores, None) as aside:
        assert aside.result() == (cores, None)
    monkeypatch.setenv(registry.CORES_ENV, "1")
    assert registry.available_cores() == 1 and registry.core_share() == 1
    monkeypatch.setenv(registry.CORES_ENV, "0")  # not a share: ignored
    assert registry.core_share() is None and registry.available_cores() == cores


def _cores(_shard: Any) -> tuple[int, int | None]:
    from hybridrag.indexing.models import registry

    return registry.available_cores(), registry.core_share()


def _aside_cores(_payload: Any) -> tuple[int, int | None]:
    return _cores(None)
