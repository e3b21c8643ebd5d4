"""Highlights: character offsets of query-term matches in a returned text, a fragment, and a summary line."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from hybridrag.indexing.analysis.analyzers import ASCII_WORD, JA_DROP_POS, WORD, Analyzer
from hybridrag.indexing.analysis.text import has_japanese, split_sentences

FRAGMENT_CHARS = 240
SUMMARY_CHARS = 400


@dataclass(frozen=True, slots=True)
class Match:
    start: int
    end: int


def term_matches(text: str, query_tokens: Collection[str], analyzer: Analyzer) -> list[Match]:
    """Spans of `text` whose analysed form is one of the query's tokens, in order, non-overlapping.

    Offsets are Python string indices (Unicode code points) into `text` exactly as given.
    """
    if not query_tokens or not text:
        return []
    wanted = set(query_tokens)
    spans: list[Match] = []
    if has_japanese(text):
        for surface, normalized, pos, begin, end in analyzer.japanese.morphemes(text):
            if pos[0] in JA_DROP_POS or not surface.strip():
                continue
            if ASCII_WORD.match(surface):
                token = analyzer.english.normalize_word(surface)
            else:
                token = normalized.lower()
            if token and token in wanted:
                spans.append(Match(begin, end))
    else:
        words = list(WORD.finditer(text))
        tokens = analyzer.english.normalize_words([m.group() for m in words])
        spans = [Match(m.start(), m.end()) for m, t in zip(words, tokens, strict=True) if t and t in wanted]
    return _merge_adjacent(spans, text)


def _merge_adjacent(spans: list[Match], text: str) -> list[Match]:
    # "東京" + "大学" matched separately read better as one highlight "東京大学".
    merged: list[Match] = []
    for span in spans:
        if merged and span.start == merged[-1].end and has_japanese(text[span.start : span.end]):
            merged[-1] = Match(merged[-1].start, span.end)
        else:
            merged.append(span)
    return merged


def fragment(text: str, matches: list[Match], width: int = FRAGMENT_CHARS) -> str:
    """A window of `text` around the densest cluster of matches, with ellipses where it was cut."""
    if not matches:
        return text[:width] + ("…" if len(text) > width else "")
    # Matches are in order and do not overlap, so their ends rise too: one pass with two pointers counts, for
    # each match, the matches that fit in a window starting there.
    best_start, best_count = matches[0].start, 0
    j = 0
    for i, m in enumerate(matches):
        j = max(j, i)
        while j < len(matches) and matches[j].end - m.start <= width:
            j += 1
        if j - i > best_count:
            best_start, best_count = m.start, j - i
    start = max(0, best_start - width // 4)
    end = min(len(text), start + width)
    start = max(0, end - width)
    return ("…" if start > 0 else "") + text[start:end] + ("…" if end < len(text) else "")


def best_sentence(text: str, matches: list[Match], limit: int = SUMMARY_CHARS) -> str | None:
    """The sentence holding the most matches (the first sentence when nothing matched): an extractive summary."""
    spans = split_sentences(text)
    # A markdown heading is a title, not a summary, unless it is all there is.
    spans = [sp for sp in spans if not text.startswith("#", sp[0])] or spans
    if not spans:
        return None
    best, best_hits = spans[0], 0
    for s, e in spans:
        hits = sum(1 for m in matches if m.start >= s and m.end <= e)
        if hits > best_hits:
            best, best_hits = (s, e), hits
    sentence = text[best[0] : best[1]]
    return sentence if len(sentence) <= limit else sentence[: limit - 1] + "…"
