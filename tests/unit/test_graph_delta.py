"""Passages written after the graph was built, linked to it until a merge (`stores.graph_delta`): each link
weighs what the merged graph gives the same mention, the walk reaches them through the graph's entities and
through names the graph does not hold yet, filters and deletions hold, and merges carry the links of writes
they did not take."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from conftest import jsonl_corpus

from hybridrag.indexing.builds.build import BuildConfig, IndexBuilder
from hybridrag.indexing.builds.merge import GraphMerge
from hybridrag.indexing.builds.stages import no_progress
from hybridrag.indexing.documents.sources import Document
from hybridrag.indexing.models.embedders import NO_EMBEDDING_MODEL
from hybridrag.indexing.stores import versions
from hybridrag.indexing.stores.filters import ChunkFilters
from hybridrag.indexing.stores.graph_delta import DELTA, read_delta
from hybridrag.pipeline.loaded_index import LoadedIndex, load_index
from hybridrag.pipeline.retrievers import RetrievalQuery

NO_MODEL = BuildConfig(embedding_model=None)

BASE = [
    {"_id": "toyota", "title": "Toyota", "text": "Kiichiro Toyoda founded Toyota Motor in Aichi in 1937."},
    {
        "_id": "school",
        "title": "",
        "text": "Kiichiro Toyoda studied engineering at Tokyo Imperial University.",
    },
    {"_id": "honda", "title": "Honda", "text": "Soichiro Honda founded Honda Motor in Hamamatsu in 1948."},
]
RETIRED = Document(doc_id="retired", file_id="news", title="", text="Kiichiro Toyoda retired quietly.")
NINTENDO = Document(
    doc_id="nintendo", file_id="api", title="Nintendo", text="Fusajiro Yamauchi founded Nintendo in Kyoto."
)


def _loaded(index_dir: Path) -> LoadedIndex:
    return load_index(index_dir, NO_EMBEDDING_MODEL, None)


def _chunk_of(index: LoadedIndex, doc_id: str) -> str:
    return next(c.chunk_id for c in index.chunks.of_doc(doc_id))


def _graph_hits(index: LoadedIndex, text: str, filters: ChunkFilters | None = None) -> list[str]:
    retriever = index.graph_retriever
    assert retriever is not None
    found = retriever.retrieve(RetrievalQuery(text, filters or ChunkFilters()), 10)
    return [c.id for c in found.candidates if c.kind == "chunk"]


def test_a_link_weighs_what_the_merged_graph_gives_the_same_mention(tmp_path: Path) -> None:
    """A passage that mentions one entity of the graph alone (no title, no other name in its sentence) adds
    one edge and nothing else: its share of the entity's out-weight is the merged graph's transition
    probability along that edge, to rounding."""
    index_dir = tmp_path / "index"
    builder = IndexBuilder(index_dir, NO_MODEL)
    builder.build(jsonl_corpus(tmp_path / "src", BASE))
    builder.apply([RETIRED], [], defer_graph=True)
    before = _loaded(index_dir)
    retriever = before.graph_retriever
    assert retriever is not None and retriever.delta is not None
    delta, graph = retriever.delta, retriever.graph
    assert delta.ids == [_chunk_of(before, "retired")]
    toyoda = graph.arrays.entities.column("name").to_pylist().index("Kiichiro Toyoda")
    links = dict(zip(delta.entity.tolist(), delta.share.tolist(), strict=True))
    assert toyoda in links
    # The graph's walk finds the new passage through Kiichiro Toyoda, before any merge.
    assert delta.ids[0] in _graph_hits(before, "Kiichiro Toyoda")

    assert builder.merge_graph() is not None
    after = _loaded(index_dir)
    assert after.graph is not None and not after.graph.lagging
    node = after.graph.chunk_node(delta.ids[0])
    assert node is not None
    merged_toyoda = after.graph.arrays.entity_row(graph.arrays.entity_id(toyoda))
    assert merged_toyoda is not None
    p = after.graph.transition
    row = slice(p.indptr[merged_toyoda], p.indptr[merged_toyoda + 1])
    merged = dict(zip(p.indices[row].tolist(), p.data[row].tolist(), strict=True))
    assert np.isclose(links[toyoda], merged[node], rtol=1e-9)
    # The passage -> entity edge is there too, with the weight a build gives a plain name.
    q_row = slice(p.indptr[node], p.indptr[node + 1])
    assert merged_toyoda in p.indices[q_row].tolist()
    assert delta.outward[delta.entity.tolist().index(toyoda)] == 1.0


def _check_entity_table_rows(index: LoadedIndex) -> None:
    """A graph built for an earlier table maps each entity's chunks to the table's rows as its ids do."""
    graph = index.graph
    assert graph is not None and graph.lagging
    for row, entity in enumerate(graph.arrays.entities.to_pylist()):
        assert graph.entity_table_rows(row).tolist() == index.chunks.rows(entity["chunk_ids"]).tolist()


def test_new_names_filters_deletions_and_merges_hold_for_linked_passages(tmp_path: Path) -> None:
    index_dir = tmp_path / "index"
    builder = IndexBuilder(index_dir, NO_MODEL)
    builder.build(jsonl_corpus(tmp_path / "src", BASE))
    builder.apply([NINTENDO, RETIRED], [], defer_graph=True)
    index = _loaded(index_dir)
    nintendo, retired = _chunk_of(index, "nintendo"), _chunk_of(index, "retired")
    freshness = index.graph_freshness()
    assert freshness is not None and freshness["chunksAhead"] == 2 and freshness["chunksLinked"] == 2
    _check_entity_table_rows(index)

    # A name only the new passage holds ("Fusajiro Yamauchi") leads the walk to it; a filter on another
    # file rules it out, one on its own file keeps it; the same for the graph's own names.
    assert _graph_hits(index, "Fusajiro Yamauchi")[:1] == [nintendo]
    assert _graph_hits(index, "Fusajiro Yamauchi", ChunkFilters(file_ids=["news"])) == []
    assert _graph_hits(index, "Fusajiro Yamauchi", ChunkFilters(file_ids=["api"]))[:1] == [nintendo]
    assert retired in _graph_hits(index, "Kiichiro Toyoda")
    assert retired not in _graph_hits(index, "Kiichiro Toyoda", ChunkFilters(file_ids=["api"]))

    # Deleting a linked passage drops its links with it (the graph never returns it).
    builder.apply([], ["nintendo"], defer_graph=True)
    index = _loaded(index_dir)
    links = read_delta(index.version.path / "graph")
    assert nintendo not in set(links.column("chunk_id").to_pylist())
    assert nintendo not in _graph_hits(index, "Fusajiro Yamauchi")
    assert retired in _graph_hits(index, "Kiichiro Toyoda")
    _check_entity_table_rows(index)

    # A merge that took the version before a write attaches its graph with the write's links kept (the
    # merged graph does not hold that passage); the passages it merged are its own nodes now.
    merge = GraphMerge.take(index_dir, lambda _config: None, no_progress)
    assert merge is not None
    try:
        merge.build()
        builder.apply([NINTENDO], [], defer_graph=True)
        assert merge.attach() is not None
    finally:
        merge.discard()
    index = _loaded(index_dir)
    assert index.graph is not None and index.graph.chunk_node(retired) is not None
    retriever = index.graph_retriever
    assert retriever is not None and retriever.delta is not None
    assert retriever.delta.ids == [_chunk_of(index, "nintendo")]
    assert _graph_hits(index, "Fusajiro Yamauchi")[:1] == [_chunk_of(index, "nintendo")]
    # The next merge takes it, and no link is left waiting.
    assert builder.merge_graph() is not None
    current = versions.current_version(index_dir)
    assert not (current.path / "graph" / DELTA).exists()
    index = _loaded(index_dir)
    assert index.graph_retriever is not None and index.graph_retriever.delta is None
    assert _graph_hits(index, "Fusajiro Yamauchi")[:1] == [_chunk_of(index, "nintendo")]


def test_a_title_that_makes_an_entity_an_article_sends_it_what_the_merged_graph_does(tmp_path: Path) -> None:
    """A new passage whose whole title is a name of the graph makes that name an article once merged: every
    passage that mentions it then leads to it 1 + ARTICLE_WEIGHT, not 1. Before the merge the walk's
    passages send it the difference (`graph_walk.article_inflow`), as the merged transition says."""
    from hybridrag.pipeline.graph_walk import DAMPING, article_inflow

    index_dir = tmp_path / "index"
    builder = IndexBuilder(index_dir, NO_MODEL)
    builder.build(jsonl_corpus(tmp_path / "src", BASE))
    about = Document(
        doc_id="kiichiro", file_id="api", title="Kiichiro Toyoda", text="He was born in Kariya in 1894."
    )
    builder.apply([about], [], defer_graph=True)
    before = _loaded(index_dir)
    retriever = before.graph_retriever
    assert retriever is not None and retriever.delta is not None
    delta, graph = retriever.delta, retriever.graph
    toyoda = graph.arrays.entities.column("name").to_pylist().index("Kiichiro Toyoda")
    assert delta.became.tolist() == [toyoda]
    school = graph.chunk_node(_chunk_of(before, "school"))
    assert school is not None
    p = graph.transition
    row = slice(p.indptr[school], p.indptr[school + 1])
    step = dict(zip(p.indices[row].tolist(), p.data[row].tolist(), strict=True))[toyoda]
    nodes, mass = np.array([school]), np.array([1.0])
    gained = article_inflow(graph, delta.became, delta.became_out, nodes, mass)

    assert builder.merge_graph() is not None
    after = _loaded(index_dir)
    assert after.graph is not None
    merged = after.graph
    node = merged.chunk_node(_chunk_of(before, "school"))
    merged_toyoda = merged.arrays.entity_row(graph.arrays.entity_id(toyoda))
    assert node is not None and merged_toyoda is not None and merged.arrays.entity(merged_toyoda).article
    q = merged.transition
    row = slice(q.indptr[node], q.indptr[node + 1])
    merged_step = dict(zip(q.indices[row].tolist(), q.data[row].tolist(), strict=True))[merged_toyoda]
    assert merged_step > 2 * step
    # To a percent: the passage's concept edges weigh a little more in the merged graph (their idf counts
    # one more passage), which the step before the merge cannot know.
    assert np.isclose(gained[0], DAMPING * (merged_step - step), rtol=0.02)


def test_a_stream_of_writes_is_merged_once_a_share_of_the_passages_waits(tmp_path: Path) -> None:
    """Writes that never pause leave the graph behind only so far: once the passages waiting for it are
    `merge_share` of the index, the merger merges while writes go on; without a share, only a pause does."""
    from hybridrag.indexing.builds.merge import graph_behind, pending_share
    from hybridrag.schemas.documents import DocumentIn
    from hybridrag.writes.writer import DocumentWriter

    index_dir = tmp_path / "index"
    rows = [{"_id": f"d{i}", "title": "", "text": f"Kiichiro Toyoda wrote memo {i}."} for i in range(18)]
    IndexBuilder(index_dir, NO_MODEL).build(jsonl_corpus(tmp_path / "src", rows))
    # Writes never pause for an hour here: only the share can start a merge.
    writer = DocumentWriter(index_dir, merge_after_s=3600, merge_share=0.1, tasks_dir=tmp_path / "tasks")
    patient = DocumentWriter(index_dir, merge_after_s=3600, merge_share=None, tasks_dir=tmp_path / "other")

    def write(who: DocumentWriter, *ids: str) -> None:
        who.submit_documents([DocumentIn(id=i, text=f"Kiichiro Toyoda signed {i}.") for i in ids])
        assert who.run_once() == 1

    write(writer, "n1")
    assert 0 < pending_share(versions.current_version(index_dir)) < 0.1 and not writer.merge_due()
    write(writer, "n2", "n3")
    assert pending_share(versions.current_version(index_dir)) >= 0.1 and writer.merge_due()
    write(patient, "n4")
    assert not patient.merge_due()  # as far behind, but no pause and no share to merge at

    assert writer.merge_once() is not None
    current = versions.current_version(index_dir)
    assert not graph_behind(current) and pending_share(current) == 0.0
    write(writer, "n5")
    assert not writer.merge_due()
