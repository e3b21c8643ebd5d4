"""Concepts: phrases that recur in a corpus and carry meaning, found by its own statistics in any letter case.

Names give the graph its nodes where text has capitals, titles or identifiers. Text with none of them (OCR
output, old typewritten reports, chat logs, lower-cased research sets, physics abstracts in capitals) would
have no graph at all. GraphRAG and LightRAG get such nodes from an LLM that names concepts as well as
entities; here they come from the corpus' own statistics, in any letter case (counted over the words folded
to lower case, so `text like this` and `TEXT LIKE THIS` give the same concepts):

* word pairs, as gensim's `Phrases` (normalised PMI scoring) and AutoPhrase find them: two adjacent content
  words whose normalised pointwise mutual information over the corpus' words is at least `MIN_NPMI`
  ("tumour necrosis", "substantia nigra", "scott derrickson");
* single words of `MIN_CONCEPT_WORD_CHARS` letters or more that are not stopwords ("autophagy",
  "derrickson").

Each occurs in at least `MIN_CHUNKS` chunks (one in a single chunk links nothing) and at most a small share
of them (one everywhere links nothing in particular). How much the walk follows a concept depends on how
specific it is (`stores.graph_weights.CONCEPT_SPECIFICITY_POWER`): a rare one leads somewhere, a common one
spreads thin.

Concepts are graph nodes typed `other` that type no chunk (node-only mentions: they are not names, so no
`entityTypes` filter is met by them). A concept spelled as a name the corpus mentions is left to the name
(`builds.graph_build.link_corpus_names`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from hybridrag.indexing.analysis.analyzers import ENGLISH_STOPWORDS
from hybridrag.indexing.analysis.phrases import SentenceWords, WordBlock, sentence_words

MIN_NPMI = 0.5
MIN_CHUNKS = 2
MAX_CHUNK_SHARE = 0.01
MAX_CHUNKS_FLOOR = 20
MIN_WORD_CHARS = 2
MIN_CONCEPT_WORD_CHARS = 4
# Blocks' pairs held apart before they are added up (`ConceptCounter`): each block's distinct pairs take
# ~24 bytes a pair, and a shard of a million-chunk corpus counts dozens of blocks.
PAIR_PARTS = 8


def _concept_word(word: str) -> bool:
    """A word that is a concept on its own when it is specific enough: letters only, not a stopword."""
    return len(word) >= MIN_CONCEPT_WORD_CHARS and word.isalpha() and word not in ENGLISH_STOPWORDS


class ConceptCounter:
    """`corpus_concepts` fed one chunk at a time (its sentences already split into words), so one pass over
    the corpus' words can feed several counters.

    This runs over every word of a corpus at each graph build. The words are integers (`WordBlock`) and
    the counting runs over a block of `BLOCK_WORDS` words at a time with numpy:
    the words' counts, the chunks each word is in, the adjacent content-word pairs of a sentence with their
    counts and chunks (tested against counting word by word). The blocks' pairs are added up every
    `PAIR_PARTS` blocks and when the counts are read, merged or sent."""

    BLOCK_WORDS = 2_000_000

    def __init__(self) -> None:
        self._block = WordBlock()
        self._counts = np.zeros(0, dtype=np.int64)  # per word id: occurrences
        self._chunk_counts = np.zeros(0, dtype=np.int64)  # per word id: chunks it is in
        self._content = np.zeros(0, dtype=bool)  # per word id: two letters or more, no stopword, no number
        # Per block: the distinct pairs' codes (first id << 32 | second id), occurrences and chunks.
        self._pairs: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        self.total = 0
        self.docs = 0

    def add(self, sentences: Iterable[SentenceWords]) -> None:
        self._block.add(sentences)
        self.docs += 1
        if len(self._block.words) >= self.BLOCK_WORDS:
            self._count_block()

    def _grow(self) -> None:
        """Per word id arrays for the words seen since they were last grown."""
        new = self._block.new_words(len(self._counts))
        if not new:
            return
        stop = ENGLISH_STOPWORDS
        content = [len(k) >= MIN_WORD_CHARS and k not in stop and not k.isdigit() for k in new]
        self._content = np.concatenate([self._content, np.asarray(content, dtype=bool)])
        pad = np.zeros(len(new), dtype=np.int64)
        self._counts = np.concatenate([self._counts, pad])
        self._chunk_counts = np.concatenate([self._chunk_counts, pad])

    def _count_block(self) -> None:
        self._grow()
        words, sentence, sentence_chunk = self._block.word_arrays()
        if len(words):
            vocabulary = len(self._counts)
            chunk = sentence_chunk[sentence]
            self.total += len(words)
            self._counts += np.bincount(words, minlength=vocabulary)
            # Counts asked for though unused: without them numpy 2's `unique` hashes, which took 6.5 s for
            # 4M integers here against 0.07 s sorting them.
            in_chunk, _n = np.unique(chunk * vocabulary + words, return_counts=True)
            self._chunk_counts += np.bincount(in_chunk % vocabulary, minlength=vocabulary)
            # Adjacent words of one sentence, both content words.
            keep = (sentence[1:] == sentence[:-1]) & self._content[words[:-1]] & self._content[words[1:]]
            codes = (words[:-1][keep] << 32) | words[1:][keep]
            unique, pair, counts = np.unique(codes, return_inverse=True, return_counts=True)
            pair = pair.ravel()
            in_chunks, _n = np.unique(chunk[:-1][keep] * len(unique) + pair, return_counts=True)
            in_chunks %= max(len(unique), 1)
            self._pairs.append((unique, counts, np.bincount(in_chunks, minlength=len(unique))))
            if len(self._pairs) >= PAIR_PARTS:
                self._add_up_pairs()
        self._block.clear()

    def _pair_totals(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Every block's pairs added up: codes (ascending), occurrences, chunks."""
        self._count_block()
        self._add_up_pairs()
        return self._pairs[0]

    def _add_up_pairs(self) -> None:
        if len(self._pairs) != 1:
            parts = self._pairs or [(np.zeros(0, dtype=np.int64),) * 3]
            codes, which = np.unique(np.concatenate([p[0] for p in parts]), return_inverse=True)
            which = which.ravel()
            counts = np.bincount(which, np.concatenate([p[1] for p in parts]), len(codes))
            chunks = np.bincount(which, np.concatenate([p[2] for p in parts]), len(codes))
            self._pairs = [(codes, counts.astype(np.int64), chunks.astype(np.int64))]

    def merge(self, other: ConceptCounter) -> None:
        """Add the counts of another part of the corpus (read after this one)."""
        self._count_block()
        other._count_block()
        # The other's word ids as this one's (its new words take the next ids, in its order).
        ids = self._block.ids
        theirs = other._block.ids
        remap = np.fromiter(map(ids.__getitem__, theirs), dtype=np.int64, count=len(theirs))
        self._grow()
        # Distinct words have distinct ids: a plain indexed addition adds each once.
        self._counts[remap] += other._counts
        self._chunk_counts[remap] += other._chunk_counts
        codes, counts, chunks = other._pair_totals()
        if len(codes):
            codes = (remap[codes >> 32] << 32) | remap[codes & 0xFFFFFFFF]
            self._pairs.append((codes, counts, chunks))
        self.total += other.total
        self.docs += other.docs

    def __getstate__(self) -> dict[str, Any]:
        # Shards send their counters to the build's process: the blocks counted and added up.
        self._pair_totals()
        return self.__dict__

    def result(self, min_npmi: float = MIN_NPMI, max_share: float = MAX_CHUNK_SHARE) -> dict[str, int]:
        """Concept phrase -> number of chunks it occurs in: the words in the order they first came, then
        the pairs in the order of their words' first coming."""
        codes, counts, chunks = self._pair_totals()
        spelled = self._block.spelled()
        total = self.total
        most = max(MAX_CHUNKS_FLOOR, int(max_share * self.docs))
        word_chunks = self._chunk_counts.tolist()
        out: dict[str, int] = {}
        for i in np.flatnonzero((self._chunk_counts >= MIN_CHUNKS) & (self._chunk_counts <= most)).tolist():
            if _concept_word(spelled[i]):
                out[spelled[i]] = word_chunks[i]
        keep = (chunks >= MIN_CHUNKS) & (chunks <= most) & (counts < total)
        first, second = codes[keep] >> 32, codes[keep] & 0xFFFFFFFF
        pair_counts, pair_chunks = counts[keep], chunks[keep]
        if total and len(first):
            p_pair = pair_counts / total
            p_words = (self._counts[first] / total) * (self._counts[second] / total)
            npmi = np.log(p_pair / p_words) / -np.log(p_pair)
            # numpy's logarithm may differ from `math.log` in the last place: the ones near the bar are
            # decided as the scalar formula decides them.
            near = np.flatnonzero(npmi >= min_npmi - 1e-9)
            word_counts = self._counts.tolist()
            for a, b, n, c in zip(
                first[near].tolist(),
                second[near].tolist(),
                pair_counts[near].tolist(),
                pair_chunks[near].tolist(),
                strict=True,
            ):
                p = n / total
                if (
                    math.log(p / ((word_counts[a] / total) * (word_counts[b] / total))) / -math.log(p)
                    >= min_npmi
                ):
                    out[f"{spelled[a]} {spelled[b]}"] = c
        return out


def corpus_concepts(
    docs: Sequence[tuple[str, str]],
    min_npmi: float = MIN_NPMI,
    max_share: float = MAX_CHUNK_SHARE,
) -> dict[str, int]:
    """Concept phrases of a corpus: phrase -> number of chunks it occurs in.

    `docs` are (id, text) pairs, chunks counted as documents. One pass over the words, linear in them.
    """
    counter = ConceptCounter()
    for _doc_id, text in docs:
        counter.add(sentence_words(text))
    return counter.result(min_npmi, max_share)
