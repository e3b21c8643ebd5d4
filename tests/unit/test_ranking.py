"""How a search runs its retrievers: what needs no query vector starts beside the query's encoding."""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient

from hybridrag.indexing.stores.filters import ChunkFilters
from hybridrag.pipeline.ranking import READS_VECTOR, run_retrievers
from hybridrag.pipeline.retrievers import Candidate, RetrievalQuery, Retrieved
from hybridrag.schemas.search import SearchRequest, StageNote


class _Recording:
    """A retriever that notes what it saw: whether the vector was ready when it started, the query."""

    def __init__(
        self, name: str, pending: Future[np.ndarray], started: threading.Event | None = None
    ) -> None:
        self.name = name
        self._pending = pending
        self._started = started
        self.vector_ready_at_start: bool | None = None
        self.query: RetrievalQuery | None = None

    def retrieve(self, query: RetrievalQuery, limit: int) -> Retrieved:
        self.vector_ready_at_start = self._pending.done()
        self.query = query
        if self._started is not None:
            self._started.set()
        return Retrieved([Candidate(f"{self.name}-{i}", 1.0 - i / 10, 1.0 - i / 10) for i in range(3)], 3)


def _run(pending: Future[np.ndarray], retrievers: dict[str, Any], active: list[str]) -> Any:
    index = SimpleNamespace(retrievers=retrievers)
    query = RetrievalQuery("radium and polonium", ChunkFilters(), terms=(("radium", "polonium"), ()))
    notes: list[StageNote] = []
    with ThreadPoolExecutor(4) as pool:
        out = run_retrievers(pool, index, active, query, 10, time.perf_counter() + 30, notes, pending)  # type: ignore[arg-type]
    return out, notes


def test_keyword_starts_while_the_query_is_encoded_and_the_rest_read_the_vector() -> None:
    pending: Future[np.ndarray] = Future()
    keyword_started = threading.Event()
    vector = np.arange(4, dtype=np.float32)

    def encoder() -> None:  # finishes only once keyword has started (or after 10 s, failing the test)
        keyword_started.wait(timeout=10)
        pending.set_result(vector)

    retrievers = {
        "keyword": _Recording("keyword", pending, keyword_started),
        "semantic": _Recording("semantic", pending),
        "graph": _Recording("graph", pending),
    }
    thread = threading.Thread(target=encoder)
    thread.start()
    (retrieved, timings, probes), notes = _run(pending, retrievers, ["keyword", "semantic", "graph"])
    thread.join()
    assert not notes and set(retrieved) == {"keyword", "semantic", "graph"} and not probes
    assert retrievers["keyword"].vector_ready_at_start is False, "keyword waited for the query's encoding"
    for name in READS_VECTOR:
        seen = retrievers[name].query
        assert seen is not None and seen.vector is vector
    graph_query = retrievers["graph"].query
    assert graph_query is not None and graph_query.seed_passages is not None
    assert set(graph_query.seed_passages) == {"keyword", "semantic"}  # seeded by both, after both
    assert set(timings) == {"keyword", "semantic", "graph"}


def test_a_graph_search_probes_keyword_beside_the_encoding_too() -> None:
    pending: Future[np.ndarray] = Future()
    pending.set_result(np.ones(4, dtype=np.float32))
    retrievers = {name: _Recording(name, pending) for name in ("keyword", "semantic", "graph")}
    (retrieved, _, probes), notes = _run(pending, retrievers, ["graph"])
    assert not notes and set(retrieved) == {"graph"} and set(probes) == {"keyword", "semantic"}


def test_a_failed_encoding_fails_the_search() -> None:
    pending: Future[np.ndarray] = Future()
    pending.set_exception(RuntimeError("encoder gone"))
    retrievers = {name: _Recording(name, pending) for name in ("keyword", "semantic")}
    with pytest.raises(RuntimeError, match="encoder gone"):
        _run(pending, retrievers, ["keyword", "semantic"])
    # A search that reads no vector does not wait for one (nor fail by it).
    (retrieved, _, _), notes = _run(pending, {"keyword": retrievers["keyword"]}, ["keyword"])
    assert set(retrieved) == {"keyword"} and not notes


@pytest.mark.parametrize("strategy", ["hybrid", "semantic", "graph", "keyword"])
def test_a_search_that_encodes_its_query_itself_answers_as_with_the_vector_given(
    client: TestClient, strategy: str
) -> None:
    engine = client.app.state.engine  # type: ignore[attr-defined]
    for text in ("Who founded Sony?", "Marie Curie radium", "トヨタの創業者"):
        request = SearchRequest.model_validate(
            {"text": text, "options": {"strategies": [strategy], "rerankEnabled": False}}
        )
        given = engine.search(request, precomputed=engine.embed_queries([text])[0])
        encoded = engine.search(request)
        assert [(r.id, r.score) for r in encoded.results] == [(r.id, r.score) for r in given.results]
        assert encoded.total_count == given.total_count
        assert encoded.results, f"{strategy} found nothing for {text!r}"
