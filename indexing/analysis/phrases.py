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
(benchmarks/docs/quality.md, "Letter case"). The thresholds are one setting for every corpus.
"""

from __future__ import annotations

import itertools
import re
import unicodedata
from array import array
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from hybridrag.indexing.analysis.entities import Mention, casing_informative, normalize_name
from hybridrag.indexing.analysis.text import reads_as_japanese, split_sentences

_TEXT_WORDS = re.compile(r"[\w\-’'.]+")
# In ASCII text, a run of `_TEXT_WORDS`' characters without its leading and trailing full stops and
# apostrophes, found as such (a run of those alone is no word).
_ASCII_WORDS = re.compile(r"[\w\-](?:[\w\-'.]*[\w\-])?")
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
            # are the words lower-cased, folded in one call (this runs over every word of the corpus twice
            # a graph build, `graph_build.link_corpus_names`; no word holds a line break).
            words = _ASCII_WORDS.findall(sentence)
            keys = "\n".join(words).lower().split("\n") if words else []
            if "'s" in sentence or "'S" in sentence:
                keys = [_possessive(k) for k in keys]
        else:
            if reads_as_japanese(sentence):
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
        first_words = self._lengths_from.keys()
        for s in sentence_words(text) if sentences is None else sentences:
            if first_words.isdisjoint(s.keys):
                continue  # no name starts at any of its words (most sentences, for most dictionaries)
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


@dataclass(slots=True)
class FoundConcept:
    """What a block of chunks' mentions of one concept add up to (`ConceptFinder.found`)."""

    key: str
    mentions: int
    chunks: list[int]  # the chunks (their places in the block) that mention it, each once, in order
    first: tuple[int, int, int]  # the first mention's chunk, sentence start and end
    surfaces: dict[str, int]  # as written -> mentions, in the order they first came


class WordBlock:
    """The words of a block of chunks as integers, for counting and matching over them with numpy
    (`concepts.ConceptCounter`, `ConceptFinder`), which run over every word of a corpus at each graph
    build.

    Each folded word (and, with `surfaces`, each word as written) takes an id the first time it comes, in
    one dictionary lookup in C; ids last from block to block, so per-id arrays grow with the words that
    are new (`new_words`). A block holds the words' ids in order, and for each sentence its number of
    words, its chunk's place in the block and, with `surfaces`, its start and end in its chunk's text."""

    def __init__(self, surfaces: bool = False) -> None:
        self.ids: defaultdict[str, int] = defaultdict(itertools.count().__next__)
        self.surface_ids: defaultdict[str, int] | None = (
            defaultdict(itertools.count().__next__) if surfaces else None
        )
        self.clear()

    def clear(self) -> None:
        """Starts the next block (the ids stay)."""
        self.words: array[int] = array("q")
        self.surfaces: array[int] = array("q")
        self.sentence_words: array[int] = array("q")
        self.sentence_chunk: array[int] = array("q")
        self.sentence_span: array[int] = array("q")  # start, end of each sentence
        self.chunks = 0

    def add(self, sentences: Iterable[SentenceWords]) -> None:
        """The next chunk's sentences (`sentence_words` of its text)."""
        word_id = self.ids.__getitem__
        if self.surface_ids is None:
            for s in sentences:
                # A new word takes the next id (the dictionary's default).
                self.words.extend(map(word_id, s.keys))
                self.sentence_words.append(len(s.keys))
                self.sentence_chunk.append(self.chunks)
        else:
            surface_id = self.surface_ids.__getitem__
            for s in sentences:
                self.words.extend(map(word_id, s.keys))
                self.surfaces.extend(map(surface_id, s.words))
                self.sentence_words.append(len(s.keys))
                self.sentence_chunk.append(self.chunks)
                self.sentence_span.extend((s.start, s.end))
        self.chunks += 1

    def new_words(self, known: int) -> list[str]:
        """The folded words whose ids are `known` and above, in id order."""
        return list(itertools.islice(self.ids, known, None))

    def spelled(self) -> list[str]:
        """Every folded word, indexed by its id."""
        return list(self.ids)

    def word_arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The block's word ids, each word's sentence and each sentence's chunk (places in the block)."""
        words = np.frombuffer(self.words, dtype=np.int64)
        lengths = np.frombuffer(self.sentence_words, dtype=np.int64)
        sentence = np.repeat(np.arange(len(lengths)), lengths)
        return words, sentence, np.frombuffer(self.sentence_chunk, dtype=np.int64)

    def __getstate__(self) -> dict[str, object]:
        # Sent to the build's process by a shard: the dictionaries as lists of their words.
        state = dict(self.__dict__)
        state["ids"] = list(self.ids)
        state["surface_ids"] = None if self.surface_ids is None else list(self.surface_ids)
        return state

    def __setstate__(self, state: dict[str, object]) -> None:
        for name in ("ids", "surface_ids"):
            words = state[name]
            if isinstance(words, list):
                state[name] = defaultdict(itertools.count(len(words)).__next__, zip(words, itertools.count()))
        self.__dict__.update(state)


