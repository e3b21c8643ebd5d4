"""Graph retrieval through the service: community reports, filters on every strategy, names in both
languages, the walk's explanations and the rows a graph result reads (the build: test_graph.py; the walk
itself: test_graph_walk.py)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from conftest import search_json
from fastapi.testclient import TestClient

from hybridrag.indexing.stores import versions
from hybridrag.indexing.stores.graph_arrays import load_graph


def test_global_query_returns_community_reports(client: TestClient) -> None:
    data = search_json(
        client,
        {
            "text": "overview of the main themes of Japanese companies",
            "type": "global",
            "options": {"strategies": ["graph"], "limit": 10},
        },
    )
    communities = [r for r in data["results"] if r["type"] == "community"]
    assert communities
    c = communities[0]
    assert c["sources"]["communityId"] == c["id"] and c["sources"]["entityIds"] and c["content"]["text"]


def test_entity_type_filter_applies_to_every_strategy(client: TestClient) -> None:
    data = search_json(
        client,
        {
            "text": "Toyoda",
            "filters": {"entityTypes": ["place"], "minRelevance": 0},
            "options": {"limit": 50},
        },
    )
    assert data["results"]
    for r in data["results"]:
        if r["type"] == "entity":
            assert r["metadata"]["entityType"] == "place"
    none = search_json(
        client, {"text": "Toyoda", "filters": {"entityTypes": ["no-such-type"], "minRelevance": 0}}
    )
    assert none["results"] == [] and none["totalCount"] == 0


def test_entity_results_under_filters_are_the_same_whatever_is_ordered_first(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The graph orders its best `ENTITY_CANDIDATES` entities first and all of them only when the filters
    pass too few: ordering one first (so every filtered search goes on to the whole order) gives the same
    lists as ordering them all."""
    from hybridrag.pipeline import graph_retriever as gr
    from hybridrag.schemas.search import SearchRequest

    engine = client.app.state.engine  # type: ignore[attr-defined]
    requests = [
        SearchRequest.model_validate(
            {
                "text": text,
                "filters": {"entityTypes": types, "minRelevance": 0},
                "options": {"strategies": ["graph"]},
            }
        )
        for text in ("Toyoda and the looms", "Masaru Ibuka and Akio Morita", "Marie Curie radium")
        for types in (["person"], ["organization"], ["place", "other"])
    ]

    def lists() -> list[list[tuple[str, float]]]:
        return [
            [(c.id, c.score) for c in engine.rank(r).retrieved["graph"].candidates if c.kind == "entity"]
            for r in requests
        ]

    whole = lists()
    monkeypatch.setattr(gr, "ENTITY_CANDIDATES", 1)
    assert lists() == whole
    assert sum(len(found) for found in whole) >= 6


def test_file_filter_applies_to_graph_results(client: TestClient) -> None:
    data = search_json(
        client,
        {
            "text": "Masaru Ibuka and Akio Morita",
            "filters": {"fileIds": ["toyota-en.md"], "minRelevance": 0},
            "options": {"strategies": ["graph"], "limit": 50},
        },
    )
    for r in data["results"]:
        files = [r["sources"]["fileId"]] if r["type"] == "chunk" else r["metadata"]["fileIds"]
        assert "toyota-en.md" in files


@pytest.mark.parametrize("query", ["Sakichi Toyoda", "豊田佐吉"])
def test_graph_matches_entities_in_both_languages(client: TestClient, query: str) -> None:
    data = search_json(client, {"text": query, "options": {"strategies": ["graph"], "limit": 5}})
    assert data["results"], data["notes"]


def _reference_passes(chunk, date, filters) -> bool:  # type: ignore[no-untyped-def]
    """The filter rules written out one chunk at a time (what the vectorised mask must agree with)."""
    if filters.file_ids is not None and chunk.file_id not in filters.file_ids:
        return False
    if filters.chunk_ids is not None and chunk.chunk_id not in filters.chunk_ids:
        return False
    if filters.entity_types is not None and not set(chunk.entity_types) & set(filters.entity_types):
        return False
    if filters.date_start is not None or filters.date_end is not None:
        if date is None:
            return False
        if filters.date_start is not None and date < filters.date_start:
            return False
        if filters.date_end is not None and date > filters.date_end:
            return False
    return True


