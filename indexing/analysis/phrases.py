"""Names that letter case cannot reveal: found by the corpus' own statistics, the same in any casing.

Capitalisation finds names only in normally cased text. Two case-free sources complement it, both over
the words of the whole corpus folded to lower case, so `Text Like This`, `text like this` and
`TEXT LIKE THIS` give the same names:

* the corpus' own document titles (`graph_build.title_names`, looked up with a `NameDictionary`);
* `corpus_phrases`: identifier-like words (letters with digits or an inner hyphen: "il-6", "brca1",
  "covid-19", "a380"), the names capitalisation rules read as acronyms, each in at least two passages and
  at most a small share of them (a word everywhere links nothing in particular).

Word pairs that occur together far more often than chance (normalised PMI >= 0.5 over sentences, "tumor
necrosis") were tried as well: +0.010 graph nDCG@10 on SciFact, -0.010 on HotpotQA-100, so not kept
(benchmarks/README.md, "Letter case"). The thresholds are one setting for every corpus.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from hybridrag.indexing.analysis.entities import Mention, casing_informative, normalize_name
from hybridrag.indexing.analysis.text import has_japanese, split_sentences

_TEXT_WORDS = re.compile(r"[\w\-’'.]+")
_IDENTIFIER = re.compile(r"^(?=.*[a-z])(?=.*(?:\d|[a-z]-[a-z0-9]))[a-z0-9][a-z0-9\-]*[a-z0-9]$")
PHRASE_MIN_DOCS = 2  # a phrase in one document links nothing
PHRASE_MAX_DOC_SHARE = 0.01  # nor one in more than 1% of the documents (with PHRASE_MAX_DOCS_FLOOR)
PHRASE_MAX_DOCS_FLOOR = 20


@dataclass(frozen=True, slots=True)
class SentenceWords:
    start: int
    end: int
    words: list[str]  # as written (surface forms)
    keys: list[str]  # folded for lookup


def sentence_words(text: str) -> Iterator[SentenceWords]:
    """The words of each non-Japanese sentence of `text`, as written and folded (case, width, possessive)."""
    for start, end in split_sentences(text):
        sentence = text[start:end]
        if sentence.isascii():
            # NFKC leaves ASCII as it is and lower-casing keeps its word boundaries, so the folded words
            # are the words lower-cased (this runs over every word of the corpus twice a graph build,
            # `graph_build.link_corpus_names`).
            words = [w for w in (w.strip(".'") for w in _TEXT_WORDS.findall(sentence)) if w]
            keys = [w.lower() for w in words]
            if "'s" in sentence or "'S" in sentence:
                keys = [_possessive(k) for k in keys]
        else:
            if has_japanese(sentence):
                continue  # Japanese names come from its morphemes (entities.py)
            words = [w for w in (w.strip(".'’") for w in _TEXT_WORDS.findall(sentence)) if w]
            # The sentence folded once, not word by word (the same folding as `normalize_name`).
            keys = [
                _possessive(k) for k in (k.strip(".'’") for k in _TEXT_WORDS.findall(_fold(sentence))) if k
            ]
            if len(keys) != len(words):  # width folding changed the word count: rare, fold word by word
                keys = [normalize_name(w) for w in words]
        yield SentenceWords(start, end, words, keys)


def _span_key(joined: str) -> str:
    """`normalize_name` of folded words joined by spaces. Such a string in ASCII is its own key unless it
    ends in a possessive: most spans a corpus' linking tries are, and asking the name cache for each of
    them (most are tried once) evicts the names it holds."""
    if joined.isascii() and not joined.endswith("'s"):
        return joined
    return normalize_name(joined)


def _possessive(key: str) -> str:
    return key[:-2] if key.endswith(("'s", "’s")) and len(key) > 2 else key


def _fold(text: str) -> str:
    return unicodedata.normalize("NFKC", text).lower()


class PhraseCounter:
    """`corpus_phrases` fed one chunk at a time (its sentences already split into words), so one pass over
    the corpus' words can feed several counters."""

    def __init__(self) -> None:
        self._word_docs: dict[str, set[str]] = {}
        self._docs = 0

    def add(self, doc_id: str, sentences: Iterable[SentenceWords]) -> None:
        self._docs += 1
        for s in sentences:
            for k in s.keys:
                # A word of letters alone has neither a digit nor a hyphen: it cannot be one (most words).
                if not k.isalpha() and _IDENTIFIER.match(k):
                    self._word_docs.setdefault(k, set()).add(doc_id)

    def merge(self, other: PhraseCounter) -> None:
        """Add the counts of another part of the corpus (read after this one)."""
        self._docs += other._docs
        for k, docs in other._word_docs.items():
            self._word_docs.setdefault(k, set()).update(docs)

    def result(self) -> dict[str, int]:
        most = max(PHRASE_MAX_DOCS_FLOOR, int(PHRASE_MAX_DOC_SHARE * self._docs))
        return {k: len(d) for k, d in self._word_docs.items() if PHRASE_MIN_DOCS <= len(d) <= most}


