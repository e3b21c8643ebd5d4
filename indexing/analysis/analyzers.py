"""Keyword analysis for English and Japanese, shared by indexing and querying.

Everything is tokenized here in Python and handed to tantivy as whitespace-separated tokens: tantivy's
Python bindings have no Japanese morphological analyzer, custom analyzers are not stored in an index, and
the reference BM25 (bm25s) in the benchmarks must see exactly the same tokens.

* English: Unicode word tokens, lowercased, English stopwords removed, Snowball (Porter2) stemming.
* Japanese: Sudachi (core dictionary, split mode B) normalized forms, dropping particles, auxiliary verbs
  and symbols; ASCII words inside Japanese text go through the English pipeline so both languages agree.
* Bigrams: character bigrams over runs of Japanese script (a lower-weighted fallback field).
"""

from __future__ import annotations

import itertools
import re
import threading
import unicodedata
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

import Stemmer

from hybridrag.indexing.analysis.text import has_japanese

ENGLISH_STOPWORDS = frozenset(
    (
        "a about above after again against all am an and any are aren't as at be because been before "
        "being below between both but by can can't cannot could couldn't did didn't do does doesn't doing "
        "don't down during each few for from further had hadn't has hasn't have haven't having he he'd "
        "he'll he's her here here's hers herself him himself his how how's i i'd i'll i'm i've if in into "
        "is isn't it it's its itself let's me more most mustn't my myself no nor not of off on once only "
        "or other ought our ours ourselves out over own same shan't she she'd she'll she's should "
        "shouldn't so some such than that that's the their theirs them themselves then there there's "
        "these they they'd they'll they're they've this those through to too under until up very was "
        "wasn't we we'd we'll we're we've were weren't what what's when when's where where's which while "
        "who who's whom why why's will with won't would wouldn't you you'd you'll you're you've your "
        "yours yourself yourselves"
    ).split()
)

MEMO_WORDS = 100_000  # distinct words an English analyzer remembers the tokens of (~20 MB at most)
_UNSEEN: Any = object()

WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)*")
ASCII_WORD = re.compile(r"^[0-9A-Za-z]+(?:['’][A-Za-z]+)?$")
_JA_RUN = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\u3005\u30fc]+")
# Sudachi refuses inputs over ~49 KB; chunks are far smaller, but free text from a query need not be.
_SUDACHI_MAX_CHARS = 12_000
JA_DROP_POS = frozenset({"助詞", "助動詞", "補助記号", "空白", "記号"})
# Function-like words that carry no topic: light verbs, formal nouns, demonstratives, question words.
JA_STOPWORDS = frozenset(
    (
        "する ある いる なる れる られる できる こと もの よう ため ところ これ それ あれ どれ この その あの どの 何 誰 どこ いつ どう なぜ どんな くらい 為る 居る 有る "
        "成る 出来る 事 物 様 為 所 其れ 此れ 彼れ 何れ 此の 其の 彼の 何処 何時"
    ).split()
)


class EnglishAnalyzer:
    """Lowercase, stopword removal and Snowball English stemming (the same as the bm25s baseline)."""

    def __init__(self, memo_size: int = MEMO_WORDS) -> None:
        self._local = threading.local()
        # word as written -> its token: a result page stems the same few thousand words over and over.
        # Bounded (emptied when full); single dict reads and writes are atomic, so threads may share it.
        self._memo: dict[str, str | None] = {}
        self._memo_size = memo_size

    def _stemmer(self) -> Any:
        stemmer = getattr(self._local, "stemmer", None)
        if stemmer is None:
            stemmer = Stemmer.Stemmer("english")
            self._local.stemmer = stemmer
        return stemmer

    def normalize_word(self, word: str) -> str | None:
        word = word.lower().replace("’", "'")
        if word in ENGLISH_STOPWORDS:
            return None
        return str(self._stemmer().stemWord(word))

    def normalize_words(self, words: Sequence[str]) -> list[str | None]:
        """`normalize_word` of each word: remembered ones looked up, the rest stemmed in one call (a highlight
        pass normalizes every word of a page)."""
        memo = self._memo
        out = list(map(memo.get, words, itertools.repeat(_UNSEEN, len(words))))
        if _UNSEEN in out:  # most words of a corpus are remembered after its first chunks
            unseen = list(dict.fromkeys(w for w, t in zip(words, out, strict=True) if t is _UNSEEN))
            lowered = [w.lower().replace("’", "'") for w in unseen]
            stems = self._stemmer().stemWords(lowered)
            fresh = {
                word: None if low in ENGLISH_STOPWORDS else str(stem)
                for word, low, stem in zip(unseen, lowered, stems, strict=True)
            }
            if len(memo) + len(fresh) > self._memo_size:
                memo.clear()
            memo.update(fresh)
            # From `fresh`, not the memory: another thread may empty that meanwhile.
            out = [fresh[w] if t is _UNSEEN else t for w, t in zip(words, out, strict=True)]
        return out

    def tokens(self, text: str) -> list[str]:
        text = unicodedata.normalize("NFKC", text)
        # The pattern has no group: `findall` gives the words themselves, without a match object each.
        return list(filter(None, self.normalize_words(WORD.findall(text))))


