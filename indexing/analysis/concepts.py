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
(`builds.graph_build.link_concepts`).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from itertools import pairwise

from hybridrag.indexing.analysis.analyzers import ENGLISH_STOPWORDS
from hybridrag.indexing.analysis.phrases import sentence_words

MIN_NPMI = 0.5
MIN_CHUNKS = 2
MAX_CHUNK_SHARE = 0.01
MAX_CHUNKS_FLOOR = 20
MIN_WORD_CHARS = 2
MIN_CONCEPT_WORD_CHARS = 4


def _content(word: str) -> bool:
    return len(word) >= MIN_WORD_CHARS and word not in ENGLISH_STOPWORDS and not word.isdigit()


def _concept_word(word: str) -> bool:
    """A word that is a concept on its own when it is specific enough: letters only, not a stopword."""
    return len(word) >= MIN_CONCEPT_WORD_CHARS and word.isalpha() and word not in ENGLISH_STOPWORDS


def corpus_concepts(
    docs: Sequence[tuple[str, str]],
    min_npmi: float = MIN_NPMI,
    max_share: float = MAX_CHUNK_SHARE,
) -> dict[str, int]:
    """Concept phrases of a corpus: phrase -> number of chunks it occurs in.

    `docs` are (id, text) pairs, chunks counted as documents. One pass over the words, linear in them.
    """
    words: Counter[str] = Counter()
    word_chunks: Counter[str] = Counter()
    pairs: Counter[tuple[str, str]] = Counter()
    chunks_of: Counter[tuple[str, str]] = Counter()
    total = 0
    for _doc_id, text in docs:
        seen: set[tuple[str, str]] = set()
        in_chunk: set[str] = set()
        for sentence in sentence_words(text):
            keys = sentence.keys
            words.update(keys)
            in_chunk.update(keys)
            total += len(keys)
            found = [(a, b) for a, b in pairwise(keys) if _content(a) and _content(b)]
            pairs.update(found)
            seen.update(found)
        chunks_of.update(seen)
        word_chunks.update(in_chunk)
    most = max(MAX_CHUNKS_FLOOR, int(max_share * len(docs)))
    out: dict[str, int] = {
        w: c for w, c in word_chunks.items() if MIN_CHUNKS <= c <= most and _concept_word(w)
    }
    for pair, count in pairs.items():
        chunks = chunks_of[pair]
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
