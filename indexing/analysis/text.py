"""Language detection, sentence splitting and chunking that keep character offsets into the source text."""

from __future__ import annotations

import hashlib
import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass

_JA_RANGES = r"\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uff66-\uff9f\u3005\u30fc"  # kana, kanji, marks
_JA_CHAR = re.compile(f"[{_JA_RANGES}]")
_NOT_JA_CHAR = re.compile(f"[^{_JA_RANGES}]+")
_NOT_LETTER = re.compile(r"[\W\d_]+")
_HIRAGANA = re.compile(r"[\u3040-\u309f]")

# A sentence ends after Japanese full stops / marks (no space needed), after Western terminal punctuation
# followed by whitespace, or at a blank line / line break.
_SENTENCE_END = re.compile(
    # Every alternative starts with one of these characters, and the pattern starts with the set itself:
    # then the regular-expression engine skips to the next of them in C before it tries any alternative,
    # rather than trying every alternative at every character (2.7x faster for the same spans; this runs
    # over every chunk three times a build: extraction and both of the graph's passes).
    r"[。！？!?．.\n]"
    # Japanese and exclamation/question marks, with closing brackets.
    r"(?:(?<=[。！？!?．])[。！？!?．]*[」』）)\"']*"
    # The full stop is matched before the abbreviation look-behinds are tried: trying nine look-behinds at
    # every character took 7x as long for the same spans (the slowest step of a result item).
    r"|(?<=\.)(?<![A-Z][a-z]\.)(?<!\b[A-Z]\.)(?<!e\.g\.)(?<!i\.e\.)(?<!etc\.)(?<!\bvs\.)(?<!\bal\.)"
    r"(?<!Mrs\.)(?<!Fig\.)"
    r"[\"')\]]*(?=\s)"
    # Nor does one letter and a stop before a lower-case word, as capitals' "J." does not: initials and
    # abbreviations where case says nothing ("john l. sullivan", "the u.s. senate", "e. coli") and in any
    # case ("s.c. injection", "2 a.m. and"). A sentence after a lower-case one-letter word starts in capitals.
    r"(?!(?<=\b[a-z]\.)\s+[a-z])"
    # Line breaks: a blank line, or one.
    r"|(?<=\n)(?:\s*\n)?)"
)


def detect_language(text: str) -> str:
    """Return "ja" when Japanese script makes up a fair share of the letters, else "en"."""
    head = text[:5000]
    if _JA_CHAR.search(head) is None:
        return "en"
    letters, ja = _letters_and_japanese(head)
    if not letters:  # Japanese punctuation alone (・, ゠)
        return "en"
    return "ja" if ja / len(letters) >= 0.2 else "en"


def _letters_and_japanese(text: str) -> tuple[str, int]:
    """`text`'s letters (in order) and how many of its characters are Japanese script. Counted by what is
    left when the rest is removed: a list of every letter as a string of its own (`findall`) made language
    detection 72% of reading a JSON-lines corpus."""
    return _NOT_LETTER.sub("", text), len(_NOT_JA_CHAR.sub("", text))


def has_japanese(text: str) -> bool:
    return _JA_CHAR.search(text) is not None


def reads_as_japanese(sentence: str) -> bool:
    """Whether a sentence is Japanese for entity extraction (Sudachi's morphemes and the Japanese taggers
    find its names): it has hiragana (Japanese grammar's particles and endings), or it starts in Japanese
    script, or that script is at least half its letters (a title, a noun phrase: "アルキメデス(Archimedes、
    希:Ἀρχιμήδης、紀元前287年"). An English sentence quoting a Japanese or Chinese name ("Wangliang (魍魎
    or 罔两) is ...", "Super Speed Racing (スーパースピードレーシング) in Japan") is English: read as
    Japanese, it became one sentence-long name."""
    if _JA_CHAR.search(sentence) is None:
        return False
    if _HIRAGANA.search(sentence) is not None:
        return True
    letters, ja = _letters_and_japanese(sentence)
    return bool(letters) and (_JA_CHAR.match(letters) is not None or 2 * ja >= len(letters))


def split_sentences(text: str) -> list[tuple[int, int]]:
    """Split into sentence spans (start, end) with surrounding whitespace trimmed; offsets are characters."""
    spans: list[tuple[int, int]] = []
    start = 0
    for match in _SENTENCE_END.finditer(text):
        end = match.end()
        _append_trimmed(text, start, end, spans)
        start = end
    _append_trimmed(text, start, len(text), spans)
    return spans


def trimmed(text: str, start: int, end: int) -> tuple[int, int]:
    """`text[start:end]`'s offsets without the white space it opens or ends with."""
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


def _append_trimmed(text: str, start: int, end: int, spans: list[tuple[int, int]]) -> None:
    start, end = trimmed(text, start, end)
    if end > start:
        spans.append((start, end))


@dataclass(frozen=True, slots=True)
class ChunkSpan:
    """A chunk of a document: `text == source[start:end]`."""

    position: int
    start: int
    end: int
    text: str


def chunk_text(text: str, size: int = 800, overlap: int = 120, breaks: Sequence[int] = ()) -> list[ChunkSpan]:
    """Pack whole sentences into chunks of at most `size` characters.

    Consecutive chunks share trailing sentences worth up to `overlap` characters, so a fact that straddles a
    boundary is still found whole in one chunk. A single sentence longer than `size` is cut at a space (or,
    in Japanese, anywhere) so no chunk exceeds `size`. `breaks` are offsets no chunk may cross (the starts of
    a PDF's pages): the text between two breaks is chunked on its own, so every chunk lies on one page.
    """
    if size < 50:
        raise ValueError("chunk size must be at least 50 characters")
    if not 0 <= overlap < size:
        raise ValueError("chunk overlap must be >= 0 and smaller than the chunk size")
    bounds = sorted({0, len(text), *(b for b in breaks if 0 < b < len(text))})
    chunks: list[ChunkSpan] = []
    for lo, hi in itertools.pairwise(bounds):
        for start, end in _chunk_range(text, lo, hi, size, overlap):
            chunks.append(ChunkSpan(len(chunks), start, end, text[start:end]))
    return chunks


def _chunk_range(text: str, lo: int, hi: int, size: int, overlap: int) -> list[tuple[int, int]]:
    pieces: list[tuple[int, int]] = []
    for start, end in split_sentences(text[lo:hi]):
        pieces.extend(_cut_long(text, lo + start, lo + end, size))
    chunks: list[tuple[int, int]] = []
    i = 0
    while i < len(pieces):
        first = i
        start = pieces[i][0]
        end = pieces[i][1]
        i += 1
        while i < len(pieces) and pieces[i][1] - start <= size:
            end = pieces[i][1]
            i += 1
        chunks.append((start, end))
        if i >= len(pieces):
            break
        # Step back over whole sentences that fit in the overlap, but always make progress.
        back = i
        while back - 1 > first and end - pieces[back - 1][0] <= overlap:
            back -= 1
        i = back
    return chunks


def _cut_long(text: str, start: int, end: int, size: int) -> list[tuple[int, int]]:
    out = []
    while end - start > size:
        cut = text.rfind(" ", start + size // 2, start + size)
        if cut <= start:
            cut = start + size
        out.append((start, cut))
        start = cut
        while start < end and text[start].isspace():
            start += 1
    if end > start:
        out.append((start, end))
    return out


def content_hash(*parts: str, length: int = 16) -> str:
    """Stable short hash of the given parts (ids of documents and chunks)."""
    h = hashlib.sha256()
    for part in parts:
        h.update(part.encode("utf-8"))
        h.update(b"\x1f")
    return h.hexdigest()[:length]
