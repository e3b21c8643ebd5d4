"""The knowledge graph's build: entities, titles, relations and communities, its arrays and layout, incremental
adds and deletes (extraction: test_extraction.py; searching it: test_graph_search.py)."""

from __future__ import annotations

import dataclasses
import json
import mmap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from conftest import jsonl_corpus, search_json
from fastapi.testclient import TestClient

from hybridrag.indexing.analysis.analyzers import Analyzer
from hybridrag.indexing.analysis.entities import EntityExtractor, normalize_name
from hybridrag.indexing.builds.build import BuildConfig, IndexBuilder
from hybridrag.indexing.builds.graph_build import build_graph, link_title_spans
from hybridrag.indexing.stores import versions
from hybridrag.indexing.stores.graph import GRAPH_FORMAT, ChunkMentions, GraphData
from hybridrag.indexing.stores.graph_arrays import load_graph

EXTRACTOR = EntityExtractor(Analyzer())


def _chunk(chunk_id: str, title: str, text: str) -> ChunkMentions:
    return ChunkMentions(
        chunk_id, "f-" + chunk_id, text, EXTRACTOR.extract_title(title) + EXTRACTOR.extract(text), title
    )


def test_passages_lead_the_walk_to_the_entities_with_an_article_elsewhere(tmp_path: Path) -> None:
    """An entity a document's whole title names has an article in the corpus; from any other passage that
    mentions it, the walk's step to it weighs `ARTICLE_WEIGHT` more than to a name without one."""
    from hybridrag.indexing.stores.graph_arrays import GraphArrays
    from hybridrag.indexing.stores.graph_order import ListOrder
    from hybridrag.indexing.stores.graph_weights import ARTICLE_WEIGHT

    chunks = [
        _chunk("a", "Trent Reznor", "Trent Reznor is an American singer and record producer."),
        _chunk(
            "b",
            "Natural Born Killers (soundtrack)",
            "The soundtrack was produced by Trent Reznor. Oliver Stone directed the film in Arizona.",
        ),
        _chunk("c", "", "Deserts lie in Arizona, wrote Oliver Stone."),
    ]
    graph = build_graph(chunks)
    by_key = {normalize_name(e.name): e for e in graph.entities}
    # The whole title, less its disambiguation, names the article; a name inside a longer title does not.
    assert by_key["trent reznor"].article and by_key["natural born killers"].article
    assert not by_key["oliver stone"].article and not by_key["arizona"].article
    arrays = GraphArrays.derive(graph, ListOrder([c.chunk_id for c in chunks]))
    index = {e.id: i for i, e in enumerate(graph.entities)}
    ne = len(graph.entities)
    transition = arrays.transition  # rows: from, columns: to

    def step(chunk: int, key: str) -> float:
        return float(transition[ne + chunk, index[by_key[key].id]])

    # From passage b: to Reznor (his article is a) ARTICLE_WEIGHT + 1 times the step to Oliver Stone; to its
    # own subject (b is its article) as to any name.
    assert step(1, "trent reznor") == pytest.approx((1 + ARTICLE_WEIGHT) * step(1, "oliver stone"))
    assert step(1, "natural born killers") == pytest.approx(step(1, "oliver stone"))
    # A passage whose names have no article elsewhere walks to each alike, as before.
    assert step(2, "oliver stone") > 0 and step(2, "oliver stone") == pytest.approx(step(2, "arizona"))
    assert [normalize_name(e.name) for e in build_graph(chunks[1:]).entities if e.article] == [
        "natural born killers"
    ]
    # The record versions before graph arrays format 7 held (the flags listed apart from the entities'
    # fields) loads the same, gzipped or, older, plain; a save of the graph leaves neither behind.
    import gzip

    record = _legacy_record(graph)
    (tmp_path / "graph.json.gz").write_bytes(gzip.compress(json.dumps(record).encode("utf-8")))
    assert GraphData.present(tmp_path) and GraphData.load(tmp_path)[0] == graph
    (tmp_path / "graph.json").write_text(json.dumps(record), "utf-8")
    (tmp_path / "graph.json.gz").unlink()
    assert GraphData.present(tmp_path) and GraphData.load(tmp_path)[0] == graph
    graph.save_vectors(tmp_path, None)
    assert not GraphData.present(tmp_path)
    # Format 7 arrays are the graph itself: every field comes back from them, evidence and PMI included.
    arrays.save(tmp_path / "arrays")
    assert GraphData.present(tmp_path) and load_graph(tmp_path)[0] == graph


def test_the_walks_transition_is_each_nodes_edges_over_its_out_weight() -> None:
    """Each node's row of the transition is its edges (relations and synonyms both ways, every mention both
    ways with its two weights, repeated edges added up) over their sum, heaviest first, ties by column:
    against a dense matrix made edge by edge."""
    from hybridrag.indexing.stores.graph import Synonym
    from hybridrag.indexing.stores.graph_arrays import GraphArrays
    from hybridrag.indexing.stores.graph_order import ListOrder
    from hybridrag.indexing.stores.graph_weights import RELATION_WEIGHT, SYNONYM_WEIGHT, _mention_edges

    chunks = [
        _chunk("a", "Trent Reznor", "Trent Reznor is an American singer. Reznor met David Bowie in Ohio."),
        _chunk("b", "", "David Bowie toured Ohio with Trent Reznor. Bowie sang in Ohio and Indiana."),
        _chunk("c", "Ohio", "Ohio lies west of Pennsylvania. Ohio borders Indiana and Pennsylvania."),
        _chunk("d", "", "Nothing here names anyone."),
    ]
    graph = build_graph(chunks)
    index = {e.id: i for i, e in enumerate(graph.entities)}
    by_key = {normalize_name(e.name): e.id for e in graph.entities}
    graph.synonyms = [Synonym(by_key["david bowie"], by_key["trent reznor"], 0.75)]
    order = ListOrder([c.chunk_id for c in chunks])
    arrays = GraphArrays.derive(graph, order)
    ne, n = len(graph.entities), len(graph.entities) + len(chunks)
    assert graph.relations and arrays.transition.shape == (n, n)
    edges = np.zeros((n, n))
    for r in graph.relations:
        a, b = index[r.source], index[r.target]
        edges[a, b] += RELATION_WEIGHT * r.count
        edges[b, a] += RELATION_WEIGHT * r.count
    a, b = index[by_key["david bowie"]], index[by_key["trent reznor"]]
    edges[a, b] += SYNONYM_WEIGHT * 0.75
    edges[b, a] += SYNONYM_WEIGHT * 0.75
    table = pa.Table.from_batches(arrays.entities.to_batches())
    entity, chunk, to_entity, to_chunk = _mention_edges(table, order)
    for e, c, w_in, w_out in zip(entity, chunk, to_entity, to_chunk, strict=True):
        edges[c, e] += w_in
        edges[e, c] += w_out
    out = edges.sum(axis=1, keepdims=True)
    expected = np.divide(edges, out, out=np.zeros_like(edges), where=out > 0)
    transition = arrays.transition
    assert np.abs(transition.toarray() - expected).max() < 1e-6  # float32 weights
    for u in range(n):
        cols = transition.indices[transition.indptr[u] : transition.indptr[u + 1]].tolist()
        weights = transition.data[transition.indptr[u] : transition.indptr[u + 1]].tolist()
        assert sorted(cols) == np.flatnonzero(expected[u]).tolist()
        ranked = [(-w, c) for w, c in zip(weights, cols, strict=True)]
        assert ranked == sorted(ranked)
    assert transition.indptr[ne + 4] == transition.indptr[ne + 3]  # the passage without names walks nowhere


