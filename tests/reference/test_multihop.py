"""Multi-hop retrieval through HTTP: the second passage shares no word with the question.

A small hand-made corpus in the style of 2WikiMultiHopQA (a composition: "the director of film X" -> where
the director comes from) and MuSiQue (two single-hop questions chained: where was X born -> which river
flows past that place), padded with distractors that share the question's words. Keyword and dense search cannot reach the
answer passage (no word in common, little meaning in common); the graph walks passage -> bridge entity ->
the bridge entity's own article, and says so in `metadata.graphPath`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

DOCS = [
    # 2Wiki-style composition.
    (
        "silent-harbor",
        "The Silent Harbor",
        "The Silent Harbor is a 1962 drama film directed by Olaf Brennick. The film follows a lighthouse keeper "
        "through one winter storm. It premiered at the Venice Film Festival.",
    ),
    (
        "olaf-brennick",
        "Olaf Brennick",
        "Olaf Brennick (1921–1990), Norwegian painter and filmmaker, grew up in Tromsø, where his father built "
        "fishing boats. His first exhibition opened in Bergen in 1948.",
    ),
    (
        "harbor-town",
        "Harbor Town",
        "Harbor Town is a 1958 film by director Maria Lind about a town whose harbor freezes every winter. The "
        "director came from a family of sailors in the town of Visby.",
    ),
    (
        "silent-coast",
        "The Silent Coast",
        "The Silent Coast is a 1970 documentary by director Pieter Hals, who came from the fishing town of "
        "Den Helder. It shows the harbor of the town in silence.",
    ),
    (
        "harbor-authority",
        "Harbor Authority of Kelsey",
        "The director of the Harbor Authority of Kelsey comes from the town council. The harbor of the town "
        "was silent during the strike of 1977.",
    ),
    (
        "directors-guild",
        "Guild of Harbor Film Directors",
        "The Guild of Harbor Film Directors gives a prize to a director whose film shows a harbor town. Most "
        "members come from coastal towns.",
    ),
    # MuSiQue-style chain.
    (
        "letters-to-ilse",
        "Letters to Ilse",
        "Letters to Ilse is an 1898 epistolary novel written by Henrike Vass. It tells of a governess writing "
        "to her sister Ilse about a family in Hamburg.",
    ),
    (
        "henrike-vass",
        "Henrike Vass",
        "Henrike Vass (1861–1932) was a German novelist. She was born in Lindenau and wrote eleven novels "
        "about provincial life.",
    ),
    (
        "lindenau",
        "Lindenau",
        "Lindenau, a small Saxon market community, lies on a bend in Mulde water meadows. Its Gothic church "
        "dates from 1520.",
    ),
    (
        "ilse-river",
        "Ilse (river)",
        "The Ilse is a river in Saxony-Anhalt which flows past Ilsenburg. The river rises in the Harz and "
        "flows to the Oker.",
    ),
    (
        "novelist-birthplace",
        "Birthplace of the Novelist",
        "The birthplace of the novelist Karl Brandt is a house on a river which flows past the old mill. "
        "Letters the novelist wrote are shown there.",
    ),
    (
        "river-letters",
        "Letters from the River",
        "Letters from the River is a novel in which a river boatman writes letters to the novelist who was "
        "born past the river bend.",
    ),
]

QUESTIONS = [
    # (question, answer passage's document, bridge entity, first passage's document)
    ("Which town did the director of The Silent Harbor come from?", "olaf-brennick", "Olaf Brennick",
     "silent-harbor"),
    ("Which river flows past the birthplace of Henrike Vass?", "lindenau", "Lindenau", "henrike-vass"),
]  # fmt: skip


def _words(text: str) -> set[str]:
    return {w.lower() for w in re.findall(r"\w+", text)}


@pytest.fixture(scope="module")
def multihop_client(tmp_path_factory: pytest.TempPathFactory, embedder: Any) -> Iterator[TestClient]:
    from hybridrag.http.app import create_app
    from hybridrag.indexing.builds.build import BuildConfig, IndexBuilder
    from hybridrag.pipeline.engine import SearchEngine
    from hybridrag.pipeline.settings import Settings

    root = tmp_path_factory.mktemp("multihop")
    corpus = root / "corpus.jsonl"
    corpus.write_text(
        "".join(json.dumps({"_id": i, "title": t, "text": x}) + "\n" for i, t, x in DOCS), "utf-8"
    )
    index_dir = root / "index"
    IndexBuilder(index_dir, BuildConfig(embedding_model="minilm"), embedder=embedder).build(corpus)
    settings = Settings(index_dir=index_dir, embedding_model="minilm", _env_file=None)  # type: ignore[call-arg]
    app = create_app(settings, SearchEngine(settings, embedder=embedder), wait=True)
    with TestClient(app) as client:
        yield client


def _search(client: TestClient, text: str, strategies: list[str], limit: int) -> list[dict[str, Any]]:
    response = client.post(
        "/v1/search",
        json={
            "text": text,
            "options": {"strategies": strategies, "limit": limit},
            "filters": {"minRelevance": 0},
        },
    )
    assert response.status_code == 200, response.text
    return [r for r in response.json()["results"] if r["type"] == "chunk"]


def test_the_answer_passages_share_no_word_with_their_questions() -> None:
    texts = {i: f"{t} {x}" for i, t, x in DOCS}
    for question, answer, _bridge, _first in QUESTIONS:
        assert not _words(question) & _words(texts[answer]), (
            question,
            _words(question) & _words(texts[answer]),
        )


@pytest.mark.parametrize(("question", "answer", "bridge", "first"), QUESTIONS)
def test_the_graph_finds_the_second_hop_that_keyword_and_dense_search_miss(
    multihop_client: TestClient, question: str, answer: str, bridge: str, first: str
) -> None:
    for strategy in ("keyword", "semantic"):
        top = [r["metadata"]["docId"] for r in _search(multihop_client, question, [strategy], 3)]
        assert answer not in top, (strategy, top)
    # The graph's own top three passages (its entities may sit between them on the page).
    graph = _search(multihop_client, question, ["graph"], 10)[:3]
    docs = [r["metadata"]["docId"] for r in graph]
    assert answer in docs, docs
    # In the default fusion (the classifier's weights) the graph lifts it above where keyword + semantic put it.
    hybrid = [r["metadata"]["docId"] for r in _search(multihop_client, question, ["hybrid"], 20)]
    without = [
        r["metadata"]["docId"] for r in _search(multihop_client, question, ["keyword", "semantic"], 20)
    ]
    assert answer in hybrid[:6], hybrid
    assert answer not in without or without.index(answer) > hybrid.index(answer), (hybrid, without)

    # The path explains the hop: a seed, the bridge entity, then the answer passage through a mention.
    hit = graph[docs.index(answer)]
    path = hit["metadata"]["graphPath"]
    assert path[0]["seed"] is True
    assert path[-1] == {
        "id": hit["id"],
        "type": "chunk",
        "via": path[-2]["id"],
        "edge": "mentions",
        "title": hit["metadata"]["title"],
    }
    assert path[-2]["type"] == "entity" and path[-2]["name"] == bridge
    # The walk came from the passage that names the bridge (or the question's own entity before it).
    assert any(step["type"] == "chunk" for step in path[:-1]) or path[0]["type"] == "entity"
    chunk_docs = {r["id"]: r["metadata"]["docId"] for r in _search(multihop_client, question, ["hybrid"], 12)}
    assert (
        any(chunk_docs.get(step["id"]) == first for step in path if step["type"] == "chunk") or len(path) >= 3
    )


def test_a_search_embeds_its_query_once_for_semantic_and_graph(multihop_client: TestClient) -> None:
    """The graph reuses the query vector (and, in a hybrid search, the semantic retriever's hits as seeds)."""
    from hybridrag.pipeline.batching import BatchingEmbedder

    engine = multihop_client.app.state.engine  # type: ignore[attr-defined]
    batching = engine._embedder
    assert isinstance(batching, BatchingEmbedder)
    for strategies in (["hybrid"], ["graph"], ["semantic", "graph"]):
        before = batching.calls
        _search(multihop_client, QUESTIONS[0][0], strategies, 5)
        assert batching.calls - before == 1, strategies
