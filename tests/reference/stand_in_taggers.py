"""Stand-ins for the English name tagger in tests (they read or tag what the test says), and a tiny CoNLL
training file for the fitting scripts' tests."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np

from hybridrag.indexing.analysis.name_tagger import SpanReading, Tag


class ReadingTagger:
    """A stand-in for the name tagger: it finds no name itself and reads each span `text[a:b]` given to it
    as `read(text, a, b)` says."""

    version = "tagger-test"
    kinds = ("person", "organization", "place", "other")
    # The words its vocabulary holds whole (`NameTagger.common_word`), lower-cased.
    common = frozenset(
        "results background design setting participants main outcome measures purpose nascar".split()
    )

    def __init__(self, read: Callable[[str, int, int], SpanReading]) -> None:
        self._read = read

    def common_word(self, word: str) -> bool:
        return word.lower() in self.common

    def tag(self, texts: list[str]) -> list[list[object]]:
        return [[] for _ in texts]

    def span_readings(self, texts: list[str], spans: list[list[tuple[int, int]]]) -> list[list[SpanReading]]:
        return [[self._read(t, a, b) for a, b in s] for t, s in zip(texts, spans, strict=True)]


def outside_tagger(outside: dict[str, float], kind: str) -> ReadingTagger:
    """A stand-in tagger that reads every span as a name of `kind`, its "O" probability `outside[span]` (0 for
    a span not in it)."""
    types = np.eye(len(ReadingTagger.kinds), dtype=np.float32)[ReadingTagger.kinds.index(kind)]
    return ReadingTagger(lambda text, a, b: SpanReading(types, outside.get(text[a:b], 0.0)))


class SureTagger:
    """A stand-in for the case-less tagger: it tags the first occurrence of each of its (words, type) pairs in
    a text, sure of each (0.99)."""

    version = "tagger-sure"
    kinds = ("person", "organization", "place", "other")

    def __init__(self, spans: list[tuple[str, str]]) -> None:
        self._spans = spans

    def tag(self, texts: list[str]) -> list[list[Tag]]:
        return [
            [Tag(t.index(w), t.index(w) + len(w), k, 0.99) for w, k in self._spans if w in t] for t in texts
        ]


TRAINING_ROWS = [
    ("John Smith works for Acme Corp in Boston .", ["B-PER", "I-PER", "O", "O", "B-ORG", "I-ORG", "O", "B-LOC", "O"]),
    ("Mary Jones visited Paris with Globex Inc .", ["B-PER", "I-PER", "O", "B-LOC", "O", "B-ORG", "I-ORG", "O"]),
    ("The Olympics were held in Rome by Initech .", ["O", "O", "O", "O", "O", "B-LOC", "O", "B-ORG", "O"]),
]  # fmt: skip


def training_file(path: Path, rows: list[tuple[str, list[str]]]) -> Path:
    """A CoNLL file (index, token, BIO tag) of `rows`."""
    path.write_text(
        "\n".join(
            "\n".join(f"{i}\t{w}\t{t}" for i, (w, t) in enumerate(zip(text.split(), tags, strict=True)))
            + "\n"
            for text, tags in rows
        ),
        "utf-8",
    )
    return path
