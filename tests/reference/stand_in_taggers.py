"""Stand-ins for the English name tagger in tests: they read the spans they are given as the test says."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from hybridrag.indexing.analysis.name_tagger import SpanReading


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
