"""A sentence-transformers model run on torch, loaded from a local folder.

Nothing here downloads: Hugging Face Hub access is switched off before a model is loaded.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence

import numpy as np

from hybridrag.indexing.models.registry import ModelSpec, ModelUnavailable, torch_missing


class SentenceTransformerEmbedder:
    """A sentence-transformers model loaded from a local folder, once."""

    encoder = "torch"

    def __init__(self, spec: ModelSpec, batch_size: int = 32, device: str = "cpu") -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise ModelUnavailable(torch_missing(spec.name)) from exc

        path = spec.resolve()
        self.name = spec.name
        self.path = path
        self._spec = spec
        self._batch_size = batch_size
        self.device = device
        self._model = SentenceTransformer(str(path), device=device, local_files_only=True)
        get_dim = (
            getattr(self._model, "get_embedding_dimension", None)
            or self._model.get_sentence_embedding_dimension
        )
        dim = get_dim()
        if dim is None:
            raise ModelUnavailable(f"model at {path} does not report an embedding dimension")
        self.dim = int(dim)
        # torch releases the GIL in its kernels, but one model used from many threads at once only
        # oversubscribes 2 cores; a lock keeps encode calls one at a time.
        self._lock = threading.Lock()

    def _encode(
        self, texts: Sequence[str], model_input: Callable[[str], str], show_progress: bool = False
    ) -> np.ndarray:
        items = [model_input(t) for t in texts]
        with self._lock:
            vectors = self._model.encode(
                items,
                batch_size=self._batch_size,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=show_progress,
            )
        return np.asarray(vectors, dtype=np.float32).reshape(len(items), self.dim)

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        return self._encode(texts, self._spec.passage_input)

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self._encode(texts, self._spec.query_input)