def test_vectorised_graph_filter_mask_agrees_with_the_rules(client: TestClient) -> None:
    from datetime import datetime

    from hybridrag.indexing.stores.filters import ChunkFilters, parse_date

    index = client.app.state.engine.index  # type: ignore[attr-defined]
    retriever = index.retrievers["graph"]
    ids = [retriever.graph.chunks.id_at(i) for i in range(len(retriever.graph.chunks))]
    assert ids == list(index.chunks)  # the graph's chunk nodes are the chunk table's rows
    chunks = index.chunks
    dates = {cid: parse_date(index.documents[c.doc_id].date) for cid, c in chunks.items()}
    some_file = chunks[ids[0]].file_id
    cases = [
        ChunkFilters(file_ids=[some_file, "no-such-file"]),
        ChunkFilters(file_ids=[]),
        ChunkFilters(entity_types=["person"]),
        ChunkFilters(entity_types=["place", "organization"]),
        ChunkFilters(entity_types=[]),
        ChunkFilters(chunk_ids=[ids[0], ids[-1], "c-missing"]),
        ChunkFilters(date_start=datetime(1900, 1, 1), date_end=datetime(1960, 12, 31)),
        ChunkFilters(date_start=datetime(1950, 1, 1)),
        ChunkFilters(date_end=datetime(1950, 1, 1), entity_types=["person"], file_ids=[some_file]),
    ]
    for filters in cases:
        mask = retriever._mask(filters)
        expected = [_reference_passes(chunks[c], dates.get(c), filters) for c in ids]
        assert mask.tolist() == expected, filters
    assert any(retriever._mask(cases[6])) and not all(retriever._mask(cases[6]))


def test_graph_hits_explain_the_walk_that_reached_them(client: TestClient, sample_index: Path) -> None:
    graph, _ = load_graph(versions.current_version(sample_index).path / "graph")
    relations = {r.id: r for r in graph.relations}
    entities = {e.id: e for e in graph.entities}
    body = {
        "text": "Who founded Sony?",
        "options": {"strategies": ["graph"], "limit": 10},
        "filters": {"minRelevance": 0},
    }
    data = client.post("/v1/search", json=body).json()
    semantic = client.post("/v1/search", json={**body, "options": {"strategies": ["semantic"], "limit": 3}})
    seed_passages = {r["id"] for r in semantic.json()["results"]}
    paths = [(r, r["metadata"]["graphPath"]) for r in data["results"] if r["metadata"].get("graphPath")]
    assert len(paths) >= 3
    assert any(len(p) >= 3 for _, p in paths), "some hit was reached through an entity"
    seeds = set()
    for result, path in paths:
        seed, *rest = path
        assert seed["seed"] is True
        # A walk starts at an entity the query names or at one of the top dense passages.
        assert (seed["type"] == "entity" and seed["name"] == "Sony") or (
            seed["type"] == "chunk" and seed["id"] in seed_passages
        ), seed
        seeds.add(seed["type"])
        previous = seed
        for step in rest:
            assert step["via"] == previous["id"]
            if step["edge"] == "relation":  # a stored relation between the two entities
                relation = relations[step["relationId"]]
                assert {relation.source, relation.target} == {previous["id"], step["id"]}
            else:  # a passage and an entity it mentions, in either direction
                assert step["edge"] == "mentions"
                entity, chunk = (step, previous) if step["type"] == "entity" else (previous, step)
                assert entity["type"] == "entity" and chunk["type"] == "chunk"
                assert chunk["id"] in entities[entity["id"]].chunk_ids
            previous = step
        assert previous["id"] == result["id"]
    assert seeds == {"entity", "chunk"}, "both kinds of seed reach results"
    # Keyword-only hits carry no graph path.
    keyword = client.post("/v1/search", json={**body, "options": {"strategies": ["keyword"]}}).json()
    assert all("graphPath" not in r["metadata"] for r in keyword["results"])