def corpus_phrases(docs: Sequence[tuple[str, str]]) -> dict[str, int]:
    """Case-free names of a corpus, identifier-like words: name -> number of documents it occurs in.

    `docs` are (id, text) pairs: chunks, counted as the documents of the share limits.
    """
    counter = PhraseCounter()
    for doc_id, text in docs:
        counter.add(doc_id, sentence_words(text))
    return counter.result()


class NameDictionary:
    """Names (folded key -> type) to find in text, indexed once for a whole corpus."""

    def __init__(self, names: Mapping[str, str], proper: bool, concepts: bool = False) -> None:
        """`proper`: names, not terms. Where a sentence's letter case says something it is believed then: a
        match must start with a capital ("the river" is not the place "River"), and one strictly inside a
        longer name found there is skipped ("Paris" in "Paris Hilton" is someone else). `concepts`: the
        names are concepts, whose mentions make graph nodes but type no chunk."""
        self.names = dict(names)
        self.proper = proper
        self.concepts = concepts
        # The lengths in words of the names starting with each word, longest first: the spans tried at a
        # word (a name is its folded words joined by single spaces, so a span of another length cannot be
        # one; trying only these is most of what makes linking a corpus' concepts cheap).
        lengths: dict[str, set[int]] = {}
        for key in self.names:
            words = key.split()
            lengths.setdefault(words[0], set()).add(len(words))
        self._lengths_from = {w: tuple(sorted(n, reverse=True)) for w, n in lengths.items()}

    def find(
        self, text: str, mentions: Sequence[Mention], sentences: Sequence[SentenceWords] | None = None
    ) -> list[Mention]:
        """Mentions of the names in `text` that `mentions` do not already record there; longest match first
        at each word. `sentences`: `sentence_words(text)` when the caller has them already."""
        if not self.names:
            return []
        have = {(m.key, m.sentence_start) for m in mentions}
        named: dict[int, list[list[str]]] = {}
        for m in mentions:
            if m.sentence_start >= 0:
                named.setdefault(m.sentence_start, []).append(m.key.split())
        added: list[Mention] = []
        lengths_from = self._lengths_from.get
        for s in sentence_words(text) if sentences is None else sentences:
            cased = self.proper and casing_informative(text[s.start : s.end])
            inside = _inside_longer_names(s.keys, named.get(s.start, []) if cased else [])
            count = len(s.keys)
            # Only the words some name starts with (few of a sentence's words) are looked at further.
            starts = [(i, spans) for i, spans in enumerate(map(lengths_from, s.keys)) if spans is not None]
            for i, spans in starts:
                if cased and not s.words[i][:1].isupper():
                    continue
                for size in spans:
                    j = i + size
                    if j > count:
                        continue
                    key = _span_key(s.keys[i] if size == 1 else " ".join(s.keys[i:j]))
                    if key in self.names and (key, s.start) not in have and not inside(i, j):
                        have.add((key, s.start))
                        surface = " ".join(s.words[i:j])
                        added.append(
                            Mention(
                                key,
                                surface,
                                self.names[key],
                                s.start,
                                s.end,
                                node_only=self.concepts,
                                concept=self.concepts,
                            )
                        )
                        break
        return added


def _inside_longer_names(words: list[str], names: list[list[str]]) -> Callable[[int, int], bool]:
    """Whether words[i:j] lie strictly inside a longer name found in the sentence."""
    spans: list[tuple[int, int]] = []
    for name in names:
        n = len(name)
        if n >= 2:
            spans.extend((i, i + n) for i in range(len(words) - n + 1) if words[i : i + n] == name)

    def inside(i: int, j: int) -> bool:
        return any(a <= i and j <= b and (a, b) != (i, j) for a, b in spans)

    return inside
