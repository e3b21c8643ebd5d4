"""A Japanese name tagger: a linear-chain CRF (CRFsuite, through `python-crfsuite`) over Sudachi's morphemes,
fitted by `benchmarks/fitting/fit_japanese_tagger.py`.

Each morpheme is read with its part of speech (Sudachi's dictionary classes: 人名, 地名, 組織, 固有名詞 …),
its script (kanji, katakana, hiragana, Latin, digits), its last characters, the two morphemes either side
and where the head-final rules of `entities.py` put names and which type they gave them. The tags are BIO
over the index's four types, so the CRF learns where the rules' bounds and types go wrong (a school is a
facility, "王子製紙" ends before "釧路工場") and finds names they miss (companies Sudachi does not know).

The model (`ja_tagger/model.crfsuite`, CRFsuite's own binary format, and `model.json`: provenance, the
rules' revision it was fitted with, cross-validated scores) ships with the package. It was fitted on the
Japanese named-entity file's first 2,000 sentences; the rest are held back for measuring it. Without
`python-crfsuite` or the model, or when the rules have changed since the fit (the model reads their
output), the tagger is absent and the rules alone name Japanese entities.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import threading
from collections.abc import Sequence
from functools import cache
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import numpy as np

from hybridrag.indexing.analysis.bio import best_bio, bio_spans
from hybridrag.indexing.analysis.name_tagger import TYPES, NameTagger, packaged_japanese_reader

FOLDER = Path(__file__).parent / "ja_tagger"
MODEL = "model.crfsuite"
#: How tags become names (`decode`, `_balanced`, `JapaneseTagger.read`): bumped with any change there. It is
#: part of the tagger's version beside the model's digest, so that an index re-extracts its names when
#: either changes. 2: the rules' names the tagger did not keep stay as graph nodes. (With a piece tagger
#: beside the CRF, tags are the best BIO path under the product of both: its version follows this one.)
DECODE_REVISION = 2
#: (surface, normalized form, part of speech, begin, end): `Analyzer.japanese.morphemes`'s rows.
Morpheme = tuple[str, str, tuple[str, ...], int, int]
#: A sentence as the piece tagger read it: each word piece's label probabilities and character offsets
#: (`NameTagger.piece_probs`).
Pieces = tuple[np.ndarray, np.ndarray]
#: The labels the two models are combined over (the CRF's own; the piece tagger's map onto them).
LABELS = ("O", *(f"{b}-{t}" for t in ("person", "organization", "place", "other") for b in ("B", "I")))
_FLOOR = 1e-9  # added to a probability before its log: neither model rules a label out alone
#: The piece tagger's power in the product with the CRF's marginals, chosen with both models fitted on the
#: file's first 1,600 sentences and scored on the next 400 (typed F1 0.773 unweighted, 0.791 / 0.802 / 0.788
#: at 1.5 / 2 / 3): 1.5, since at 2 the piece tagger outvotes the CRF's knowledge of the rules' names and
#: reads a place with the common noun it qualifies as one name ("中国資本", "日本企業"; benchmarks/docs/entities.md,
#: "Japanese names from e5's pieces beside the CRF"). Part of the version with a piece tagger.
PIECE_WEIGHT = 1.5

log = logging.getLogger(__name__)

_SCRIPTS = (
    ("K", re.compile(r"[\u4e00-\u9fff々]+")),
    ("T", re.compile(r"[\u30a0-\u30ff]+")),
    ("H", re.compile(r"[\u3040-\u309f]+")),
    ("L", re.compile(r"[A-Za-z]+")),
    ("D", re.compile(r"[0-9０-９]+")),
)


def script(surface: str) -> str:
    """A morpheme's script: kanji, katakana, hiragana, Latin, digits, or other (mixed, punctuation)."""
    for name, pattern in _SCRIPTS:
        if pattern.fullmatch(surface):
            return name
    return "O"


def bio(morphemes: Sequence[Morpheme], spans: Sequence[tuple[int, int, str]]) -> list[str]:
    """BIO tags of the morphemes for character spans (start, end, type): a morpheme a span overlaps is in it."""
    tags = ["O"] * len(morphemes)
    for start, end, kind in spans:
        first = True
        for i, (_s, _n, _p, begin, finish) in enumerate(morphemes):
            if begin < end and start < finish:
                tags[i] = ("B-" if first else "I-") + kind
                first = False
    return tags


def rule_spans(sentence: str, names: Sequence[tuple[str, str]]) -> list[tuple[int, int, str]]:
    """Where in `sentence` the rules' names (surface, type; in sentence order) lie."""
    spans = []
    at = 0
    for surface, kind in names:
        start = sentence.find(surface, at)
        if start < 0:
            start = sentence.find(surface)
        if start < 0:
            continue
        at = start + len(surface)
        spans.append((start, at, kind))
    return spans