def test_a_graph_results_rows_are_read_cut_to_their_heads(sample_index: Path, client: TestClient) -> None:
    """Entity and community rows as results show them: each list its first `LIST_HEAD` ids of the whole row's
    list, its length beside it, and under a file filter only the ids that passed; the search's community
    and entity results carry them."""
    from hybridrag.indexing.stores import graph_arrays as ga
    from hybridrag.indexing.stores.graph_index import GraphIndex
    from hybridrag.indexing.stores.mapped import ChunkTable

    version = versions.current_version(sample_index).path
    arrays = GraphIndex.load(version / "graph", ChunkTable(version / "chunks.arrow")).arrays
    for table in (arrays.entities, arrays.communities):
        full = table.to_pylist()
        files = sorted({f for row in full for f in row["file_ids"]})
        assert len(files) > 2 and max(len(row["chunk_ids"]) for row in full) > 2
        for row, whole in enumerate(full):
            for keep in (None, {"file_ids": files[::2]}, {"file_ids": []}):
                for head in (ga.LIST_HEAD, 2, None):
                    got = ga._row_head(table, row, keep, head)
                    for name, value in whole.items():
                        if not isinstance(value, list):
                            assert got[name] == value
                            continue
                        wanted = (
                            value
                            if keep is None or name not in keep
                            else [v for v in value if v in keep[name]]
                        )
                        assert got[name] == wanted[:head] and got[f"{name}_count"] == len(wanted)
    assert arrays.entity_head(0) == ga._row_head(arrays.entities, 0)
    assert arrays.community_head(0) == ga._row_head(arrays.communities, 0, head=ga.LIST_HEAD)
    for row, whole in enumerate(arrays.communities.to_pylist()):
        assert arrays.row_chunk_ids("communities", row) == whole["chunk_ids"]
    # A filter's test of a community reads its chunks as dictionary codes: the same answer as its ids.
    graph = GraphIndex.load(version / "graph", ChunkTable(version / "chunks.arrow"))
    assert graph.arrays.chunk_codes("communities", 0) is not None
    assert graph.arrays.communities.num_rows >= 2

    def two_batches(table: pa.Table) -> pa.Table:
        return pa.concat_tables([table.slice(0, 1), table.slice(1)])

    chunked = dataclasses.replace(
        graph,
        arrays=dataclasses.replace(
            graph.arrays,
            communities=two_batches(graph.arrays.communities),
            entities=two_batches(graph.arrays.entities),
        ),
        _dictionary_nodes={},
    )
    assert chunked.arrays.chunk_codes("communities", 0) is None
    assert chunked.arrays.chunk_codes("entities", 0) is None
    # An entity's chunks as table rows, in its order, from the codes and (batches) from the ids alike.
    for row, whole in enumerate(arrays.entities.to_pylist()):
        wanted = graph.chunks.rows(whole["chunk_ids"]).tolist()
        assert graph.entity_table_rows(row).tolist() == wanted
        assert chunked.entity_table_rows(row).tolist() == wanted
    rng = np.random.default_rng(0)
    answers = set()
    for share in (0.0, 0.02, 0.1, 0.5, 1.0):
        for _ in range(5):
            mask = rng.random(graph.arrays.chunk_count) < share
            for row, whole in enumerate(arrays.communities.to_pylist()):
                nodes = graph.chunks.rows(whole["chunk_ids"])
                wanted = bool(mask[nodes[nodes >= 0]].any())
                assert graph.community_passes(row, mask) == wanted
                answers.add(wanted)
                # A table read as several record batches (a dictionary each) is tested by its ids.
                assert chunked.community_passes(row, mask) == wanted
    assert answers == {True, False}
    body = {"text": "Sony and Toyota", "type": "global", "options": {"strategies": ["graph"], "limit": 50}}
    kinds = {r["type"]: r["metadata"] for r in search_json(client, body)["results"] if r["type"] != "chunk"}
    assert set(kinds) == {"entity", "community"}
    community = kinds["community"]
    assert 0 < len(community["chunkIds"]) == min(ga.LIST_HEAD, community["chunks"])
    assert len(community["fileIds"]) <= community["files"]
    body["filters"] = {"fileIds": ["toyota-en.md"], "minRelevance": 0}
    reports = [r for r in search_json(client, body)["results"] if r["type"] == "community"]
    assert reports and all(r["metadata"]["fileIds"] == ["toyota-en.md"] for r in reports)
    assert all(r["metadata"]["files"] == 1 for r in reports)
    # An entity under the filter lists its chunks from the files that passed, in its own order.
    chunk_files = {
        c["chunk_id"]: c["file_id"] for c in ChunkTable(version / "chunks.arrow").table.to_pylist()
    }
    rows = {e["id"]: e for e in arrays.entities.to_pylist()}
    entities = [r for r in search_json(client, body)["results"] if r["type"] == "entity"]
    assert entities
    for r in entities:
        wanted = [c for c in rows[r["id"]]["chunk_ids"] if chunk_files.get(c) == "toyota-en.md"]
        assert r["metadata"]["chunkIds"] == wanted[: ga.LIST_HEAD] and r["metadata"]["fileIds"] == [
            "toyota-en.md"
        ]


