"""Cross-encoder reranking behind a one-method protocol, with models resolved strictly offline.

No cross-encoder ships in a PyPI package, so a model is used only when it is already on this machine: a local
folder, or a snapshot in the local Hugging Face cache. When neither exists, the caller gets a clear reason
(and the search reports rerank as skipped) instead of a download attempt or an error.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

import numpy as np

log = logging.getLogger("hybridrag.rerank")


class Reranker(Protocol):
    """Scores (query, passage) pairs; higher is more relevant, in 0..1."""

    name: str

    def score(self, query: str, passages: Sequence[str], batch_size: int) -> np.ndarray: ...


class RerankerUnavailable(RuntimeError):
    pass


class TorchMissing(RerankerUnavailable):
    """The cross-encoder's runtime (torch, sentence-transformers) is not installed."""


def resolve_model(name: str) -> Path:
    """A local folder, or the local Hugging Face cache's snapshot of `name`; never a download."""
    path = Path(name).expanduser()
    if path.is_dir() and (path / "config.json").is_file():
        return path
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    try:
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(name, local_files_only=True))
    except Exception as exc:  # the hub raises several kinds; all mean "not on this machine"
        raise RerankerUnavailable(
            f"cross-encoder {name!r} is not on this machine (no such folder, not in the local Hugging Face "
            "cache); set rerankConfig.model or HYBRIDRAG_RERANK_MODEL to a local model folder"
        ) from exc


class CrossEncoderReranker:
    """A sentence-transformers CrossEncoder; scores go through a sigmoid so they read as probabilities."""

    def __init__(self, name: str) -> None:
        try:
            from sentence_transformers import CrossEncoder
        except ImportError as exc:  # a torch-free install (the `server-onnx` extra) serves without rerank
            raise TorchMissing(
                "rerank needs torch and sentence-transformers, which this installation lacks: "
                "pip install 'hybridrag[server]' (or the torch-free extra serves without rerank)"
            ) from exc
        self.name = name
        self._model = CrossEncoder(str(resolve_model(name)), device="cpu", local_files_only=True)
        self._lock = threading.Lock()

    def score(self, query: str, passages: Sequence[str], batch_size: int) -> np.ndarray:
        with self._lock:
            logits = self._model.predict(
                [(query, p) for p in passages],
                batch_size=batch_size,
                activation_fn=None,
                show_progress_bar=False,
                convert_to_numpy=True,
            )
        raw = np.asarray(logits, dtype=np.float64).reshape(len(passages), -1)[:, -1]
        return 1.0 / (1.0 + np.exp(-raw))


class RerankerPool:
    """Loads each requested model once; remembers why a model could not be loaded."""

    def __init__(self) -> None:
        self._models: dict[str, Reranker] = {}
        self._failures: dict[str, str] = {}
        self._lock = threading.Lock()

    def failed(self, name: str) -> bool:
        """Whether `name` was asked for and could not be loaded (it never will be in this process)."""
        with self._lock:
            return name in self._failures

    def get(self, name: str, source: str | None = None) -> Reranker:
        """The model called `name`, loaded from `source` (a local folder or HF cache id; default: `name`).

        Only the server's configuration decides which names reach here (an allow-list), so the pool, and its
        memory of failures, stays as small as that list. Failure messages are ours, never the loader's.
        """
        with self._lock:
            if name in self._models:
                return self._models[name]
            if name in self._failures:
                raise RerankerUnavailable(self._failures[name])
            try:
                model = CrossEncoderReranker(source or name)
            except TorchMissing as exc:
                self._failures[name] = str(exc)
                raise
            except RerankerUnavailable:
                self._failures[name] = (
                    f"cross-encoder {name!r} is not on this machine (no such local folder, not in the local "
                    "Hugging Face cache)"
                )
                raise RerankerUnavailable(self._failures[name]) from None
            except (OSError, ValueError) as exc:
                log.warning("cross-encoder %r could not be loaded from %r: %s", name, source or name, exc)
                self._failures[name] = f"cross-encoder {name!r} could not be loaded (see the server log)"
                raise RerankerUnavailable(self._failures[name]) from exc
            self._models[name] = model
            return model
