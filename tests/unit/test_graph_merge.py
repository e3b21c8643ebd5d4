"""Writes that leave the graph behind, and the merge that brings it up: the deferred write keeps its base's
graph byte for byte, the service never returns a deleted passage from it, and a merge gives the graph an
eager write (and a full build of the same documents) gives."""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from conftest import jsonl_corpus
from fastapi.testclient import TestClient

from hybridrag.indexing.builds.build import BuildConfig, IndexBuilder
from hybridrag.indexing.builds.merge import GraphMerge, graph_behind
from hybridrag.indexing.documents.sources import Document
from hybridrag.indexing.stores import versions
from hybridrag.indexing.stores.graph import GraphData
from hybridrag.indexing.stores.graph_arrays import load_graph
from hybridrag.indexing.stores.graph_delta import DELTA, read_delta
from hybridrag.indexing.stores.tables import CHUNKS, read_version_table

MINILM = BuildConfig(embedding_model="minilm")

FIRST = [
    {"_id": "sony", "title": "Sony", "text": "Masaru Ibuka and Akio Morita founded Sony in Tokyo in 1946."},
    {"_id": "toyota", "title": "Toyota", "text": "Kiichiro Toyoda founded Toyota Motor in Aichi in 1937."},
    {"_id": "honda", "title": "Honda", "text": "Soichiro Honda founded Honda Motor in Hamamatsu in 1948."},
    {
        "_id": "ibuka",
        "title": "Masaru Ibuka",
        "text": "Masaru Ibuka was an engineer who worked with Akio Morita.",
    },
]
LATER = [
    Document(
        doc_id="nintendo",
        file_id="api",
        title="Nintendo",
        text="Fusajiro Yamauchi founded Nintendo in Kyoto. Hiroshi Yamauchi later led Nintendo.",
    ),
    Document(
        doc_id="honda",
        file_id="api",
        title="Honda",
        text="Soichiro Honda and Takeo Fujisawa built Honda Motor into a carmaker in Hamamatsu.",
    ),
]


def _graph_files(version: Path) -> dict[str, bytes]:
    folder = version / "graph"
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _search(client: TestClient, text: str, strategies: list[str]) -> list[dict]:  # type: ignore[type-arg]
    r = client.post(
        "/v1/search",
        json={
            "text": text,
            "options": {"strategies": strategies, "rerankEnabled": False, "limit": 10},
            "filters": {"minRelevance": 0},
        },
    )
    assert r.status_code == 200, r.text
    return r.json()["results"]  # type: ignore[no-any-return]