def test_the_fused_list_takes_the_graphs_neighbours_support_unless_the_graph_leads(
    client: TestClient,
) -> None:
    """With the graph fused under a minority of the weight, the hybrid's order is the weighted RRF's pulled
    by `fusion.regularized` with the graph's support at share 0.2 x (1 - its weight share); where the graph
    carries half the weight or more, or under plain RRF, the fused list is the RRF's as it is."""
    from hybridrag.pipeline import fusion
    from hybridrag.pipeline.fusion import list_evidence, regularized, weighted_rrf
    from hybridrag.schemas.search import SearchRequest

    engine = client.app.state.engine  # type: ignore[attr-defined]

    def ranked(
        weights: dict[str, float], strategies: list[str], fusion_name: str = "score-rrf"
    ) -> tuple[list[tuple[str, float]], Any]:
        request = SearchRequest.model_validate(
            {
                "text": "Sony Walkman portable music player",
                "filters": {"minRelevance": 0},
                "options": {"strategies": strategies, "weights": weights, "limit": 50},
                "fusion": fusion_name,
            }
        )
        ranking = engine.rank(request)
        return [(f.id, f.score) for f in ranking.kept], ranking

    def rrf(ranking: Any, weights: dict[str, float], weighted: bool = True) -> list[Any]:
        lists = {n: r for n, r in ranking.retrieved.items() if r.candidates}
        evidence = {n: list_evidence(r.candidates, r.ratio_scores) for n, r in lists.items()}
        return weighted_rrf(
            {n: [c.id for c in r.candidates] for n, r in lists.items()},
            {n: weights[n] for n in lists},
            evidence=evidence if weighted else None,
        )

    minority = {"keyword": 0.5, "semantic": 0.4, "graph": 0.1}
    got, ranking = ranked(minority, ["hybrid"])
    plain = rrf(ranking, minority)
    head = plain[: fusion.SUPPORT_DEPTH]
    graph = engine.index.graph_retriever
    support = graph.support([f.id for f in head], [f.score for f in head])
    assert max(support.values()) > 0  # the sample's passages share names
    expected = regularized(plain, support, fusion.SUPPORT_SHARE * 0.9, fusion.SUPPORT_DEPTH)
    assert [i for i, _s in got] == [f.id for f in expected]
    assert [s for _i, s in got] == pytest.approx([f.score for f in expected])
    assert got != [(f.id, f.score) for f in plain]
    led = {"keyword": 0.05, "semantic": 0.15, "graph": 0.8}
    got, ranking = ranked(led, ["hybrid"])
    assert got == [(f.id, f.score) for f in rrf(ranking, led)]
    # Plain RRF keeps rank-only terms and no support.
    got, ranking = ranked(minority, ["hybrid"], "rrf")
    assert got == [(f.id, f.score) for f in rrf(ranking, minority, weighted=False)]