def features(morphemes: Sequence[Morpheme], rules: Sequence[str]) -> list[list[str]]:
    """Each morpheme's CRF features: itself, its part of speech and script, the rules' tag, two either side."""
    n = len(morphemes)
    words = [m[0] for m in morphemes]
    parts = ["|".join(m[2][:3]) for m in morphemes]
    scripts = [script(w) for w in words]
    around = [
        [f"{d}w={words[j]}", f"{d}p={parts[j]}", f"{d}ct={scripts[j]}", f"{d}r={rules[j]}"]
        if 0 <= (j := i + d) < n
        else [f"{d}w=<pad>"]
        for i in range(n)
        for d in (-2, -1, 1, 2)
    ]
    out = []
    for i, (surface, _norm, pos, _b, _e) in enumerate(morphemes):
        f = [
            "bias",
            f"w={surface}",
            f"p1={pos[0]}",
            f"p12={pos[0]}{pos[1]}",
            f"p123={parts[i]}",
            f"p4={'|'.join(pos[:4])}",
            f"ct={scripts[i]}",
            f"last={surface[-1:]}",
            f"last2={surface[-2:]}",
            f"first={surface[:1]}",
            f"len={min(len(surface), 6)}",
            f"r={rules[i]}",
        ]
        for side in around[4 * i : 4 * i + 4]:
            f += side
        f.append(f"-1w|w={words[i - 1] if i else '<s>'}|{surface}")
        f.append(f"w|+1w={surface}|{words[i + 1] if i + 1 < n else '</s>'}")
        out.append(f)
    return out


def sentence_features(
    sentence: str, morphemes: Sequence[Morpheme], rules: Sequence[tuple[str, str]]
) -> list[list[str]]:
    """The CRF's input for a sentence: `features` with the rules' names (surface, type) as BIO tags. The
    tagger and its fitting script both read sentences through this, so fit and use never differ."""
    return features(morphemes, bio(morphemes, rule_spans(sentence, rules)))


def morpheme_labels(morphemes: Sequence[Morpheme], pieces: Pieces, labels: Sequence[str]) -> np.ndarray:
    """The piece tagger's reading of each morpheme (morphemes x `LABELS`): the label probabilities of the
    piece its first character is in. A piece that began in an earlier morpheme carries it on: then the
    morpheme is outside a name with the piece's "O" probability, else inside (I-) the name the piece is
    in, whether the piece opened it or not. A morpheme no piece covers (spaces) gets no preference.

    `labels` name the piece tagger's columns in its own spelling (B-PER, I-ORG, B-MISC ...)."""
    probs, offsets = pieces
    own = [label if label == "O" else label[:2] + TYPES[label[2:]] for label in labels]
    column = np.array([LABELS.index(label) for label in own])
    out = np.full((len(morphemes), len(LABELS)), 1.0 / len(LABELS))
    if not len(probs):
        return out
    starts, ends = offsets[:, 0], offsets[:, 1]
    for i, (_surface, _norm, _pos, begin, end) in enumerate(morphemes):
        k = int(np.searchsorted(ends, begin, side="right"))  # the first piece ending after `begin`
        if k >= len(starts) or starts[k] >= end:
            continue
        row = np.zeros(len(LABELS))
        np.add.at(row, column, probs[k])
        if starts[k] < begin:
            row = np.array([row[0], *(x for t in range(4) for x in (0.0, row[1 + 2 * t] + row[2 + 2 * t]))])
        out[i] = row
    return out


def decode(sentence: str, morphemes: Sequence[Morpheme], tags: Sequence[str]) -> list[tuple[str, str]]:
    """Names (surface, type) from BIO tags; an I- tag after another type (or after O) starts a name. A name
    is trimmed of spaces at its ends and cut at a bracket it does not close ("会議（COP3" -> "会議")."""
    if len(tags) != len(morphemes):
        raise ValueError(f"{len(tags)} tags for {len(morphemes)} morphemes")
    out = []
    for first, last, kind in bio_spans(tags):
        name = _balanced(sentence[morphemes[first][3] : morphemes[last - 1][4]]).strip()
        if name:
            out.append((name, kind))
    return out


_BRACKETS = {"(": ")", "（": "）", "「": "」", "『": "』", "[": "]", "【": "】", "《": "》", "〈": "〉"}
_CLOSERS = {v: k for k, v in _BRACKETS.items()}


def _balanced(name: str) -> str:
    """`name` up to a bracket it opens and does not close, or from after one it closes and did not open."""
    opened: list[tuple[str, int]] = []
    for i, c in enumerate(name):
        if c in _BRACKETS:
            opened.append((c, i))
        elif c in _CLOSERS:
            if opened and opened[-1][0] == _CLOSERS[c]:
                opened.pop()
            else:
                return _balanced(name[i + 1 :])
    return name[: opened[0][1]] if opened else name