def test_a_deferred_write_keeps_the_graph_and_a_merge_builds_what_an_eager_write_does(
    tmp_path: Path,
    embedder,  # type: ignore[no-untyped-def]
) -> None:
    from hybridrag.http.app import create_app
    from hybridrag.pipeline.engine import SearchEngine
    from hybridrag.pipeline.settings import Settings

    source = jsonl_corpus(tmp_path / "src", FIRST)
    deferred_dir, eager_dir = tmp_path / "deferred", tmp_path / "eager"
    IndexBuilder(deferred_dir, MINILM, embedder=embedder).build(source)
    shutil.copytree(deferred_dir, eager_dir, symlinks=True)
    base = versions.current_version(deferred_dir)
    assert base.manifest["graph"]["builtFor"] == base.version and not graph_behind(base)

    # Add one document, replace one, delete one: the graph stays the base's, byte for byte.
    builder = IndexBuilder(deferred_dir, MINILM, embedder=embedder)
    written = builder.apply(LATER, ["sony"], defer_graph=True)
    after = versions.current_version(deferred_dir)
    assert after.version == written.version and graph_behind(after)
    assert after.manifest["graph"]["builtFor"] == base.version
    # ... but for the links of the passages it adds to the graph's entities (`stores.graph_delta`).
    delta = after.path / "graph" / DELTA
    assert {k: v for k, v in _graph_files(after.path).items() if k != DELTA} == _graph_files(base.path)
    links = read_delta(after.path / "graph").to_pylist()
    assert {r["chunk_id"] for r in links} == {
        c for c, d in _doc_of(after.path).items() if d in ("nintendo", "honda")
    }
    honda_ids = {eid for r in links if r["entity_id"] for eid in [r["entity_id"]]}
    assert load_graph(base.path / "graph")[0].entities and honda_ids
    assert delta.is_file()
    # Only the added chunks' mentions are written, as the write's own segment.
    assert sorted(p.name for p in after.path.glob("mentions*.arrow")) == [
        f"mentions.{after.version}.arrow",
        "mentions.arrow",
    ]
    assert (after.path / "mentions.arrow").samefile(base.path / "mentions.arrow")
    assert "graph" not in written.seconds or written.seconds["graph"] < 5

    settings = Settings(index_dir=deferred_dir, embedding_model="minilm", _env_file=None)  # type: ignore[call-arg]
    engine = SearchEngine(settings, embedder=embedder)
    with TestClient(create_app(settings, engine, wait=True)) as client:
        loaded = engine.index
        assert loaded.graph is not None and loaded.graph.lagging
        live = loaded.graph.live
        assert live is not None and int((~live).sum()) == 2  # Sony's chunk and Honda's old one
        ready = client.get("/readyz").json()
        assert ready["graph"] == {
            "builtFor": base.version,
            "chunksAhead": 2,  # Nintendo's and Honda's new text: not in the graph yet
            "chunksGone": 2,  # Sony's and Honda's old text: in the graph, never returned
            "chunksLinked": 2,  # ... but linked to its entities, or to names it will hold (Nintendo)
        }
        doc_of = _doc_of(after.path)
        gone = set(_doc_of(base.path)) - set(doc_of)
        assert len(gone) == 2
        # The new document is found at once, by keyword and meaning.
        hybrid = _search(client, "Who founded Nintendo in Kyoto?", ["keyword", "semantic", "graph"])
        assert doc_of[hybrid[0]["sources"]["chunkId"]] == "nintendo"
        # Nothing deleted or replaced comes back from the graph left behind, whatever seeds the walk.
        for text in ("Masaru Ibuka Akio Morita Sony Tokyo", "Soichiro Honda Hamamatsu 1948"):
            for strategies in (["graph"], ["keyword", "semantic", "graph"]):
                for hit in _search(client, text, strategies):
                    assert hit["sources"]["chunkId"] not in gone
                    assert hit["sources"]["chunkId"] is None or hit["sources"]["chunkId"] in doc_of
        graph_only = _search(client, "Masaru Ibuka", ["graph"])
        assert any(doc_of.get(h["sources"]["chunkId"]) == "ibuka" for h in graph_only)
        # Names the graph does not hold yet lead to the new passages that mention them.
        graph_only = _search(client, "Fusajiro Yamauchi", ["graph"])
        assert [doc_of.get(h["sources"]["chunkId"]) for h in graph_only[:1]] == ["nintendo"]
        # Honda's new text names the graph's Soichiro Honda and Hamamatsu: the walk reaches it one step out,
        # and its path says through which entity.
        new_honda = next(c for c, d in doc_of.items() if d == "honda")
        graph_only = _search(client, "Soichiro Honda", ["graph"])
        hit = next(h for h in graph_only if h["sources"]["chunkId"] == new_honda)
        path = hit["metadata"]["graphPath"]
        assert path[-1]["id"] == new_honda and path[-1]["edge"] == "mentions"
        assert path[-2]["type"] == "entity"
        # Its sources name the graph's entities it is linked to.
        assert path[-2]["id"] in hit["sources"]["entityIds"]

    # The merge: the graph an eager write of the same batch makes, byte for byte.
    merged = builder.merge_graph()
    assert merged is not None
    now = versions.current_version(deferred_dir)
    assert not graph_behind(now) and now.manifest["graph"]["builtFor"] == now.version == merged.version
    assert builder.merge_graph() is None  # nothing behind any more
    IndexBuilder(eager_dir, MINILM, embedder=embedder).apply(LATER, ["sony"])
    eager = versions.current_version(eager_dir)
    assert _graph_files(now.path) == _graph_files(eager.path)
    assert [p.name for p in now.path.glob("mentions*.arrow")] == ["mentions.arrow"]
    assert (now.path / "mentions.arrow").read_bytes() == (eager.path / "mentions.arrow").read_bytes()
    # ... which is what a full build of the same documents gives (same chunks, same order of documents).
    final = [d for d in FIRST if d["_id"] not in ("sony", "honda")] + [
        {"_id": d.doc_id, "title": d.title, "text": d.text, "fileId": "api"} for d in LATER
    ]
    full_dir = tmp_path / "full"
    IndexBuilder(full_dir, MINILM, embedder=embedder).build(jsonl_corpus(tmp_path / "final", final))
    merged_graph, _ = load_graph(now.path / "graph")
    full_graph, _ = load_graph(versions.current_version(full_dir).path / "graph")

    def shape(g: GraphData) -> tuple[object, ...]:
        return (
            sorted((e.id, e.name, e.type, sorted(e.chunk_ids)) for e in g.entities),
            sorted((r.id, r.count, sorted(r.chunk_ids)) for r in g.relations),
            sorted(c.id for c in g.communities),
        )

    assert shape(merged_graph) == shape(full_graph)

    with TestClient(create_app(settings, SearchEngine(settings, embedder=embedder), wait=True)) as client:
        assert client.get("/readyz").json()["graph"] == {
            "builtFor": now.version,
            "chunksAhead": 0,
            "chunksGone": 0,
            "chunksLinked": 0,
        }
        graph_hits = _search(client, "Fusajiro Yamauchi", ["graph"])
        assert any(_doc_of(now.path).get(h["sources"]["chunkId"]) == "nintendo" for h in graph_hits)
    assert json.loads((now.path / "manifest.json").read_text("utf-8"))["merge"]["graphOf"] == written.version