class ConceptFinder:
    """The mentions of a concept dictionary's names (`NameDictionary` with `concepts`) in many chunks at
    once, as `NameDictionary.find` finds them chunk by chunk, added up by concept.

    Concepts are most of a corpus' mentions (a dozen a sentence), and finding them a word and a mention at
    a time was most of a graph build's linking. Here the words are integers (`WordBlock`) and the matching
    runs over the arrays of a whole block: at each word the two-word concept it starts, else the one-word
    concept it is, each concept once a sentence: what `find` finds with a dictionary of one- and two-word
    names that is not `proper` (tested against it)."""

    def __init__(self, dictionary: NameDictionary) -> None:
        if not dictionary.concepts or dictionary.proper:
            raise ValueError("a ConceptFinder finds a concept dictionary's names")
        if any(len(key.split()) > 2 for key in dictionary.names):
            raise ValueError("concepts are one or two words")
        self._keys = list(dictionary.names)
        self._concept = {key: i for i, key in enumerate(self._keys)}
        self._lengths_from = dictionary._lengths_from
        self._block = WordBlock(surfaces=True)
        # Per word id: the one-word concept it is (-1: none), whether it starts a two-word one, whether it
        # is ASCII, whether it ends in a possessive (a span's key is then not its words joined, `_span_key`).
        self._one = np.zeros(0, dtype=np.int64)
        self._starts_pair = np.zeros(0, dtype=bool)
        self._ascii = np.zeros(0, dtype=bool)
        self._possessive = np.zeros(0, dtype=bool)
        pairs = [key.split() for key in self._keys]
        ids = self._block.ids
        codes = np.asarray(
            [(ids[w[0]] << 32) | ids[w[1]] if len(w) == 2 else -1 for w in pairs],
            dtype=np.int64,
        )
        order = np.argsort(codes, kind="stable")
        keep = codes[order] >= 0
        self._pair_codes, self._pair_concepts = codes[order][keep], order[keep]

    def add(self, sentences: Iterable[SentenceWords]) -> None:
        """The next chunk's sentences (`sentence_words` of its text)."""
        self._block.add(sentences)

    def _grow(self) -> None:
        """Per word id arrays for the words seen since the last block."""
        words = self._block.new_words(len(self._one))
        if not words:
            return
        lengths = [self._lengths_from.get(w, ()) for w in words]
        self._one = np.concatenate(
            [
                self._one,
                [
                    self._concept.get(_span_key(w), -1) if 1 in n else -1
                    for w, n in zip(words, lengths, strict=True)
                ],
            ]
        ).astype(np.int64)
        self._starts_pair = np.concatenate([self._starts_pair, [2 in n for n in lengths]]).astype(bool)
        self._ascii = np.concatenate([self._ascii, [w.isascii() for w in words]]).astype(bool)
        self._possessive = np.concatenate([self._possessive, [w.endswith("'s") for w in words]]).astype(bool)

    def found(self) -> list[FoundConcept]:
        """The concepts the chunks added since the last call mention, in dictionary order; starts anew."""
        self._grow()
        words, sentence, chunk_of = self._block.word_arrays()
        n = len(words)
        last = np.r_[sentence[1:] != sentence[:-1], True] if n else np.zeros(0, dtype=bool)
        # Two-word concepts: the words that start one, and the word after them in the same sentence.
        at = np.flatnonzero(self._starts_pair[words] & ~last)
        first_word, second_word = words[at], words[at + 1]
        codes = (first_word << 32) | second_word
        place = np.minimum(np.searchsorted(self._pair_codes, codes), max(len(self._pair_codes) - 1, 0))
        hit = self._pair_codes[place] == codes if len(self._pair_codes) else np.zeros(len(at), dtype=bool)
        pair = np.full(n, -1, dtype=np.int64)
        pair[at[hit]] = self._pair_concepts[place[hit]]
        # A span that is not ASCII or ends in a possessive has a key of its own (`_span_key`): looked up.
        plain = self._ascii[first_word] & self._ascii[second_word] & ~self._possessive[second_word]
        if not plain.all():
            spelled = self._block.spelled()
            for i in at[~plain]:
                key = _span_key(spelled[words[i]] + " " + spelled[words[i + 1]])
                pair[i] = self._concept.get(key, -1)
        # Each concept once a sentence, at its first place; where a word's two-word concept is not taken
        # there, the one-word concept it is, once a sentence as well.
        concepts = len(self._keys)
        pairs = _first_each(np.flatnonzero(pair >= 0), sentence, pair, concepts)
        one = self._one[words]
        one[pairs] = -1
        ones = _first_each(np.flatnonzero(one >= 0), sentence, one, concepts)
        places = np.concatenate([pairs, ones])
        concept = np.concatenate([pair[pairs], one[ones]])
        size = np.concatenate([np.full(len(pairs), 2), np.ones(len(ones), dtype=np.int64)])
        out = self._sum_up(places, concept, size, sentence, chunk_of)
        self._block.clear()
        return out

    def _sum_up(
        self,
        places: np.ndarray,
        concept: np.ndarray,
        size: np.ndarray,
        sentence: np.ndarray,
        chunk_of: np.ndarray,
    ) -> list[FoundConcept]:
        order = np.lexsort((places, concept))  # by concept, then where in the block
        places, concept, size = places[order], concept[order], size[order]
        if not len(places):
            return []
        span = np.frombuffer(self._block.sentence_span, dtype=np.int64).reshape(-1, 2)
        chunk = chunk_of[sentence[places]]
        starts = np.flatnonzero(np.r_[True, concept[1:] != concept[:-1]])
        bounds = np.r_[starts, len(places)]
        # A concept's chunks: where the chunk changes within its run (its mentions are in block order).
        new_chunk = np.r_[True, (concept[1:] != concept[:-1]) | (chunk[1:] != chunk[:-1])]
        chunk_starts = np.searchsorted(np.flatnonzero(new_chunk), bounds)
        chunk_list: list[int] = chunk[new_chunk].tolist()
        # Surfaces: the written words of each mention, counted per concept in the order they came.
        surfaces = np.frombuffer(self._block.surfaces, dtype=np.int64)
        second = np.where(size == 2, surfaces[np.minimum(places + 1, len(surfaces) - 1)] + 1, 0)
        written = (surfaces[places] << 32) | second
        _u, form = np.unique(written, return_inverse=True)
        keyed = concept * (len(places) + 1) + form.ravel()
        unique_keyed, first, counts = np.unique(keyed, return_index=True, return_counts=True)
        by_first = np.lexsort((first, unique_keyed // (len(places) + 1)))
        first, counts = first[by_first], counts[by_first]
        spelled = list(self._block.surface_ids or ())
        texts = [
            spelled[surfaces[p]] + (" " + spelled[surfaces[p + 1]] if s == 2 else "")
            for p, s in zip(places[first].tolist(), size[first].tolist(), strict=True)
        ]
        surface_bounds = [*np.searchsorted(concept[first], concept[starts]).tolist(), len(first)]
        counts_list = counts.tolist()
        lead = sentence[places[starts]]
        keys = [self._keys[c] for c in concept[starts].tolist()]
        # Python lists, not numpy scalars, in the loop over concepts (~100k a block).
        chunk_bounds: list[int] = np.asarray(chunk_starts).tolist()
        lead_chunk, lead_start, lead_end = (
            chunk_of[lead].tolist(),
            span[lead, 0].tolist(),
            span[lead, 1].tolist(),
        )
        mentions = np.diff(bounds).tolist()
        out = []
        for i, key in enumerate(keys):
            sa, sb = surface_bounds[i], surface_bounds[i + 1]
            out.append(
                FoundConcept(
                    key,
                    mentions[i],
                    chunk_list[chunk_bounds[i] : chunk_bounds[i + 1]],
                    (lead_chunk[i], lead_start[i], lead_end[i]),
                    dict(zip(texts[sa:sb], counts_list[sa:sb], strict=True)),
                )
            )
        return out


def _first_each(places: np.ndarray, sentence: np.ndarray, concept: np.ndarray, concepts: int) -> np.ndarray:
    """Of `places` (ascending), the first of each concept in each sentence."""
    if not len(places):
        return places
    _u, first = np.unique(sentence[places] * (concepts + 1) + concept[places], return_index=True)
    return places[np.sort(first)]
