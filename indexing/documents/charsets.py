"""Text files in whatever encoding they came in: UTF-8 first, then what the bytes say, then detection.

Japanese text files are still often Shift_JIS (CP932) or EUC-JP, Windows exports cp1252, and Notepad's
"Unicode" is UTF-16 with a byte-order mark. The order: a byte-order mark (UTF-8, UTF-16, UTF-32); strict
UTF-8; for HTML, the charset its `<meta>` declares; then charset-normalizer, first among the encodings a
Japanese and Western corpus actually holds (CP932, EUC-JP, ISO-2022-JP, cp1252: restricting the candidates
is what keeps short cp1252 text from being read as cp775 or UTF-16), then among all it knows. Bytes no
encoding reads cleanly (a binary file renamed .txt) are refused with that reason.
"""

from __future__ import annotations

import codecs
import re
from dataclasses import dataclass

UTF8 = "utf-8"
_BOMS: tuple[tuple[bytes, str], ...] = (
    # UTF-32's marks start with UTF-16's, so they are tried first.
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)
#: Tried first, in this order of preference when more than one reads the bytes cleanly.
LIKELY_ENCODINGS = ("cp932", "euc_jp", "iso2022_jp", "cp1252")
_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]+)""", re.I)


class Undecodable(ValueError):
    """Bytes that no supported encoding reads cleanly."""


@dataclass(frozen=True, slots=True)
class DecodedText:
    text: str
    encoding: str  # a Python codec name: "utf-8", "utf-16", "cp932", "euc_jp", ...


def _declared_charset(data: bytes) -> str | None:
    match = _META_CHARSET.search(data[:4096])
    if match is None:
        return None
    try:
        return codecs.lookup(match.group(1).decode("ascii")).name
    except (LookupError, UnicodeDecodeError):
        return None


def _plausible(text: str) -> bool:
    """Text, not binary read as text: no NUL, and few other control characters."""
    if "\x00" in text:
        return False
    controls = sum(1 for c in text if ord(c) < 32 and c not in "\t\n\r\f\v")
    return controls <= 0.01 * len(text)


def _detect(data: bytes, candidates: tuple[str, ...] | None) -> DecodedText | None:
    from charset_normalizer import from_bytes

    for match in from_bytes(data, cp_isolation=list(candidates) if candidates else None):
        encoding = codecs.lookup(match.encoding).name
        # UTF-16/32 without a byte-order mark is a guess that reads any even-length bytes as text.
        if encoding.startswith(("utf-16", "utf-32")):
            continue
        text = str(match)
        if _plausible(text):
            return DecodedText(text, encoding)
    return None


def decode_text(data: bytes, html: bool = False) -> DecodedText:
    """`data` as text, with the encoding that read it; raises `Undecodable`.

    `html`: a charset declared in the page's `<meta>` is honoured before detection (when it reads the bytes).
    """
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            try:
                return DecodedText(data.decode(encoding), "utf-8" if encoding == "utf-8-sig" else encoding)
            except UnicodeDecodeError:
                raise Undecodable(
                    f"undecodable bytes: a {encoding} byte-order mark, then invalid {encoding}"
                ) from None
    try:
        return DecodedText(data.decode(UTF8), UTF8)
    except UnicodeDecodeError:
        pass
    declared = _declared_charset(data) if html else None
    if declared is not None:
        try:
            return DecodedText(data.decode(declared), declared)
        except UnicodeDecodeError:
            pass  # a wrong declaration is common enough: detect instead
    found = _detect(data, LIKELY_ENCODINGS) or _detect(data, None)
    if found is None:
        raise Undecodable(
            "undecodable bytes: not UTF-8, UTF-16/32 with a byte-order mark, Shift_JIS (CP932), EUC-JP, "
            "cp1252 or another encoding the detector recognises"
        )
    return found