def _legacy_record(graph: GraphData) -> dict[str, Any]:
    """graph.json as releases before graph arrays format 7 wrote it."""
    from hybridrag.indexing.stores.graph import as_record

    entities = [
        {k: v for k, v in as_record(e).items() if k not in ("article", "concept")} for e in graph.entities
    ]
    return {
        "entities": entities,
        "articles": [e.id for e in graph.entities if e.article],
        "concepts": [e.id for e in graph.entities if e.concept],
        "relations": [as_record(r) for r in graph.relations],
        "communities": [as_record(c) for c in graph.communities],
        "synonyms": [as_record(s) for s in graph.synonyms],
    }


def test_mentions_link_to_the_title_entities_whose_names_they_contain() -> None:
    chunks = [
        _chunk("a", "Trent Reznor", "Michael Trent Reznor is an American singer and record producer."),
        _chunk("b", "Nine Inch Nails", "Nine Inch Nails is an American industrial rock band."),
        _chunk(
            "c",
            "Natural Born Killers (soundtrack)",
            "The soundtrack was produced by Trent Reznor of Nine Inch Nails. Paris Hilton was not involved.",
        ),
        _chunk("d", "Paris", "Paris is the capital of France."),
    ]
    # The extractor keeps the long names whole; only the corpus-wide step can tie them to the titles.
    assert "trent reznor of nine inch nails" in {m.key for m in chunks[2].mentions}
    assert "trent reznor" not in {m.key for m in chunks[2].mentions}
    graph = build_graph(chunks)
    by_key = {e.name.lower(): e for e in graph.entities}
    reznor = by_key["trent reznor"]
    assert set(reznor.chunk_ids) == {"a", "c"} and reznor.title_chunk_ids == ["a"]
    # The linked mentions are spelled as the title's words and typed as the title's entity, not as the long name.
    assert reznor.name == "Trent Reznor" and not reznor.aliases and reznor.type == "person"
    linked = [m for m in link_title_spans(chunks)[2].mentions if m.key == "nine inch nails"]
    assert [m.surface for m in linked] == ["Nine Inch Nails"]
    assert set(by_key["nine inch nails"].chunk_ids) == {"b", "c"}
    # A one-word title links by its exact name only: "Paris Hilton" is not the city.
    assert by_key["paris"].chunk_ids == ["d"]
    # The linked mention sits in the sentence of the long name, so it relates to what that sentence names.
    ids = {e.id: e.name.lower() for e in graph.entities}
    pairs = {frozenset((ids[r.source], ids[r.target])) for r in graph.relations}
    assert frozenset(("trent reznor", "nine inch nails")) in pairs
    assert frozenset(("trent reznor", "paris hilton")) not in pairs
    # The links depend on the whole set of mentions, not on the order chunks arrive in (incremental updates).
    reordered = build_graph(list(reversed(chunks)))
    assert {e.id: set(e.chunk_ids) for e in reordered.entities} == {
        e.id: set(e.chunk_ids) for e in graph.entities
    }
    assert link_title_spans(chunks[3:]) == chunks[3:]  # one-word titles only: nothing to link


def test_a_names_files_are_its_chunks_files_in_the_order_they_came() -> None:
    """The tally keeps a name's chunks and a pair's; its files follow from them (each once, first chunk
    first, however often the chunk names them), in one process and in shards alike."""
    texts = [
        ("a1", "f-a", "Marie Curie worked in Paris. In Paris, Marie Curie met Pierre Curie."),
        ("b1", "f-b", "Marie Curie won a prize there."),
        ("a2", "f-a", "Marie Curie taught physics."),
        ("c1", "f-c", "She moved to Paris in 1891. Marie Curie stayed in Paris."),
    ]
    chunks = [ChunkMentions(cid, fid, text, EXTRACTOR.extract(text), "") for cid, fid, text in texts]
    for workers in (1, 2):
        graph = build_graph(chunks, workers=workers)
        by_key = {e.name.lower(): e for e in graph.entities}
        curie, paris = by_key["marie curie"], by_key["paris"]
        assert curie.chunk_ids == ["a1", "b1", "a2", "c1"] and curie.file_ids == ["f-a", "f-b", "f-c"]
        assert paris.chunk_ids == ["a1", "c1"] and paris.file_ids == ["f-a", "f-c"]
        (pair,) = [r for r in graph.relations if {r.source, r.target} == {curie.id, paris.id}]
        assert pair.count == 3 and pair.chunk_ids == ["a1", "c1"]
        assert pair.evidence == [
            {"chunkId": "a1", "start": 0, "end": 28},
            {"chunkId": "a1", "start": 29, "end": 68},
            {"chunkId": "c1", "start": 28, "end": 56},
        ]


