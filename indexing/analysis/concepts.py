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
from collections import Counter
from collections.abc import Iterable, Sequence

from hybridrag.indexing.analysis.analyzers import ENGLISH_STOPWORDS
from hybridrag.indexing.analysis.phrases import SentenceWords, sentence_words

MIN_NPMI = 0.5
MIN_CHUNKS = 2
MAX_CHUNK_SHARE = 0.01
MAX_CHUNKS_FLOOR = 20
MIN_WORD_CHARS = 2
MIN_CONCEPT_WORD_CHARS = 4


def _concept_word(word: str) -> bool:
    """A word that is a concept on its own when it is specific enough: letters only, not a stopword."""
    return len(word) >= MIN_CONCEPT_WORD_CHARS and word.isalpha() and word not in ENGLISH_STOPWORDS


class ConceptCounter:
    """`corpus_concepts` fed one chunk at a time (its sentences already split into words), so one pass over
    the corpus' words can feed several counters."""

    def __init__(self) -> None:
        self.words: Counter[str] = Counter()
        self.word_chunks: Counter[str] = Counter()
        self.pairs: Counter[tuple[str, str]] = Counter()
        self.chunks_of: Counter[tuple[str, str]] = Counter()
        self.total = 0
        self.docs = 0

    def add(self, sentences: Iterable[SentenceWords]) -> None:
        self.docs += 1
        seen: set[tuple[str, str]] = set()
        in_chunk: set[str] = set()
        stop = ENGLISH_STOPWORDS
        for sentence in sentences:
            keys = sentence.keys
            self.words.update(keys)
            in_chunk.update(keys)
            self.total += len(keys)
            # Content words (two letters or more, not a stopword, not a number), once a word, not once for
            # each pair it is in: this runs over every word of the corpus.
            content = [len(k) >= MIN_WORD_CHARS and k not in stop and not k.isdigit() for k in keys]
            found = [
                (a, b) for a, b, x, y in zip(keys, keys[1:], content, content[1:], strict=False) if x and y
            ]
            self.pairs.update(found)
            seen.update(found)
        self.chunks_of.update(seen)
        self.word_chunks.update(in_chunk)

    def merge(self, other: ConceptCounter) -> None:
        """Add the counts of another part of the corpus (read after this one)."""
        self.words.update(other.words)
        self.word_chunks.update(other.word_chunks)
        self.pairs.update(other.pairs)
        self.chunks_of.update(other.chunks_of)
        self.total += other.total
        self.docs += other.docs

    def result(self, min_npmi: float = MIN_NPMI, max_share: float = MAX_CHUNK_SHARE) -> dict[str, int]:
        """Concept phrase -> number of chunks it occurs in."""
        words, total = self.words, self.total
        most = max(MAX_CHUNKS_FLOOR, int(max_share * self.docs))
        out: dict[str, int] = {
            w: c for w, c in self.word_chunks.items() if MIN_CHUNKS <= c <= most and _concept_word(w)
        }
        for pair, count in self.pairs.items():
            chunks = self.chunks_of[pair]
            if not MIN_CHUNKS <= chunks <= most:
                continue
            a, b = pair
            p_pair = count / total
            if p_pair >= 1.0:
                continue
            npmi = math.log(p_pair / ((words[a] / total) * (words[b] / total))) / -math.log(p_pair)
            if npmi >= min_npmi:
                out[f"{a} {b}"] = chunks
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
