"""Embedding models behind one small protocol and a plain dict registry (`registry`), run on torch
(`torch_encoder`) or on their ONNX export (`onnx_encoder`): `load_embedder` picks.

The rest of the code imports from here.
"""

from __future__ import annotations

from typing import Any

from hybridrag.indexing.models.registry import (
    DEFAULT_EMBEDDING_MODEL,
    MODEL_REGISTRY,
    NO_EMBEDDING_MODEL,
    Embedder,
    ModelSpec,
    ModelUnavailable,
    default_models_dir,
    model_spec,
    torch_missing,
)
from hybridrag.indexing.models.torch_encoder import SentenceTransformerEmbedder

__all__ = [
    "DEFAULT_EMBEDDING_MODEL",
    "ENCODERS",
    "MODEL_REGISTRY",
    "NO_EMBEDDING_MODEL",
    "Embedder",
    "ModelSpec",
    "ModelUnavailable",
    "SentenceTransformerEmbedder",
    "default_models_dir",
    "load_embedder",
    "model_spec",
]

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
        from hybridrag.indexing.models.onnx_encoder import OnnxEmbedder

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