class JapaneseTagger:
    """The fitted CRF, and with it a piece tagger where one can run; `names` reads one sentence. Safe to
    share across threads (tagging takes a lock).

    With a piece tagger (`reader`: multilingual-e5-small with adapters and a head, `name_tagger.JA_FOLDER`),
    a morpheme's tag is read from both: the best BIO path under the product of the CRF's marginal
    probabilities and the piece tagger's label probabilities (`morpheme_labels`) to the power
    `PIECE_WEIGHT`. The CRF knows Sudachi's parts of speech and the rules' names; the piece tagger reads the
    whole sentence. On the Japanese dev file's held-back sentences: typed F1 0.701 (CRF) and ~0.765 (the
    piece tagger alone, decoded over morphemes) -> 0.786 together unweighted (benchmarks/docs/entities.md,
    "Japanese names from e5's pieces beside the CRF").
    """

    def __init__(self, folder: Path = FOLDER, reader: NameTagger | None = None) -> None:
        import pycrfsuite

        path = folder / MODEL
        self.folder = folder
        self.meta: dict[str, Any] = json.loads((folder / "model.json").read_text(encoding="utf-8"))
        self.reader = reader
        self.version = f"ja-{hashlib.sha256(path.read_bytes()).hexdigest()[:12]}.{DECODE_REVISION}" + (
            f"-{reader.version}-w{PIECE_WEIGHT:g}" if reader is not None else ""
        )
        self._tagger = pycrfsuite.Tagger()
        self._tagger.open(str(path))
        self._lock = threading.Lock()
        # A label the fit never saw (a small training file) has no marginal: probability 0 for the CRF.
        self._labels = [label for label in LABELS if label in set(self._tagger.labels())]
        if set(self._tagger.labels()) - set(LABELS):
            raise ValueError(f"{path} tags {sorted(self._tagger.labels())}, not some of {sorted(LABELS)}")

    def on_cores(self, cores: int) -> JapaneseTagger:
        """This tagger with its piece tagger run on at most `cores` cores (`NameTagger.on_cores`)."""
        if self.reader is None:
            return self
        return JapaneseTagger(self.folder, reader=self.reader.on_cores(cores))

    def read_pieces(self, sentences: Sequence[str]) -> list[Pieces | None]:
        """The piece tagger's reading of each sentence, read together (in batches, side by side); None for
        each without a piece tagger."""
        if self.reader is None:
            return [None] * len(sentences)
        return list(self.reader.piece_probs(sentences))

    @property
    def rules_revision(self) -> int:
        return int(self.meta["rulesRevision"])

    def names(
        self,
        sentence: str,
        morphemes: Sequence[Morpheme],
        rules: Sequence[tuple[str, str]],
        pieces: Pieces | None = None,
    ) -> list[tuple[str, str]]:
        """The sentence's names, given its morphemes and the rules' names (surface, type); `pieces`: the
        piece tagger's reading of it (`read_pieces`), read here when there is a piece tagger and not given."""
        if not morphemes:
            return []
        x = sentence_features(sentence, morphemes, rules)
        if self.reader is None:
            with self._lock:
                tags = self._tagger.tag(x)
            return decode(sentence, morphemes, tags)
        if pieces is None:
            pieces = self.read_pieces([sentence])[0]
            assert pieces is not None
        with self._lock:
            self._tagger.set(x)
            marginals = np.array(
                [
                    [self._tagger.marginal(label, t) if label in self._labels else 0.0 for label in LABELS]
                    for t in range(len(morphemes))
                ]
            )
        both = np.log(marginals + _FLOOR) + PIECE_WEIGHT * np.log(
            morpheme_labels(morphemes, pieces, self.reader.labels) + _FLOOR
        )
        return decode(sentence, morphemes, best_bio(both, LABELS))

    def read(
        self,
        sentence: str,
        morphemes: Sequence[Morpheme],
        rules: Sequence[tuple[str, str]],
        pieces: Pieces | None = None,
    ) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
        """`names`, and the rules' names it did not keep, for the graph alone.

        Where the tagger bounds a name otherwise than the rules (a surname inside a joined name, a compound
        it splits), the rules' name still links the passages that write it the same way; without those
        nodes the graph alone lost 0.005 nDCG@10 on JaQuAD dev (0.8386 -> 0.8338; with them 0.8386). They
        type nothing: the tagger's names are the better types (benchmarks/docs/entities.md, "A Japanese name
        tagger: a CRF over the rules' names").
        """
        names = self.names(sentence, morphemes, rules, pieces)
        kept = {surface for surface, _type in names}
        return names, [(surface, kind) for surface, kind in rules if surface not in kept]


@cache
def packaged_japanese_tagger(rules_revision: int, pieces: bool = True) -> JapaneseTagger | None:
    """The shipped tagger, when `python-crfsuite` is installed and it was fitted on these rules' output;
    with the piece tagger beside it where that can run (`pieces` False: the CRF alone, as a build with
    `--name-typing typer` reads Japanese, skipping the model pass)."""
    if find_spec("pycrfsuite") is None or not (FOLDER / MODEL).is_file():
        log.warning("the Japanese name tagger is not available (python-crfsuite or its model missing)")
        return None
    tagger = JapaneseTagger(reader=packaged_japanese_reader() if pieces else None)
    if tagger.rules_revision != rules_revision:
        log.warning(
            "the Japanese name tagger was fitted on rules revision %s, not %s: refit it "
            "(python -m hybridrag.benchmarks.fitting.fit_japanese_tagger); the rules alone name Japanese entities",
            tagger.rules_revision,
            rules_revision,
        )
        return None
    return tagger
