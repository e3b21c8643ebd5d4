"""The search gate: at most N searches past it at once, the rest admitted in arrival order."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from hybridrag.pipeline.admission import Admission


def test_waiters_are_admitted_in_arrival_order_and_newcomers_never_overtake() -> None:
    gate = Admission(1)
    assert gate.acquire()
    order: list[int] = []
    threads = []
    for i in range(5):

        def wait(i: int = i) -> None:
            assert gate.acquire(timeout=10)
            order.append(i)
            gate.release()

        t = threading.Thread(target=wait)
        t.start()
        threads.append(t)
        while gate.waiting < i + 1:  # each in line before the next arrives
            time.sleep(0.001)
    gate.release()
    # A newcomer after the release finds the line and queues behind it instead of taking the slot.
    assert gate.acquire(timeout=10)
    gate.release()
    for t in threads:
        t.join(10)
    assert order == [0, 1, 2, 3, 4]


def test_a_wait_can_time_out_and_leaves_the_line() -> None:
    gate = Admission(2)
    assert gate.acquire() and gate.acquire()
    started = time.perf_counter()
    assert not gate.acquire(timeout=0.05)
    assert time.perf_counter() - started >= 0.05 and gate.waiting == 0
    with gate.held(timeout=0.01) as got:
        assert got is False  # the block still runs (a late search answers with what it could do)
    gate.release()
    with gate.held(timeout=0.01) as got:
        assert got is True
    gate.release()
    with pytest.raises(RuntimeError):
        gate.release()
    with pytest.raises(ValueError):
        Admission(0)


def test_the_engine_runs_no_more_searches_at_once_than_its_slots(sample_index: Any, embedder: Any) -> None:
    from hybridrag.pipeline.engine import SearchEngine
    from hybridrag.pipeline.settings import Settings
    from hybridrag.schemas.search import SearchRequest

    settings = Settings(  # type: ignore[call-arg]
        index_dir=sample_index, embedding_model="minilm", max_concurrent_searches=2, _env_file=None
    )
    engine = SearchEngine(settings, embedder=embedder)
    engine.start()
    inside, peak, lock = 0, 0, threading.Lock()
    rank = engine.rank

    def counting_rank(*args: Any, **kwargs: Any) -> Any:
        nonlocal inside, peak
        with lock:
            inside += 1
            peak = max(peak, inside)
        try:
            time.sleep(0.02)
            return rank(*args, **kwargs)
        finally:
            with lock:
                inside -= 1

    engine.rank = counting_rank  # type: ignore[method-assign]
    request = SearchRequest.model_validate({"text": "Who founded Sony?", "options": {"limit": 3}})
    results: list[int] = []
    threads = [
        threading.Thread(target=lambda: results.append(len(engine.search(request).results))) for _ in range(8)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    engine.close()
    assert len(results) == 8 and all(n > 0 for n in results)
    assert peak == 2