def _doc_of(version: Path) -> dict[str, str]:
    table = read_version_table(version, CHUNKS)
    return dict(zip(table.column("chunk_id").to_pylist(), table.column("doc_id").to_pylist(), strict=True))


def test_writes_during_a_merge_stay_ahead_of_the_graph_it_attaches(tmp_path: Path, embedder) -> None:  # type: ignore[no-untyped-def]
    """A merge attaches its graph to the newest version, not to the one it copied: a write made while it
    built is kept, and is still ahead of the merged graph (the next merge takes it)."""
    index_dir = tmp_path / "idx"
    builder = IndexBuilder(index_dir, MINILM, embedder=embedder)
    builder.build(jsonl_corpus(tmp_path / "src", FIRST))
    first = builder.apply(LATER[:1], [], defer_graph=True)
    merge = GraphMerge.take(index_dir, lambda _config: embedder, lambda items, *_a, **_k: items)
    assert merge is not None and merge.version == first.version
    try:
        merge.build()
        second = builder.apply(LATER[1:], ["toyota"], defer_graph=True)  # while the merge builds
        attached = merge.attach()
    finally:
        merge.discard()
    assert attached is not None
    now = versions.current_version(index_dir)
    assert now.manifest["parent"] == second.version and now.manifest["graph"]["builtFor"] == first.version
    assert graph_behind(now)
    kept = set(read_version_table(now.path, CHUNKS).column("doc_id").to_pylist())
    assert "toyota" not in kept and {"nintendo", "honda"} <= kept
    assert not list(index_dir.glob(".merge-*"))
    assert builder.merge_graph() is not None
    assert not graph_behind(versions.current_version(index_dir))


def test_graph_rows_map_to_table_rows_by_id_mapped_or_listed(tmp_path: Path) -> None:
    from hybridrag.indexing.stores.graph_order import ListOrder, table_rows
    from hybridrag.indexing.stores.mapped import IdList, write_id_list

    graph_ids = [f"c{i}" for i in range(50)]
    table_ids = [f"c{i}" for i in range(50) if i % 7] + ["n1", "n2"]  # some deleted, two added
    write_id_list(tmp_path / "graph.arrow", graph_ids, "chunk_id")
    write_id_list(tmp_path / "table.arrow", table_ids, "chunk_id")
    expected = [table_ids.index(c) if c in table_ids else -1 for c in graph_ids]
    mapped = table_rows(
        IdList(tmp_path / "graph.arrow", "chunk_id"), IdList(tmp_path / "table.arrow", "chunk_id")
    )
    listed = table_rows(ListOrder(graph_ids), ListOrder(table_ids))
    assert mapped.tolist() == listed.tolist() == expected


def _corpus_docs(count: int) -> list[Document]:
    people = [
        "Ada Lovelace",
        "Charles Babbage",
        "Alan Turing",
        "Grace Hopper",
        "John von Neumann",
        "Emmy Noether",
    ]
    places = ["London", "Cambridge", "Princeton", "Arlington", "Göttingen", "Manchester"]
    return [
        Document(
            doc_id=f"doc{i}",
            file_id="api",
            title=f"{people[i % 6]} in {places[(i * 5) % 6]}",
            text=(
                f"{people[i % 6]} worked with {people[(i + 1) % 6]} in {places[(i * 5) % 6]}. "
                f"Later {people[(i + 3) % 6]} visited {places[(i + 2) % 6]} (note {i})."
            ),
        )
        for i in range(count)
    ]


def _built(tmp_path: Path, docs: list[Document], copies: int = 1) -> list[Path]:
    """Index folders built from `docs` (no embedding model, one build, then copied)."""
    rows = [{"_id": d.doc_id, "title": d.title, "text": d.text} for d in docs]
    first = tmp_path / "idx0"
    IndexBuilder(first, BuildConfig(embedding_model=None)).build(jsonl_corpus(tmp_path / "src", rows))
    folders = [first]
    for i in range(1, copies):
        folders.append(Path(shutil.copytree(first, tmp_path / f"idx{i}", symlinks=True)))
    return folders


