"""Micro-batching of query embeddings: concurrent searches share one encoder call.

Before, the embedder's lock made concurrent requests wait in line and each was encoded on its own. Here
requests go into a queue; one worker thread takes whatever is waiting (up to `max_batch` texts, after an
optional `window_s` for stragglers) and encodes it in one call, then hands each caller its rows. A lone
request pays nothing extra (window 0 by default: it is taken at once); under load, the queries that arrive
while the encoder is busy ride together in the next call.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future

import numpy as np

from hybridrag.indexing.models.embedders import Embedder


class BatchingEmbedder:
    """Wraps an embedder: `embed_queries` from many threads is served by batched calls of the inner one.

    Passages are not batched here (builds already encode in large batches); they go straight through.
    """

    def __init__(self, inner: Embedder, max_batch: int = 32, window_s: float = 0.0) -> None:
        if max_batch < 1 or window_s < 0:
            raise ValueError("max_batch must be >= 1 and window_s >= 0")
        self.inner = inner
        self.name = inner.name
        self.dim = inner.dim
        self.encoder = getattr(inner, "encoder", "torch")
        self.max_batch = max_batch
        self.window_s = window_s
        self.calls = 0  # encoder calls made (batches), for tests and metrics
        self._queue: queue.Queue[tuple[list[str], Future[np.ndarray]] | None] = queue.Queue()
        self._worker = threading.Thread(target=self._run, name="query-encoder", daemon=True)
        self._worker.start()

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        return self.inner.embed_passages(texts)

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self.submit_queries(texts).result()

    def submit_queries(self, texts: Sequence[str]) -> Future[np.ndarray]:
        """The vectors of `texts`, to come: the caller goes on (a search runs its keyword retrieval
        meanwhile) and reads them from the future when it needs them."""
        done: Future[np.ndarray] = Future()
        if not texts:
            done.set_result(np.zeros((0, self.dim), dtype=np.float32))
            return done
        self._queue.put((list(texts), done))
        return done

    def close(self) -> None:
        self._queue.put(None)

    def _take(self) -> list[tuple[list[str], Future[np.ndarray]]] | None:
        first = self._queue.get()
        if first is None:
            return None
        batch = [first]
        size = len(first[0])
        deadline = time.monotonic() + self.window_s
        while size < self.max_batch:
            try:
                timeout = deadline - time.monotonic()
                item = self._queue.get(timeout=timeout) if timeout > 0 else self._queue.get_nowait()
            except queue.Empty:
                break
            if item is None:
                self._queue.put(None)  # finish this batch, then stop
                break
            batch.append(item)
            size += len(item[0])
        return batch

    def _run(self) -> None:
        while (batch := self._take()) is not None:
            texts = [t for request, _ in batch for t in request]
            try:
                vectors = self.inner.embed_queries(texts)
                self.calls += 1
            except BaseException as exc:  # every caller of the batch hears about the failure
                for _, done in batch:
                    done.set_exception(exc)
                continue
            at = 0
            for request, done in batch:
                done.set_result(vectors[at : at + len(request)])
                at += len(request)