class JapaneseAnalyzer:
    """Sudachi morphological analysis (normalized forms); one tokenizer per thread (they are not shareable)."""

    def __init__(self, english: EnglishAnalyzer, split_mode: str = "B") -> None:
        self._english = english
        self._split_mode = split_mode
        self._local = threading.local()

    def _tokenizer(self) -> Any:
        tok = getattr(self._local, "tokenizer", None)
        if tok is None:
            from sudachipy import SplitMode

            mode = {"A": SplitMode.A, "B": SplitMode.B, "C": SplitMode.C}[self._split_mode]
            dictionary = _dictionary()
            # sudachipy 0.7 renamed create() to tokenizer(); keep working with both.
            factory = getattr(dictionary, "tokenizer", None) or dictionary.create
            tok = factory(mode=mode)
            self._local.tokenizer = tok
        return tok

    def morphemes(self, text: str) -> list[tuple[str, str, tuple[str, ...], int, int]]:
        """(surface, normalized form, part of speech, begin, end) for each morpheme; offsets in characters."""
        out = []
        tok = self._tokenizer()
        for base in range(0, len(text), _SUDACHI_MAX_CHARS):
            piece = text[base : base + _SUDACHI_MAX_CHARS]
            for m in tok.tokenize(piece):
                out.append(
                    (
                        m.surface(),
                        m.normalized_form(),
                        tuple(m.part_of_speech()),
                        base + m.begin(),
                        base + m.end(),
                    )
                )
        return out

    def tokens(self, text: str) -> list[str]:
        text = unicodedata.normalize("NFKC", text)
        out = []
        for surface, normalized, pos, _b, _e in self.morphemes(text):
            if pos[0] in JA_DROP_POS or not surface.strip():
                continue
            if ASCII_WORD.match(surface):
                token = self._english.normalize_word(surface)
                if token:
                    out.append(token)
            elif WORD.search(normalized) and normalized not in JA_STOPWORDS:
                out.append(normalized.lower())
        return out


@lru_cache(maxsize=1)
def _dictionary() -> Any:
    from sudachipy import Dictionary

    return Dictionary(dict="core")


def japanese_bigrams(text: str) -> list[str]:
    """Character bigrams over runs of Japanese script; a lone character stands as itself."""
    text = unicodedata.normalize("NFKC", text)
    out = []
    for run in _JA_RUN.findall(text):
        if len(run) == 1:
            out.append(run)
        else:
            out.extend(run[i : i + 2] for i in range(len(run) - 1))
    return out


class Analyzer:
    """Picks the pipeline per text: Japanese script present -> Sudachi, else the English pipeline."""

    def __init__(self, split_mode: str = "B") -> None:
        self.english = EnglishAnalyzer()
        self.japanese = JapaneseAnalyzer(self.english, split_mode)

    def tokens(self, text: str) -> list[str]:
        if has_japanese(text):
            return self.japanese.tokens(text)
        return self.english.tokens(text)

    def bigrams(self, text: str) -> list[str]:
        return japanese_bigrams(text)

    def settings(self) -> dict[str, str]:
        return {
            "english": "unicode-words+lowercase+stopwords+snowball-english",
            "japanese": f"sudachi-core-mode-{self._mode()}-normalized",
            "bigrams": "japanese-char-bigrams",
        }

    def _mode(self) -> str:
        return self.japanese._split_mode