@pytest.mark.parametrize("seed", [1, 2])
def test_a_random_sequence_of_deferred_writes_merges_to_what_eager_writes_give(
    tmp_path: Path, seed: int
) -> None:
    """Adds, replaces and deletes in random batches, each left behind by the graph (and a merge now and
    then, part way): after the last merge the graph, its arrays and the mentions are byte for byte those of
    the same batches written eagerly, and hold the same entities as a full build of the final documents."""
    rng = random.Random(seed)
    config = BuildConfig(embedding_model=None)
    docs = _corpus_docs(24)
    deferred_dir, eager_dir = _built(tmp_path, docs[:8], copies=2)
    held = {d.doc_id: d for d in docs[:8]}
    waiting = docs[8:]
    deferred, eager = IndexBuilder(deferred_dir, config), IndexBuilder(eager_dir, config)
    for step in range(5):
        adds = [waiting.pop() for _ in range(rng.randint(1, 3))]
        replaced = [
            Document(doc_id=i, file_id="api", title=held[i].title, text=held[i].text + f" Revised {step}.")
            for i in rng.sample(sorted(held), 1)
        ]
        deletes = rng.sample(sorted(set(held) - {r.doc_id for r in replaced}), rng.randint(0, 2))
        deferred.apply(adds + replaced, deletes, defer_graph=True)
        eager.apply(adds + replaced, deletes)
        held.update({d.doc_id: d for d in adds + replaced})
        for i in deletes:
            held.pop(i)
        if step == 2:
            assert deferred.merge_graph() is not None
    assert graph_behind(versions.current_version(deferred_dir))
    assert deferred.merge_graph() is not None
    merged, written = versions.current_version(deferred_dir), versions.current_version(eager_dir)
    assert not graph_behind(merged)
    assert _graph_files(merged.path) == _graph_files(written.path)
    assert (merged.path / "mentions.arrow").read_bytes() == (written.path / "mentions.arrow").read_bytes()
    assert read_version_table(merged.path, CHUNKS).equals(read_version_table(written.path, CHUNKS))
    full_dir = tmp_path / "full"
    rows = [{"_id": d.doc_id, "title": d.title, "text": d.text, "fileId": "api"} for d in held.values()]
    IndexBuilder(full_dir, config).build(jsonl_corpus(tmp_path / "final", rows))
    ours, _ = load_graph(merged.path / "graph")
    theirs, _ = load_graph(versions.current_version(full_dir).path / "graph")
    assert sorted((e.id, e.type, sorted(e.chunk_ids)) for e in ours.entities) == sorted(
        (e.id, e.type, sorted(e.chunk_ids)) for e in theirs.entities
    )
    assert sorted((r.id, r.count) for r in ours.relations) == sorted(
        (r.id, r.count) for r in theirs.relations
    )


def test_a_merge_killed_at_any_moment_leaves_a_published_version_and_the_next_one_completes(
    tmp_path: Path,
) -> None:
    config = BuildConfig(embedding_model=None)
    docs = _corpus_docs(12)
    [index_dir] = _built(tmp_path, docs[:6])
    IndexBuilder(index_dir, config).apply(docs[6:], ["doc0"], defer_graph=True)
    behind = versions.current_version(index_dir)
    cmd = [sys.executable, "-m", "hybridrag.cli", "index", "merge", "--index", str(index_dir), "--json"]
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    rng = random.Random(7)
    for _ in range(3):
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
        time.sleep(rng.uniform(0.5, 4.0))  # start-up takes most of it: some kills land mid-merge
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        now = versions.current_version(index_dir)  # complete, whichever it is
        assert now.manifest["counts"] == behind.manifest["counts"]
        if not graph_behind(now):
            break
    done = subprocess.run(cmd, capture_output=True, env=env, check=True)
    now = versions.current_version(index_dir)
    assert not graph_behind(now), done.stdout
    assert not list(index_dir.glob(".merge-*")) and not list(index_dir.glob(".staging-*"))
    assert now.manifest["counts"] == behind.manifest["counts"]


def test_a_merge_built_in_a_child_process_attaches_the_same_graph_and_can_be_cancelled(
    tmp_path: Path,
) -> None:
    config = BuildConfig(embedding_model=None)
    docs = _corpus_docs(10)
    index_dir, eager_dir = _built(tmp_path, docs[:6], copies=2)
    IndexBuilder(index_dir, config).apply(docs[6:], ["doc1"], defer_graph=True)
    IndexBuilder(eager_dir, config).apply(docs[6:], ["doc1"])

    def take() -> GraphMerge:
        merge = GraphMerge.take(index_dir, lambda _config: None, lambda items, *_a, **_k: items)
        assert merge is not None
        return merge

    cancelled, stop = take(), threading.Event()
    stop.set()
    try:
        with pytest.raises(RuntimeError, match="cancelled"):
            cancelled.build_in_subprocess(cancel=stop)
    finally:
        cancelled.discard()
    merge = take()
    try:
        merge.build_in_subprocess()
        assert merge.attach() is not None
    finally:
        merge.discard()
    merged = versions.current_version(index_dir)
    assert not graph_behind(merged) and merge.stages.seconds["graph"] > 0
    assert _graph_files(merged.path) == _graph_files(versions.current_version(eager_dir).path)
