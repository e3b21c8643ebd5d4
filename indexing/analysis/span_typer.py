"""The type of an English name found in a sentence: a small multinomial logistic regression over the name's
words and its neighbours, fitted by `benchmarks/fitting/fit_entity_typer.py` on WikiANN's English training split.

Capitalisation finds English names well (`entities.EntityExtractor`); word-list rules typed only four in
ten of them right (organisations one in five). The model reads what the rules cannot: a name's own words
("park", "united", "fc"), what precedes and follows it ("born in", "signed for", "said"), and the rules'
guess as one more feature. Its features are lower-cased, so a name that only its title gives in a casing
that says nothing (all capitals, all lower case) is typed the same way.

Weights ship with the package (`entity_typer/`: the feature vocabulary as JSON, the weights as a numpy
array, the classes and provenance in `model.json`); no pickle, no download.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from functools import cache
from pathlib import Path

import numpy as np

FOLDER = Path(__file__).parent / "entity_typer"
LEXICON = FOLDER / "lexicon.json"  # names whose type a list knows (countries, languages, nationalities…)
_WINDOW = 48  # characters either side of a name read for its neighbours
TOKEN_PATTERN = re.compile(r"\w+(?:[’'\-.]\w+)*|[^\w\s]")


def tokens(text: str) -> list[str]:
    """Words and punctuation marks, lower-cased (the features' units)."""
    return TOKEN_PATTERN.findall(text.lower())


def span_features(sentence: str, start: int, end: int, rule_type: str, casing: bool) -> list[str]:
    """Features of the name at `sentence[start:end]`: its words, first and last word and their endings,
    two words either side, the rules' type, and (where letter case is informative) whether it is in capitals.
    """
    span = tokens(sentence[start:end]) or ["<empty>"]
    before, after = _before(sentence, start), _after(sentence, end)
    before = ["<s>"] * (2 - len(before)) + before
    after = after + ["</s>"] * (2 - len(after))
    features = [
        "len=" + str(min(len(span), 5)),
        "full=" + " ".join(span),
        "first=" + span[0],
        "last=" + span[-1],
        "last3=" + span[-1][-3:],
        "last4=" + span[-1][-4:],
        "first3=" + span[0][:3],
        "prev1=" + before[1],
        "prev2=" + before[0],
        "prev12=" + before[0] + "|" + before[1],
        "next1=" + after[0],
        "next2=" + after[1],
        "next12=" + after[0] + "|" + after[1],
        "rule=" + rule_type,
    ]
    features.extend("word=" + w for w in span)
    if casing:
        features.append("capitals=" + str(sentence[start:end].isupper()))
    return features


def _before(sentence: str, start: int) -> list[str]:
    """The two tokens before `start`. Read from a window that begins at a space (a token never spans one,
    so they are the tokens the whole prefix gives): tokenizing the whole prefix for every name of a long
    sentence would cost more than the rest of the typing."""
    cut = sentence.rfind(" ", 0, max(0, start - _WINDOW)) if start > _WINDOW else 0
    near = tokens(sentence[max(cut, 0) : start])[-2:]
    return near if len(near) == 2 or cut <= 0 else tokens(sentence[:start])[-2:]


def _after(sentence: str, end: int) -> list[str]:
    cut = sentence.find(" ", end + _WINDOW) if len(sentence) - end > _WINDOW else -1
    near = tokens(sentence[end : cut if cut >= 0 else len(sentence)])[:2]
    return near if len(near) == 2 or cut < 0 else tokens(sentence[end:])[:2]


class SpanTyper:
    """Scores features against the fitted weights; the highest-scoring class is the type."""

    def __init__(self, vocabulary: dict[str, int], weights: np.ndarray, bias: np.ndarray, classes: list[str]):
        if weights.shape != (len(vocabulary), len(classes)) or bias.shape != (len(classes),):
            raise ValueError(
                f"weights {weights.shape} / bias {bias.shape} do not match the vocabulary and classes"
            )
        self._vocabulary = vocabulary
        # A zero row after the weights (`scores_many`); the weights are a view of the rest.
        self._padded = np.concatenate([weights.astype(np.float32), np.zeros((1, len(classes)), np.float32)])
        self._weights = self._padded[:-1]
        self._bias = bias.astype(np.float32)
        self.classes = list(classes)
        digest = hashlib.sha256(json.dumps(self.classes).encode())
        digest.update(json.dumps(sorted(vocabulary.items())).encode())
        digest.update(self._weights.astype(np.float16).tobytes())
        digest.update(self._bias.tobytes())
        # Names the weights: an index records which typer typed its mentions.
        self.version = "typer-" + digest.hexdigest()[:12]

    @property
    def vocabulary(self) -> dict[str, int]:
        return self._vocabulary

    @classmethod
    def load(cls, folder: Path) -> SpanTyper:
        meta = json.loads((folder / "model.json").read_text(encoding="utf-8"))
        vocabulary = json.loads((folder / "vocabulary.json").read_text(encoding="utf-8"))
        arrays = np.load(folder / "weights.npz", allow_pickle=False)
        return cls(
            {f: i for i, f in enumerate(vocabulary)}, arrays["weights"], arrays["bias"], meta["classes"]
        )

    def save(self, folder: Path, provenance: dict[str, object]) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        vocabulary = sorted(self._vocabulary, key=self._vocabulary.__getitem__)
        (folder / "vocabulary.json").write_text(json.dumps(vocabulary, ensure_ascii=False), encoding="utf-8")
        np.savez_compressed(folder / "weights.npz", weights=self._weights.astype(np.float16), bias=self._bias)
        meta = {"classes": self.classes, **provenance}
        (folder / "model.json").write_text(
            json.dumps(meta, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
        )

    def scores(self, features: list[str]) -> np.ndarray:
        """One name's score of each class (`scores_many` of one list)."""
        return self.scores_many([features])[0]

    def scores_many(self, features: Sequence[list[str]]) -> np.ndarray:
        """The score of each class for each feature list (a name), one row each, in one pass over the
        weights: a build types millions of names, and a numpy call per name was most of the typing's
        time. A row adds its known features' weights one after another in the list's order (the shorter
        lists padded with a zero row after), then the bias; so a name's numbers do not depend on the
        batch it is scored in (`np.add.reduceat` sums in pairs, and rounds otherwise)."""
        look = self._vocabulary.get
        known = [[i for i in map(look, names) if i is not None] for names in features]
        lengths = np.fromiter(map(len, known), dtype=np.int64, count=len(known))
        rows = np.full(
            (len(known), max(int(lengths.max(initial=0)), 1)), len(self._vocabulary), dtype=np.int64
        )
        rows[np.arange(rows.shape[1]) < lengths[:, None]] = [i for r in known for i in r]
        return self._padded[rows].sum(axis=1) + self._bias

    def probabilities_many(self, scores: np.ndarray, classes: Sequence[str]) -> np.ndarray:
        """The model's probability of each of `classes` (each one of its own), softmaxed over its classes,
        for each row of `scores_many`: a row per name, a column per one of `classes`."""
        p = np.exp(scores - scores.max(axis=1, keepdims=True))
        p /= p.sum(axis=1, keepdims=True)
        return p[:, [self.classes.index(c) for c in classes]].astype(np.float32)

    def type_of(self, features: list[str]) -> str:
        return self.classes[int(np.argmax(self.scores(features)))]


@cache
def packaged_typer() -> SpanTyper:
    """The weights that ship with the package, read once per process (read-only afterwards)."""
    return SpanTyper.load(FOLDER)


@cache
def _lexicon_file() -> dict[str, list[str]]:
    data: dict[str, list[str]] = json.loads(LEXICON.read_text(encoding="utf-8"))
    return data


@cache
def packaged_lexicon() -> dict[str, str]:
    """Lower-cased name -> type for the names the rules type from a list (written by the fitting script)."""
    data = _lexicon_file()
    return {
        **{name: "place" for name in data["place"]},
        **{name: "other" for name in data["other"] + data["otherCased"]},
    }


@cache
def case_free_names() -> dict[tuple[str, ...], str]:
    """The lexicon's names that text without letter case still shows (not ordinary words such as
    "turkey"), as word tuples -> type."""
    skip = ordinary_words()
    return {tuple(tokens(n)): kind for n, kind in packaged_lexicon().items() if n not in skip and tokens(n)}


@cache
def ordinary_words() -> frozenset[str]:
    """The lexicon's names that are also ordinary English words ("turkey", "polish", "china"): in text
    without letter case nothing tells which is meant."""
    return frozenset(_lexicon_file()["notCaseFree"])


@cache
def case_free_longest() -> int:
    """The most words a case-free name has (how far a match may reach)."""
    return max(map(len, case_free_names()), default=0)


def reload_lexicon() -> None:
    """Read `lexicon.json` again (the fitting script rewrites it)."""
    for cached in (_lexicon_file, packaged_lexicon, ordinary_words, case_free_names, case_free_longest):
        cached.cache_clear()
