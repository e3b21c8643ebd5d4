"""Names that letter case cannot reveal: found by the corpus' own statistics, the same in any casing.

Capitalisation finds names only in normally cased text. Two case-free sources complement it, both over
the words of the whole corpus folded to lower case, so `Text Like This`, `text like this` and
`TEXT LIKE THIS` give the same names:

* the corpus' own document titles (`graph.link_title_names` looks them up with `find_names`);
* `corpus_phrases`: identifier-like words (letters with digits or an inner hyphen: "il-6", "brca1",
  "covid-19", "a380") and word pairs that occur together far more often than chance (normalised PMI over
  sentences; "tumor necrosis", "nine inch"), each in at least two documents and at most a small share of
  them (a phrase everywhere links nothing in particular).

Measured in benchmarks/README.md ("Letter case"); the thresholds are one setting for every corpus.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise

from hybridrag.indexing.analyzers import ENGLISH_STOPWORDS
from hybridrag.indexing.entities import Mention, casing_informative, normalize_name
from hybridrag.indexing.text import has_japanese, split_sentences

_TEXT_WORDS = re.compile(r"[\w\-’'.]+")
_IDENTIFIER = re.compile(r"^(?=.*[a-z])(?=.*(?:\d|[a-z]-[a-z0-9]))[a-z0-9][a-z0-9\-]*[a-z0-9]$")
PHRASE_MIN_DOCS = 2  # a phrase in one document links nothing
PHRASE_MAX_DOC_SHARE = 0.01  # nor one in more than 1% of the documents (with PHRASE_MAX_DOCS_FLOOR)
PHRASE_MAX_DOCS_FLOOR = 20
PAIR_MIN_COUNT = 3
PAIR_MIN_NPMI = 0.5


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
        if has_japanese(sentence):
            continue  # Japanese names come from its morphemes (entities.py)
        words = [w.strip(".'’") for w in _TEXT_WORDS.findall(sentence)]
        words = [w for w in words if w]
        yield SentenceWords(start, end, words, [normalize_name(w) for w in words])


def _is_word(key: str) -> bool:
    return len(key) >= 2 and key not in ENGLISH_STOPWORDS and not key.replace("-", "").isdigit()


def corpus_phrases(docs: Sequence[tuple[str, str]]) -> dict[str, int]:
    """Case-free phrases of a corpus: name -> number of documents it occurs in.

    `docs` are (id, text) pairs: chunks, counted as the documents of the share limits.
    """
    word_docs: dict[str, set[str]] = {}
    pair_docs: dict[str, set[str]] = {}
    word_count: Counter[str] = Counter()
    pair_count: Counter[tuple[str, str]] = Counter()
    total = 0
    all_docs: set[str] = set()
    for doc_id, text in docs:
        all_docs.add(doc_id)
        for s in sentence_words(text):
            keys = s.keys
            total += len(keys)
            word_count.update(keys)
            for k in keys:
                if _IDENTIFIER.match(k):
                    word_docs.setdefault(k, set()).add(doc_id)
            for a, b in pairwise(keys):
                if _is_word(a) and _is_word(b):
                    pair_count[(a, b)] += 1
                    pair_docs.setdefault(f"{a} {b}", set()).add(doc_id)
    most = max(PHRASE_MAX_DOCS_FLOOR, int(PHRASE_MAX_DOC_SHARE * len(all_docs)))
    out = {k: len(d) for k, d in word_docs.items() if PHRASE_MIN_DOCS <= len(d) <= most}
    if total:
        for (a, b), n in pair_count.items():
            if n < PAIR_MIN_COUNT:
                continue
            key = f"{a} {b}"
            n_docs = len(pair_docs[key])
            if not PHRASE_MIN_DOCS <= n_docs <= most:
                continue
            p_ab, p_a, p_b = n / total, word_count[a] / total, word_count[b] / total
            npmi = math.log(p_ab / (p_a * p_b)) / -math.log(p_ab)
            if npmi >= PAIR_MIN_NPMI:
                out[key] = n_docs
    return out


def find_names(
    text: str,
    mentions: Sequence[Mention],
    names: Mapping[str, str],
    proper: bool,
) -> list[Mention]:
    """Mentions of `names` (folded key -> type) in `text` that `mentions` do not already record there.

    Longest match first at each word. With `proper` (names, not terms), where a sentence's letter case says
    something it is believed: a match must start with a capital ("the river" is not the place "River"),
    and one strictly inside a longer name found there is skipped ("Paris" in "Paris Hilton" is someone else).
    """
    if not names:
        return []
    longest = max(len(k.split()) for k in names)
    first_words = {k.split()[0] for k in names}
    have = {(m.key, m.sentence_start) for m in mentions}
    named: dict[int, list[list[str]]] = {}
    for m in mentions:
        if m.sentence_start >= 0:
            named.setdefault(m.sentence_start, []).append(m.key.split())
    added: list[Mention] = []
    for s in sentence_words(text):
        cased = proper and casing_informative(text[s.start : s.end])
        inside = _inside_longer_names(s.keys, named.get(s.start, []) if cased else [])
        for i, first in enumerate(s.keys):
            if first not in first_words or (cased and not s.words[i][:1].isupper()):
                continue
            for j in range(min(len(s.keys), i + longest), i, -1):
                key = normalize_name(" ".join(s.keys[i:j]))
                if key in names and (key, s.start) not in have and not inside(i, j):
                    have.add((key, s.start))
                    added.append(Mention(key, " ".join(s.words[i:j]), names[key], s.start, s.end))
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
