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
    "DEVICES",
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
    "resolve_device",
]

#: How a model is run: "torch" (sentence-transformers), "onnx" (its ONNX export, int8 or fp32, see
#: onnx_encoder.py; an error when not exported), or "auto" (the export when there is one, else torch).
ENCODERS = ("torch", "onnx", "auto")
#: Where passages are embedded: "cpu", "cuda" (an error when torch sees no CUDA device) or "auto" (CUDA when
#: torch sees one, else the CPU).
DEVICES = ("auto", "cpu", "cuda")


def cuda_available() -> bool:
    """True when torch is installed and sees a CUDA device (the torch-free install: False)."""
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def resolve_device(device: str) -> str:
    """`cpu` or `cuda` for a `DEVICES` value; `ModelUnavailable` when CUDA is asked for and absent."""
    if device not in DEVICES:
        raise ModelUnavailable(f"unknown device {device!r}: use one of {', '.join(DEVICES)}")
    if device == "cpu":
        return "cpu"
    if cuda_available():
        return "cuda"
    if device == "cuda":
        raise ModelUnavailable("device cuda: torch sees no CUDA device (torch.cuda.is_available() is false)")
    return "cpu"


def load_embedder(
    name: str, encoder: str = "torch", threads: int = 0, device: str = "cpu", **kwargs: Any
) -> Embedder:
    """The model `name` run by `encoder` on `device` (`DEVICES`). `threads` > 0 caps the cores the model uses
    (for several worker processes on one machine): its intra-op threads, or for an int8 ONNX export the
    texts embedded side by side, one thread each; 0 uses every core the process may use.

    On CUDA the model runs on torch: the ONNX export is an int8 graph for CPUs, so `auto` means torch there
    and `onnx` is refused."""
    if encoder not in ENCODERS:
        raise ModelUnavailable(f"unknown encoder {encoder!r}: use one of {', '.join(ENCODERS)}")
    spec = model_spec(name)
    if resolve_device(device) == "cuda":
        if encoder == "onnx":
            raise ModelUnavailable(
                "the ONNX export is an int8 graph for CPUs: embed on CUDA with --encoder torch (or auto)"
            )
        # A GPU's throughput grows with the batch far past what suits 2 CPU cores.
        return SentenceTransformerEmbedder(spec, device="cuda", **{"batch_size": 128, **kwargs})
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