def test_relations_counted_as_arrays_match_a_pair_by_pair_tally() -> None:
    """`_Tally.relations` counts the sentences' name pairs as arrays (`co_occurrences`); every relation
    field is the one a tally kept pair by pair makes (counts, PMI, chunks each once in order, the first
    `MAX_EVIDENCE` sentences), with title names in every sentence, a pair in many sentences of one chunk,
    sentences of one name and chunks without any, merged from parts as the shards' tallies are."""
    import itertools
    import math
    import random
    from collections import Counter, defaultdict

    from hybridrag.indexing.analysis.entities import Mention
    from hybridrag.indexing.analysis.text import content_hash
    from hybridrag.indexing.builds import graph_build

    rng = random.Random(7)
    names = [f"name {i:02d}" for i in range(40)] + ["été", "Ärzte", "z"]
    chunks = []
    for i in range(300):
        mentions, offset = [], 0
        for _ in range(rng.randrange(0, 7)):
            end = offset + rng.randrange(5, 40)
            for key in rng.sample(names, rng.choice((1, 1, 2, 3, 5, 9))):
                mentions.append(Mention(key, key.title(), "other", offset, end))
            offset = end + 1
        if i % 11 == 0:
            mentions.append(Mention(rng.choice(names), "T", "other", -1, -1))  # in every named sentence
        chunks.append(ChunkMentions(f"c{i:03d}", "f", "x" * (offset + 1), mentions))
    parts = [graph_build._Tally() for _ in range(3)]
    for i, c in enumerate(chunks):
        parts[i * 3 // len(chunks)].add(c)
    tally = parts[0]
    for other in parts[1:]:
        tally.merge(other)
    keys = sorted(tally.types.keys() | tally.node_types.keys())
    ids = {key: graph_build.entity_id(key) for key in keys}

    count: Counter[tuple[str, str]] = Counter()
    in_sentences: Counter[str] = Counter()
    pair_chunks: dict[tuple[str, str], list[str]] = defaultdict(list)
    evidence: dict[tuple[str, str], list[dict[str, object]]] = defaultdict(list)
    sentences = 0
    for c in chunks:
        title = {m.key for m in c.mentions if m.sentence_start < 0}
        by_sentence: dict[tuple[int, int], set[str]] = defaultdict(set)
        for m in c.mentions:
            if m.sentence_start >= 0:
                by_sentence[(m.sentence_start, m.sentence_end)].add(m.key)
        for (start, end), present in sorted(by_sentence.items()):
            sentences += 1
            in_sentences.update(present | title)
            for pair in itertools.combinations(sorted(present | title), 2):
                count[pair] += 1
                if c.chunk_id not in pair_chunks[pair]:
                    pair_chunks[pair].append(c.chunk_id)
                if len(evidence[pair]) < graph_build.MAX_EVIDENCE:
                    evidence[pair].append({"chunkId": c.chunk_id, "start": start, "end": end})
    expected = [
        (
            "r-" + content_hash(a, b),
            ids[a],
            ids[b],
            n,
            round(math.log(n * sentences / (in_sentences[a] * in_sentences[b])), 4),
            pair_chunks[(a, b)],
            evidence[(a, b)],
        )
        for (a, b), n in sorted(count.items())
    ]
    relations = tally.relations(ids)
    assert [dataclasses.astuple(r) for r in relations] == expected
    assert max(len(r.evidence) for r in relations) == graph_build.MAX_EVIDENCE
    assert any(len(r.chunk_ids) < r.count for r in relations)  # a pair twice in one chunk
    assert not graph_build._Tally().relations({})


def test_lexicon_names_in_text_without_case_type_their_chunk_but_make_no_node() -> None:
    """A country found in an all-capitals sentence types the chunk (the filter column) but joins no passage
    in the graph; written with capitals, the same name is a node as before. The name tagger's names in the
    same sentence (a person, an organisation) are nodes, as they are written with capitals (format 9)."""
    upper = _chunk("u", "", "THE TREATY WAS SIGNED IN FRANCE BY JOHN SMITH OF THE UNITED NATIONS.")
    lower = _chunk("l", "", "the treaty was signed in france by john smith of the united nations.")
    cased = _chunk("c", "", "The treaty was signed in France by two envoys.")
    found = {("france", "place"), ("john smith", "person"), ("united nations", "organization")}
    assert {(m.key, m.type) for m in upper.mentions} == found
    assert {(m.key, m.type) for m in lower.mentions} == found
    by_key = {e.name.lower(): e for e in build_graph([upper, lower, cased]).entities}
    assert by_key["france"].chunk_ids == ["c"]
    assert sorted(by_key["john smith"].chunk_ids) == ["l", "u"]
    assert sorted(by_key["united nations"].chunk_ids) == ["l", "u"]
    assert "france" not in {e.name.lower() for e in build_graph([upper]).entities}
    # So is a name of the lexicon's that is an ordinary word too, where the tagger is sure of it.
    china = _chunk("x", "", "exports to china rose by ten percent.")
    assert {(m.key, m.type) for m in china.mentions} == {("china", "place")}
    assert "china" not in {e.name.lower() for e in build_graph([china]).entities}
    # And a quoted phrase read as a title there (format 10); with capitals, a quoted title is a node.
    film = _chunk("f", "", 'she starred in the film "the tunnel of love" in 1958.')
    titled = _chunk("t", "", 'She starred in the film "The Tunnel of Love" in 1958.')
    assert ("the tunnel of love", "other") in {(m.key, m.type) for m in film.mentions}
    nodes = {e.name.lower(): e.chunk_ids for e in build_graph([film, titled]).entities}
    assert nodes["the tunnel of love"] == ["t"]


def test_graph_build_relations_evidence_communities(sample_index: Path) -> None:
    path = versions.current_version(sample_index).path / "graph"
    graph, vectors = load_graph(path)
    by_name = {e.name: e for e in graph.entities}
    ibuka, morita = by_name["Masaru Ibuka"], by_name["Akio Morita"]
    rel = next(r for r in graph.relations if {r.source, r.target} == {ibuka.id, morita.id})
    from hybridrag.indexing.stores.tables import CHUNKS, read_version_table

    texts = {r["chunk_id"]: r["text"] for r in read_version_table(path.parent, CHUNKS).to_pylist()}
    ev = rel.evidence[0]
    assert rel.count >= 1 and "Ibuka" in texts[ev["chunkId"]][ev["start"] : ev["end"]]
    assert rel.chunk_ids and set(rel.chunk_ids) <= set(ibuka.chunk_ids)
    assert ibuka.file_ids == ["sony-en.md"]
    community = next(c for c in graph.communities if ibuka.id in c.entity_ids)
    assert morita.id in community.entity_ids and community.title and "Key entities" in community.report
    assert vectors is not None and vectors.shape == (len(graph.communities), 384)
    # Stored once, as the arrays the service maps: no pickle, and no second record beside them.
    assert not (path / "graph.pickle").exists()
    assert not (path / "graph.json.gz").exists() and not (path / "graph.json").exists()
    nxg = graph.to_networkx()
    assert nxg.number_of_nodes() == len(graph.entities) and nxg.number_of_edges() == len(graph.relations)
    assert (
        nxg.nodes[ibuka.id]["community"] == community.id
        and nxg.edges[ibuka.id, morita.id]["weight"] == rel.count
    )


def test_graph_build_is_deterministic(tmp_path: Path) -> None:
    from hybridrag.cli.commands import SAMPLE_CORPUS

    outputs = []
    for name in ("a", "b"):
        IndexBuilder(tmp_path / name, BuildConfig(embedding_model=None)).build(SAMPLE_CORPUS)
        arrays = versions.current_version(tmp_path / name).path / "graph" / "arrays"
        outputs.append({f.name: f.read_bytes() for f in sorted(arrays.iterdir())})
    assert outputs[0] == outputs[1]


def test_title_links_follow_incremental_adds_and_deletes(tmp_path: Path) -> None:
    def write(name: str, doc: dict[str, str]) -> Path:
        folder = tmp_path / name
        folder.mkdir()
        (folder / "d.jsonl").write_text(json.dumps(doc) + "\n", "utf-8")
        return folder

    soundtrack = write(
        "soundtrack",
        {
            "_id": "nbk",
            "title": "Natural Born Killers",
            "text": "The album was produced by Trent Reznor of Nine Inch Nails.",
        },
    )
    reznor = write(
        "reznor",
        {"_id": "tr", "title": "Trent Reznor", "text": "Michael Trent Reznor is an American musician."},
    )
    index_dir = tmp_path / "idx"
    builder = IndexBuilder(index_dir, BuildConfig(embedding_model=None))
    builder.build(soundtrack)

    def reznor_chunks() -> set[str]:
        graph, _ = load_graph(versions.current_version(index_dir).path / "graph")
        entity = next((e for e in graph.entities if e.name == "Trent Reznor"), None)
        return set() if entity is None else set(entity.chunk_ids)

    assert reznor_chunks() == set()  # no page titled "Trent Reznor" yet: nothing to link to
    builder.add(reznor)  # the page arrives later: the earlier document's long name now mentions it
    graph, _ = load_graph(versions.current_version(index_dir).path / "graph")
    entity = next(e for e in graph.entities if e.name == "Trent Reznor")
    assert len(entity.chunk_ids) == 2 and len(entity.title_chunk_ids) == 1
    builder.delete(["tr"])
    assert reznor_chunks() == set()  # the page is gone, and with it the link


def test_deleted_document_leaves_no_trace_in_the_graph(tmp_path: Path) -> None:
    source = jsonl_corpus(
        tmp_path / "src",
        [
            {"_id": "d1", "title": "Sony", "text": "Masaru Ibuka and Akio Morita founded Sony in Tokyo."},
            {"_id": "d2", "title": "Toyota", "text": "Kiichiro Toyoda founded Toyota Motor in Aichi."},
        ],
    )
    index_dir = tmp_path / "idx"
    builder = IndexBuilder(index_dir, BuildConfig(embedding_model=None))
    builder.build(source)
    before, _ = load_graph(versions.current_version(index_dir).path / "graph")
    assert "Masaru Ibuka" in {e.name for e in before.entities}
    builder.delete(["d1"])
    after, _ = load_graph(versions.current_version(index_dir).path / "graph")
    names = {e.name for e in after.entities}
    assert "Masaru Ibuka" not in names and "Akio Morita" not in names and "Kiichiro Toyoda" in names
    dumped = json.dumps([e.chunk_ids for e in after.entities] + [r.chunk_ids for r in after.relations])
    chunk_ids = set(json.loads(json.dumps([c for e in before.entities for c in e.chunk_ids])))
    removed = {c for e in before.entities if e.name == "Masaru Ibuka" for c in e.chunk_ids}
    assert removed <= chunk_ids and not any(c in dumped for c in removed)
    # Adding it back restores it (mentions of kept chunks are reused, new ones extracted).
    builder.add(source)
    again, _ = load_graph(versions.current_version(index_dir).path / "graph")
    assert {e.name for e in again.entities} == {e.name for e in before.entities}


def test_index_without_graph_reports_graph_skipped(tmp_path: Path) -> None:
    from hybridrag.cli.commands import SAMPLE_CORPUS
    from hybridrag.http.app import create_app
    from hybridrag.pipeline.settings import Settings

    IndexBuilder(tmp_path / "idx", BuildConfig(embedding_model=None, graph=False)).build(SAMPLE_CORPUS)
    settings = Settings(
        index_dir=tmp_path / "idx", load_embedder=False, embedding_model="minilm", _env_file=None
    )  # type: ignore[call-arg]
    with TestClient(create_app(settings, wait=True)) as c:
        data = search_json(c, {"text": "Toyota", "options": {"strategies": ["graph"]}})
        assert data["results"] == [] and data["totalCount"] == 0
        assert any(n["stage"] == "graph" and n["status"] == "skipped" for n in data["notes"])
        hybrid = search_json(c, {"text": "Toyota"})
        skipped = {n["stage"] for n in hybrid["notes"] if n["status"] == "skipped"}
        assert {"semantic", "graph"} <= skipped and hybrid["results"]


def test_graph_layout_titles_synonyms_and_incremental_updates(tmp_path: Path, embedder) -> None:  # type: ignore[no-untyped-def]
    """Passages are tied to the entities their titles name; name vectors and synonym edges follow add,
    delete and regraph (vectors reused for entities already embedded, none left for deleted ones)."""
    import numpy as np

    from hybridrag.indexing.builds.graph_build import SYNONYM_NEIGHBOURS, SYNONYM_THRESHOLD, synonym_pairs

    source = tmp_path / "src"
    source.mkdir()
    docs = [
        ("d1", "Toyota Motor Corporation", "Kiichiro Toyoda founded Toyota Motor Corporation in Aichi."),
        (
            "d2",
            "Sakichi Toyoda",
            "Sakichi Toyoda invented the automatic loom. His son Kiichiro Toyoda built cars.",
        ),
        ("d3", "Toyota Motor Corp", "Toyota Motor Corp opened a factory in Kentucky in 1988."),
        ("d4", "Sony", "Masaru Ibuka and Akio Morita founded Sony in Tokyo."),
    ]
    (source / "a.jsonl").write_text(
        "".join(json.dumps({"_id": i, "title": t, "text": x}) + "\n" for i, t, x in docs), "utf-8"
    )
    index_dir = tmp_path / "idx"
    builder = IndexBuilder(
        index_dir, BuildConfig(embedding_model="minilm", graph_synonyms=True), embedder=embedder
    )
    builder.build(source)

    def load() -> tuple[GraphData, np.ndarray]:
        folder = versions.current_version(index_dir).path / "graph"
        graph, _ = load_graph(folder)
        vectors = GraphData.load_entity_vectors(folder)
        assert vectors is not None and vectors.shape == (len(graph.entities), 384)
        return graph, vectors

    graph, vectors = load()
    by_name = {e.name: e for e in graph.entities}
    # The ids an update reuses name vectors by, read without the rest of the graph, in the graph's order.
    from hybridrag.indexing.stores.graph_arrays import entity_ids

    assert entity_ids(versions.current_version(index_dir).path / "graph") == [e.id for e in graph.entities]
    # The passage whose title names an entity is recorded as being about it.
    from hybridrag.indexing.stores.tables import CHUNKS, read_version_table

    doc_of = {
        r["chunk_id"]: r["doc_id"]
        for r in read_version_table(versions.current_version(index_dir).path, CHUNKS).to_pylist()
    }
    assert [doc_of[c] for c in by_name["Sakichi Toyoda"].title_chunk_ids] == ["d2"]
    assert by_name["Kiichiro Toyoda"].title_chunk_ids == []
    # Synonyms are exactly the close pairs of the stored name vectors.
    assert graph.synonyms == synonym_pairs(graph.entities, vectors)
    pair = {by_name["Toyota Motor Corporation"].id, by_name["Toyota Motor Corp"].id}
    assert any({s.source, s.target} == pair for s in graph.synonyms)
    sims = vectors @ vectors.T
    index = {e.id: i for i, e in enumerate(graph.entities)}
    for s in graph.synonyms:
        assert s.similarity >= SYNONYM_THRESHOLD
        assert abs(sims[index[s.source], index[s.target]] - s.similarity) < 1e-3
    for i in range(len(graph.entities)):  # a pair above the threshold among i's nearest is an edge
        for j in np.argsort(-np.where(np.arange(len(sims)) == i, -1, sims[i]))[:SYNONYM_NEIGHBOURS]:
            if sims[i, j] >= SYNONYM_THRESHOLD + 1e-3:
                pair = {graph.entities[i].id, graph.entities[int(j)].id}
                assert any({s.source, s.target} == pair for s in graph.synonyms)
    manifest = versions.current_version(index_dir).manifest
    assert manifest["graph"]["format"] == GRAPH_FORMAT and manifest["graph"]["synonyms"] == len(
        graph.synonyms
    )

    # Delete: no entity, vector or synonym of the deleted document is left.
    builder.delete(["d4"])
    after, after_vectors = load()
    names = {e.name for e in after.entities}
    assert "Masaru Ibuka" not in names and "Sakichi Toyoda" in names
    ids = {e.id for e in after.entities}
    assert all(s.source in ids and s.target in ids for s in after.synonyms)
    # Kept entities keep their vectors (reused, not re-embedded differently).
    old = {e.id: vectors[i] for i, e in enumerate(graph.entities)}
    for i, e in enumerate(after.entities):
        assert np.allclose(after_vectors[i], old[e.id])
    # Add it back: the graph is the one built from scratch.
    builder.add(source)
    again, _ = load()
    assert [e.id for e in again.entities] == [e.id for e in graph.entities]
    assert again.synonyms == graph.synonyms
    # Regraph without synonyms drops them and their vectors; the search still works on the graph.
    IndexBuilder(index_dir, embedder=embedder).regraph(synonyms=False)
    folder = versions.current_version(index_dir).path / "graph"
    plain, _ = load_graph(folder)
    assert plain.synonyms == [] and GraphData.load_entity_vectors(folder) is None
    assert [e.title_chunk_ids for e in plain.entities] == [e.title_chunk_ids for e in graph.entities]


def test_text_without_entities_leaves_the_fusion_as_if_the_graph_were_off(tmp_path: Path, embedder) -> None:  # type: ignore[no-untyped-def]
    """Text in which nothing names anything (lower case, no titles, no name the case-less tagger finds, no
    word or phrase of meaning shared by two passages, so no concept either) gives
    the graph no entity: it must not hand the other retrievers' passages back as its own list (fusing that
    copy would only re-weigh them)."""
    from hybridrag.http.app import create_app
    from hybridrag.pipeline.engine import SearchEngine
    from hybridrag.pipeline.settings import Settings

    docs = tmp_path / "lower"
    docs.mkdir()
    texts = {
        "toyota": "a textile machine maker's son started building cars in 1937; that company became a motor "
        "corporation.",
        "sony": "two engineers opened a radio repair shop in a bombed department store after the war.",
        "rail": "the first high-speed railway line began running in 1964 between two large cities.",
    }
    (docs / "docs.jsonl").write_text(
        "".join(json.dumps({"_id": k, "title": "", "text": v}) + "\n" for k, v in texts.items()), "utf-8"
    )
    index_dir = tmp_path / "idx"
    IndexBuilder(index_dir, BuildConfig(embedding_model="minilm"), embedder=embedder).build(docs)
    assert versions.current_version(index_dir).manifest["graph"]["entities"] == 0
    settings = Settings(index_dir=index_dir, embedding_model="minilm", _env_file=None)  # type: ignore[call-arg]
    with TestClient(create_app(settings, SearchEngine(settings, embedder=embedder), wait=True)) as c:
        query = "Who founded the Toyota Motor Corporation?"  # capitals in the query, none in the corpus
        graph = search_json(c, {"text": query, "options": {"strategies": ["graph"], "rerankEnabled": False}})
        assert graph["results"] == [] and graph["strategies"]["graph"]["resultCount"] == 0
        both = {"rerankEnabled": False, "limit": 5}
        # The fusion is what is tested: no relevance cut (three passages are too few to judge a query by).
        hybrid = search_json(c, {"text": query, "options": both, "filters": {"minRelevance": 0}})
        assert hybrid["strategies"]["graph"]["resultCount"] == 0
        assert "textile machine maker" in hybrid["results"][0]["content"]["text"]


CASINGS: dict[str, Callable[[str], str]] = {"original": str, "lower": str.lower, "upper": str.upper}


@pytest.mark.parametrize("casing", ["lower", "upper"])
def test_title_names_link_passages_in_any_letter_case(tmp_path: Path, casing: str) -> None:
    """A corpus without normal capitalisation links the same passages to the same title entities as the
    original, and a full build and incremental add/delete agree."""
    docs = [
        {"_id": "tr", "title": "Trent Reznor", "text": "Michael Trent Reznor is an American musician."},
        {"_id": "nin", "title": "Nine Inch Nails", "text": "Nine Inch Nails was founded by Trent Reznor."},
        {
            "_id": "nbk",
            "title": "Natural Born Killers",
            "text": "The soundtrack was produced by Trent Reznor. It was released by Nothing Records.",
        },
    ]

    def entity_docs(index_dir: Path) -> dict[str, set[str]]:
        """Entity name -> the documents of the chunks that mention it (chunk ids differ across casings)."""
        from hybridrag.indexing.stores.tables import CHUNKS, read_version_table

        version = versions.current_version(index_dir).path
        doc_of = {r["chunk_id"]: r["doc_id"] for r in read_version_table(version, CHUNKS).to_pylist()}
        graph, _ = load_graph(version / "graph")
        return {e.name.lower(): {doc_of[c] for c in e.chunk_ids} for e in graph.entities}

    def links(recase: Callable[[str], str], names: list[dict[str, str]], folder: str) -> dict[str, set[str]]:
        corpus = tmp_path / folder
        corpus.mkdir()
        (corpus / "d.jsonl").write_text(
            "".join(
                json.dumps({k: recase(v) if k != "_id" else v for k, v in d.items()}) + "\n" for d in names
            ),
            "utf-8",
        )
        index_dir = tmp_path / f"idx-{folder}"
        IndexBuilder(index_dir, BuildConfig(embedding_model=None)).build(corpus)
        return entity_docs(index_dir)

    original = links(str, docs, "original")
    recased = links(CASINGS[casing], docs, casing)
    for title in ("trent reznor", "nine inch nails"):
        assert recased[title] == original[title], title
    assert len(recased["trent reznor"]) == 3  # its page, the band's page and the soundtrack's
    # Incremental: the soundtrack's page first, Trent Reznor's page later, then gone again.
    corpus = tmp_path / f"inc-{casing}"
    index_dir = tmp_path / f"idx-inc-{casing}"
    builder = IndexBuilder(index_dir, BuildConfig(embedding_model=None))
    for i, d in enumerate(docs[::-1]):
        part = corpus / str(i)
        part.mkdir(parents=True)
        recase = CASINGS[casing]
        (part / "d.jsonl").write_text(
            json.dumps({k: recase(v) if k != "_id" else v for k, v in d.items()}) + "\n", "utf-8"
        )
        (builder.build if i == 0 else builder.add)(part)
    assert entity_docs(index_dir) == recased
    builder.delete(["tr"])
    # Without its page the name is no title: what remains is what a full build of the two other pages gives
    # (the case-less tagger reads it as a person's name in both, so it stays as a name, not a title entity).
    assert entity_docs(index_dir) == links(CASINGS[casing], docs[1:], f"rest-{casing}")
    graph, _ = load_graph(versions.current_version(index_dir).path / "graph")
    reznor = [e for e in graph.entities if e.name.lower() == "trent reznor"]
    assert reznor and all(e.type == "person" and not e.title_chunk_ids for e in reznor), reznor


def test_a_chunks_entities_come_from_its_edges_most_mentioned_first(
    client: TestClient, sample_index: Path
) -> None:
    graph, _ = load_graph(versions.current_version(sample_index).path / "graph")
    index = client.app.state.engine.index  # type: ignore[attr-defined]
    loaded = index.retrievers["graph"].graph
    expected: dict[str, list[str]] = {}
    for e in sorted(graph.entities, key=lambda e: (-e.mentions, e.id)):
        for cid in dict.fromkeys(e.chunk_ids):
            expected.setdefault(cid, []).append(e.id)
    assert expected
    community_of = {eid: c.id for c in graph.communities for eid in c.entity_ids}
    relation_of = {frozenset((r.source, r.target)): r for r in graph.relations}
    with_relations = 0
    for cid in index.chunks:
        assert loaded.entities_of(cid) == expected.get(cid, []), cid
        # The result's sources: the first 20 entities, their commonest community, the relations among them
        # that this passage evidences (in pair order), as the response built them from objects.
        own = expected.get(cid, [])[:20]
        counts: dict[str, int] = {}
        for e in own:
            if e in community_of:
                counts[community_of[e]] = counts.get(community_of[e], 0) + 1
        relations: list[str] = []
        for i, a in enumerate(own):
            for b in own[i + 1 :]:
                r = relation_of.get(frozenset((a, b)))
                if r is not None and cid in r.chunk_ids and r.id not in relations:
                    relations.append(r.id)
        community = min(counts, key=lambda c: (-counts[c], c)) if counts else None
        assert loaded.sources_of(cid) == (own, community, relations[:20]), cid
        with_relations += bool(relations)
    assert with_relations
    # A page answered together gives what each passage gives alone, unknown ids included, in order.
    page = [*list(index.chunks)[::3], "no-such-chunk", next(iter(index.chunks))]
    assert loaded.sources_of_many(page) == [loaded.sources_of(c) for c in page]
    assert loaded.sources_of("no-such-chunk") == ([], None, [])
    assert loaded.entities_of("no-such-chunk") == [] and loaded.chunk_node("no-such-chunk") is None


def test_the_mapped_graph_is_the_graph_derived_from_its_json(sample_index: Path, tmp_path: Path) -> None:
    """A version built now maps `graph/arrays`; one written before derives the same arrays in memory."""
    import shutil

    import numpy as np

    from hybridrag.indexing.stores.graph_arrays import FOLDER
    from hybridrag.indexing.stores.graph_index import GraphIndex
    from hybridrag.indexing.stores.mapped import ChunkTable

    version = versions.current_version(sample_index).path
    chunks = ChunkTable(version / "chunks.arrow")
    mapped = GraphIndex.load(version / "graph", chunks)
    # A version from before format 7: its graph is the JSON record, with no arrays beside it.
    import gzip

    old = tmp_path / "graph"
    shutil.copytree(version / "graph", old)
    shutil.rmtree(old / FOLDER)
    record = _legacy_record(load_graph(version / "graph")[0])
    (old / "graph.json.gz").write_bytes(gzip.compress(json.dumps(record).encode("utf-8")))
    derived = GraphIndex.load(old, list(chunks))

    def mapped_from_disk(a: np.ndarray) -> bool:
        base = a
        while isinstance(base, np.ndarray) and base.base is not None:
            base = base.base
        return isinstance(base.obj if isinstance(base, memoryview) else base, mmap.mmap)

    assert mapped_from_disk(mapped.arrays.name_entity) and not mapped_from_disk(derived.arrays.name_entity)
    assert (mapped.transition != derived.transition).nnz == 0
    assert mapped.transition.shape == derived.transition.shape
    for part in ("indptr", "indices", "data"):  # the rows in the same (heaviest-first) order too
        assert np.array_equal(getattr(mapped.transition, part), getattr(derived.transition, part))
    # Every edge is stored both ways: the transition's structure is each node's whole neighbourhood, and
    # no adjacency matrix is stored beside it (graph arrays format 8).
    from scipy import sparse

    t = derived.transition
    pattern = sparse.csr_matrix((np.ones(t.nnz), np.array(t.indices), np.array(t.indptr)), shape=t.shape)
    assert (pattern != pattern.T).nnz == 0
    assert not list((version / "graph" / FOLDER).glob("adjacency.*"))
    # A format-4 version stored the transition transposed: it is turned around when mapped.

    four = tmp_path / "four"
    shutil.copytree(version / "graph", four)
    transposed = sparse.csr_matrix(mapped.transition.T)
    for part in ("data", "indices", "indptr"):
        np.save(four / FOLDER / f"transition.{part}.npy", getattr(transposed, part))
    meta = json.loads((four / FOLDER / "meta.json").read_text("utf-8"))
    (four / FOLDER / "meta.json").write_text(json.dumps({**meta, "format": 4}), "utf-8")
    turned = GraphIndex.load(four, chunks).transition
    for part in ("indptr", "indices", "data"):
        assert np.array_equal(getattr(mapped.transition, part), getattr(turned, part))
    graph, _ = load_graph(version / "graph")
    assert len(mapped.entities) == len(graph.entities) == len(derived.entities)
    for i, e in enumerate(graph.entities):
        assert mapped.entities[i] == e and mapped.entity_index[e.id] == i
        assert mapped.relations_of.get(e.id, []) == derived.relations_of.get(e.id, [])
        assert mapped.community_of.get(e.id) == derived.community_of.get(e.id)
        assert i in mapped.arrays.named(normalize_name(e.name))
    by_id = {e.id: i for i, e in enumerate(graph.entities)}
    for r in graph.relations:
        pair = (min(by_id[r.source], by_id[r.target]), max(by_id[r.source], by_id[r.target]))
        assert mapped.edge_relation.get(pair) == r.id and pair in mapped.edge_relation
        assert mapped.relation_chunks.get(r.id) == frozenset(r.chunk_ids)
    # Each chunk's evidenced relations (what a result's sources read) are the relations that list it.
    listing: dict[int, list[int]] = {}
    for j, r in enumerate(graph.relations):
        for cid in r.chunk_ids:
            listing.setdefault(chunks.row(cid), []).append(j)
    assert listing
    for arrays in (mapped.arrays, derived.arrays):
        starts = arrays.chunk_relations_indptr
        for row in range(len(chunks)):
            assert arrays.chunk_relations_rows[starts[row] : starts[row + 1]].tolist() == listing.get(row, [])
    assert mapped.sources_of_many(list(chunks)) == derived.sources_of_many(list(chunks))
    assert len(mapped.communities) == len(graph.communities) > 0
    for i, c in enumerate(graph.communities):
        assert (
            mapped.communities[i] == c
            and mapped.community_by_id[c.id] == c
            and c.id in mapped.community_by_id
        )
    assert "cm-nope" not in mapped.community_by_id
    assert "e-nope" not in mapped.entity_index and mapped.arrays.named("no such name at all") == []
    for text in ("Who founded Sony?", "Bletchley Park and Alan Turing", "ソニーの創業者"):
        assert mapped.match(text, Analyzer()) == derived.match(text, Analyzer())
    # Names looked up together find what a scan of every entity's forms finds.
    from hybridrag.indexing.stores.graph_arrays import name_forms

    forms = [normalize_name(e.name) for e in graph.entities[:30]] + ["no such name at all"]
    expected = [
        [i for i, e in enumerate(graph.entities) if f in name_forms(e.name, e.aliases)] for f in forms
    ]
    assert [sorted(rows) for rows in mapped.arrays.named_many(forms)] == expected
    heads = mapped.arrays.entity_heads([2, 0, 2])
    assert heads == [
        {"id": e.id, "name": e.name, "type": e.type, "concept": e.concept}
        for e in (graph.entities[i] for i in (2, 0, 2))
    ]
    # A page's sources from the rows it read are the sources looked up by id.
    ids = list(chunks)[:8]
    assert mapped.sources_of_many(ids, rows=chunks.rows(ids).tolist()) == mapped.sources_of_many(ids)


def test_match_by_meaning_takes_the_closest_names_above_the_bar_as_a_full_sort_would() -> None:
    """Entities matched by meaning are the `ENTITY_MATCH_TOP` most similar of those at or above
    `ENTITY_MATCH_MIN`, ties in entity order: what a stable sort of every similarity gave."""
    from types import SimpleNamespace

    from hybridrag.indexing.stores import graph_index as gi

    rng = np.random.default_rng(0)
    for _ in range(30):
        n = int(rng.integers(1, 400))
        vectors = rng.standard_normal((n, 8)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        query = vectors[int(rng.integers(0, n))] + rng.normal(0, 0.1, 8).astype(np.float32)
        query /= np.linalg.norm(query)
        vectors[rng.integers(0, n, size=3)] = query  # ties at the top
        sims = vectors @ query
        expected = [int(i) for i in np.argsort(-sims, kind="stable")[: gi.ENTITY_MATCH_TOP]]
        expected = [i for i in expected if sims[i] >= gi.ENTITY_MATCH_MIN]
        graph = SimpleNamespace(entity_vectors=vectors)
        assert gi.GraphIndex.match_by_meaning(graph, query) == expected  # type: ignore[arg-type]
        assert expected


def test_japanese_node_only_names_survive_an_incremental_add_as_a_full_build_makes_them(
    tmp_path: Path,
) -> None:
    """The rules' names the Japanese tagger bounded otherwise are stored as node-only mentions: an add
    (which reads the earlier chunks' mentions from the table) gives the graph and the filter columns a full
    build gives."""
    from hybridrag.indexing.stores.tables import CHUNKS, MENTIONS, read_mentions, read_version_table

    docs = [
        {"_id": "a", "title": "結成", "text": "日本労働組合総同盟が結成された。"},
        {"_id": "b", "title": "工場", "text": "王子製紙釧路工場で働いた。"},
    ]

    full = tmp_path / "full"
    IndexBuilder(full, BuildConfig(embedding_model=None)).build(jsonl_corpus(tmp_path / "both", docs))
    step = tmp_path / "step"
    builder = IndexBuilder(step, BuildConfig(embedding_model=None))
    builder.build(jsonl_corpus(tmp_path / "first", docs[:1]))
    builder.add(jsonl_corpus(tmp_path / "second", docs[1:]))

    def state(index_dir: Path) -> tuple[set[tuple[str, str]], dict[str, list[str]], set[tuple[str, bool]]]:
        path = versions.current_version(index_dir).path
        graph, _ = load_graph(path / "graph")
        table = read_version_table(path, CHUNKS)
        types = dict(
            zip(table.column("doc_id").to_pylist(), table.column("entity_types").to_pylist(), strict=True)
        )
        ids = set(table.column("chunk_id").to_pylist())
        stored = {(m.surface, m.node_only) for ms in read_mentions(path / MENTIONS, ids).values() for m in ms}
        return {(e.name, e.type) for e in graph.entities}, types, stored

    assert state(step) == state(full)
    entities, types, stored = state(full)
    assert ("日本", "place") in entities and ("日本", True) in stored  # a node, from a node-only mention
    assert ("王子製紙釧路", True) in stored and ("王子製紙", False) in stored
    assert "place" not in types["a"]  # 日本 types nothing: the tagger's name is an organisation


def test_derived_mention_edges_and_relation_lists_match_references_by_id() -> None:
    """`GraphArrays.derive` reads the mentions' and relations' chunk ids as dictionary-encoded arrays (each
    id looked up once); the edges and lists it makes are those of a lookup per id, one at a time."""
    from scipy import sparse

    from hybridrag.indexing.stores.graph import Entity, Relation
    from hybridrag.indexing.stores.graph_arrays import GraphArrays, shared_strings
    from hybridrag.indexing.stores.graph_order import ListOrder, list_rows
    from hybridrag.indexing.stores.graph_weights import mention_weights

    rng = np.random.default_rng(7)
    chunk_ids = [f"c{i}" for i in range(40)]
    order = ListOrder(chunk_ids)
    entities = []
    for i in range(25):
        # Chunks the order lacks ("gone…") are left out, as chunks deleted since the graph was built.
        held = [chunk_ids[j] for j in sorted(rng.choice(40, size=int(rng.integers(1, 9)), replace=False))]
        mentioned = held + (["gone-" + str(i)] if i % 4 == 0 else [])
        titled = [c for c in mentioned if rng.random() < 0.3] + (["gone-t"] if i % 5 == 0 else [])
        entities.append(
            Entity(
                f"e{i:02d}",
                f"name {i}",
                "other",
                len(mentioned),
                mentioned,
                ["f"],
                "",
                [],
                titled,
                article=i % 3 == 0,
                concept=i % 2 == 1,
            )
        )
    relations = []
    for j in range(30):
        a, b = sorted(rng.choice(25, size=2, replace=False))
        chunks = [chunk_ids[k] for k in rng.choice(40, size=3, replace=False)] + (
            ["gone"] if j % 6 == 0 else []
        )
        # Counts repeat: ties are broken by the relation's id.
        relations.append(
            Relation(
                f"r{(j * 7) % 30:02d}", f"e{a:02d}", f"e{b:02d}", int(rng.integers(1, 4)), 0.0, chunks, []
            )
        )
    graph = GraphData(entities, relations, [])
    arrays = GraphArrays.derive(graph, order)
    index = {e.id: i for i, e in enumerate(entities)}

    # Each entity's relations: most frequent first, then by id, each under its source and its target.
    ranked = sorted(range(len(relations)), key=lambda j: (-relations[j].count, relations[j].id))
    for e in entities:
        rows = arrays.relations_rows[
            arrays.relations_indptr[index[e.id]] : arrays.relations_indptr[index[e.id] + 1]
        ]
        assert rows.tolist() == [j for j in ranked if e.id in (relations[j].source, relations[j].target)]
    # Each chunk's relations, ascending.
    for row, cid in enumerate(chunk_ids):
        rows = arrays.chunk_relations_rows[
            arrays.chunk_relations_indptr[row] : arrays.chunk_relations_indptr[row + 1]
        ]
        assert rows.tolist() == [j for j, r in enumerate(relations) if cid in r.chunk_ids]
    # The mention edges: both weights of every mention of a held chunk, as a lookup per id gives them.
    ne, n = len(entities), len(entities) + len(chunk_ids)
    ents, chunks, about, article, concept = [], [], [], [], []
    for i, e in enumerate(entities):
        for cid in e.chunk_ids:
            if cid in chunk_ids:
                ents.append(i)
                chunks.append(ne + chunk_ids.index(cid))
                about.append(cid in e.title_chunk_ids)
                article.append(e.article)
                concept.append(e.concept)
    df = np.bincount(ents, minlength=ne).astype(np.float64)
    to_chunk, to_entity = mention_weights(
        np.array(about), np.array(article), np.array(concept), df[ents], len(chunk_ids)
    )
    expected = sparse.csr_matrix(
        (np.r_[to_entity, to_chunk], (np.r_[chunks, ents], np.r_[ents, chunks])), shape=(n, n)
    ).toarray()
    for r in relations:
        a, b = index[r.source], index[r.target]
        expected[a, b] += 0.3 * r.count
        expected[b, a] += 0.3 * r.count
    out = expected.sum(axis=1, keepdims=True)
    expected = np.divide(expected, out, out=np.zeros_like(expected), where=out > 0)  # a chunk no one names
    assert np.allclose(arrays.transition.toarray(), expected, atol=1e-6)

    # The lists themselves: encoded or not, null lists empty, ids the order lacks at -1.
    column = pa.chunked_array([pa.array([["c3", "x", "c3"], None, [], ["c0"]], pa.list_(pa.string()))])
    encoded = shared_strings(pa.table({"ids": column}), ["ids"]).column("ids")
    for lists in (column, encoded):
        lengths, rows = list_rows(lists, order)
        assert lengths.tolist() == [3, 0, 0, 1] and rows.tolist() == [3, -1, 3, 0]


def test_heaviest_first_orders_each_rows_summed_entries_by_weight_then_column() -> None:
    """Rows given with their columns out of order and repeated (as a product or a sum of edges leaves
    them), weights tied or not: each row holds its summed entries, heaviest first, ties by column."""
    from scipy import sparse

    from hybridrag.indexing.stores.graph_weights import heaviest_first

    rng = np.random.default_rng(3)
    for trial in range(40):
        n = int(rng.integers(1, 60))
        indptr = np.concatenate([[0], np.cumsum(rng.integers(0, 12, n))])
        indices = rng.integers(0, n, int(indptr[-1]))
        # Few distinct weights on even trials: many ties, some made by summing repeated entries.
        data = rng.choice([0.25, 0.5, 1.0], indptr[-1]) if trial % 2 == 0 else rng.random(indptr[-1])
        given = sparse.csr_matrix((data, indices, indptr), shape=(n, n))
        for m in (given, sparse.diags(rng.random(n) + 0.5) @ given):
            summed = m.toarray()
            out = heaviest_first(m)
            for u in range(n):
                cols = out.indices[out.indptr[u] : out.indptr[u + 1]].tolist()
                weights = out.data[out.indptr[u] : out.indptr[u + 1]].tolist()
                want = sorted(((-w, c) for c, w in enumerate(summed[u]) if w != 0))
                assert [(-w, c) for w, c in zip(weights, cols, strict=True)] == want, (trial, u)
