"""Binary and web formats: PDF (pypdf), DOCX (python-docx) and HTML (trafilatura's main-content extraction).

Each reader takes a path and returns a source record (`title`, `text`, optional `date`, `url`, `metadata`)
for `sources._make_document`, or raises `Unreadable` with a reason a person can act on; the build reports it
by file name and goes on. Each format's library is an optional extra (`hybridrag[pdf]`, `[docx]`, `[html]`,
all pulled in by `[server]`), imported only when a file of that kind is read.

PDF text keeps its pages: pages are joined with a blank line and `metadata.pageStarts` records where each
page begins in the document's text, so chunks can be kept inside pages and cite them (`Chunk.pages`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

PAGE_SEPARATOR = "\n\n"
_LIGATURES = str.maketrans({"ﬀ": "ff", "ﬁ": "fi", "ﬂ": "fl", "ﬃ": "ffi", "ﬄ": "ffl", "ﬅ": "st", "ﬆ": "st"})
# TeX and office exports hyphenate at line ends; a hyphen before a line break and a lower-case letter is
# (almost always) such a break, and searching needs the whole word back.
_LINE_HYPHEN = re.compile(r"(?<=[^\W\d_])-\n(?=[a-zß-ÿ])")
_SPACES = re.compile(r"[ \t\f\v\u00a0]+")


class Unreadable(ValueError):
    """A file that cannot be indexed, with the reason."""


def _require(module: str, extra: str) -> Any:
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        raise Unreadable(f"needs the optional extra: pip install 'hybridrag[{extra}]'") from None


def clean_pdf_text(text: str) -> str:
    """Ligatures expanded, end-of-line hyphenation undone, runs of spaces folded; line breaks kept."""
    text = text.translate(_LIGATURES).replace("\r\n", "\n").replace("\r", "\n")
    text = _LINE_HYPHEN.sub("", text)
    lines = [_SPACES.sub(" ", line).strip() for line in text.split("\n")]
    return "\n".join(lines).strip()


def join_pages(pages: list[str]) -> tuple[str, list[int]]:
    """The pages as one text and the character offset at which each page starts."""
    starts: list[int] = []
    parts: list[str] = []
    offset = 0
    for i, page in enumerate(pages):
        if i:
            parts.append(PAGE_SEPARATOR)
            offset += len(PAGE_SEPARATOR)
        starts.append(offset)
        parts.append(page)
        offset += len(page)
    return "".join(parts), starts


def _first_line(text: str, limit: int = 200) -> str:
    for line in text.splitlines():
        line = line.strip()
        if line:
            return line if len(line) <= limit else ""
    return ""


def read_pdf(path: Path) -> dict[str, Any]:
    pypdf = _require("pypdf", "pdf")
    from pypdf.errors import PdfReadError

    try:
        reader = pypdf.PdfReader(path, strict=False)
        if reader.is_encrypted:
            # Many PDFs are "encrypted" with an empty user password (restrictions only): those still open.
            try:
                opened = reader.decrypt("")
            except Exception:
                opened = 0
            if not opened:
                raise Unreadable("encrypted: a password is needed to read it")
        pages = [clean_pdf_text(page.extract_text() or "") for page in reader.pages]
        info = reader.metadata
    except Unreadable:
        raise
    except (PdfReadError, OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise Unreadable(f"damaged or truncated PDF ({type(exc).__name__}: {str(exc)[:120]})") from None
    if not pages:
        raise Unreadable("the PDF has no pages")
    if not any(page.strip() for page in pages):
        raise Unreadable(
            f"no extractable text in {len(pages)} page(s): image-only or scanned (run OCR first)"
        )
    text, starts = join_pages(pages)
    title = ""
    created: datetime | None = None
    if info is not None:
        title = str(info.title or "").strip()
        try:
            created = info.creation_date
        except (ValueError, TypeError):
            created = None
    record: dict[str, Any] = {
        "title": title or _first_line(text) or path.stem,
        "text": text,
        "metadata": {"format": "pdf", "pages": len(pages), "pageStarts": starts},
    }
    if created is not None:
        record["date"] = (created if created.tzinfo else created.replace(tzinfo=UTC)).isoformat()
    return record


def read_docx(path: Path) -> dict[str, Any]:
    docx = _require("docx", "docx")
    from docx.table import Table
    from docx.text.paragraph import Paragraph

    try:
        document = docx.Document(str(path))
    except Exception as exc:
        raise Unreadable(f"damaged or not a DOCX file ({type(exc).__name__})") from None
    lines: list[str] = []
    first_heading = ""
    for block in document.iter_inner_content():
        if isinstance(block, Paragraph):
            text = block.text.strip()
            if not text:
                continue
            style = (block.style.name if block.style is not None else "") or ""
            level = _heading_level(style)
            if level:
                # Headings stay structure: a Markdown heading line, which chunking and highlights treat as
                # a line of its own and the title fallback can find.
                first_heading = first_heading or text
                lines.append(f"{'#' * level} {text}")
            else:
                lines.append(text)
        elif isinstance(block, Table):
            for row in block.rows:
                cells = [c.text.strip() for c in row.cells]
                if any(cells):
                    lines.append(" | ".join(cells))
    text = "\n\n".join(lines)
    if not text.strip():
        raise Unreadable("no text in the document")
    props = document.core_properties
    record: dict[str, Any] = {
        "title": (props.title or "").strip() or first_heading or path.stem,
        "text": text,
        "metadata": {"format": "docx"},
    }
    when = props.created or props.modified
    if when is not None:
        record["date"] = (when if when.tzinfo else when.replace(tzinfo=UTC)).isoformat()
    return record


def _heading_level(style: str) -> int:
    if style == "Title":
        return 1
    match = re.fullmatch(r"Heading (\d)", style)
    return int(match.group(1)) if match else 0


def read_html(raw: str) -> dict[str, Any]:
    trafilatura = _require("trafilatura", "html")
    result = trafilatura.bare_extraction(
        raw,
        with_metadata=True,
        include_tables=True,
        include_comments=False,
        # No guessing of dates from the body text ("Copyright 2019"): only the page's own metadata.
        date_extraction_params={"extensive_search": False, "original_date": True},
    )
    if result is None or not (result.text or "").strip():
        raise Unreadable("no main content found in the page")
    record: dict[str, Any] = {
        "title": result.title or "",
        "text": result.text,
        "metadata": {"format": "html"},
    }
    if result.date:
        record["date"] = result.date
    if result.url:
        record["url"] = result.url
    return record


#: Readers of files that are not plain UTF-8 text, by suffix.
BINARY_READERS: dict[str, Callable[[Path], dict[str, Any]]] = {".pdf": read_pdf, ".docx": read_docx}
