"""Reading source documents: a folder of .md/.txt/.html/.jsonl/.pdf/.docx files, or a BEIR `corpus.jsonl`.

Bad input (an unreadable, encrypted, image-only, damaged, empty or huge file, an invalid JSON line, an empty
document) is reported with file and line and skipped; it never stops the build. PDF, DOCX and HTML go through
`formats` (maintained extractors); plain text and Markdown are read here.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

from hybridrag.indexing.analysis.text import content_hash, detect_language
from hybridrag.indexing.documents.charsets import UTF8, Undecodable, decode_text
from hybridrag.indexing.documents.formats import BINARY_READERS, Unreadable, read_html

TEXT_SUFFIXES = (".md", ".markdown", ".txt")
HTML_SUFFIXES = (".html", ".htm")
JSONL_SUFFIXES = (".jsonl",)
SUPPORTED_SUFFIXES = TEXT_SUFFIXES + HTML_SUFFIXES + JSONL_SUFFIXES + tuple(BINARY_READERS)
#: Files larger than this are reported and skipped (a 200 MB PDF is a scan or a book; split it first).
MAX_FILE_BYTES = 200 * 1024 * 1024


@dataclass(slots=True)
class Document:
    """One source document as the index keeps it."""

    doc_id: str
    file_id: str
    title: str
    text: str
    url: str | None = None
    date: str | None = None  # ISO 8601 date or datetime, UTC when a zone was given
    language: str = "en"
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class SkippedItem:
    """Something that could not be read, with where it was and why."""

    source: str
    line: int | None
    reason: str

    def __str__(self) -> str:
        where = f"{self.source}:{self.line}" if self.line else self.source
        return f"{where}: {self.reason}"


@dataclass(slots=True)
class SourceReport:
    skipped: list[SkippedItem] = field(default_factory=list)


def iter_documents(source: Path, report: SourceReport) -> Iterator[Document]:
    """Yield documents from a file or a folder (recursively, in sorted order so builds are reproducible)."""
    if source.is_file():
        yield from _read_file(source, source.name, report)
        return
    if not source.is_dir():
        raise FileNotFoundError(f"source not found: {source}")
    for path in sorted(p for p in source.rglob("*") if p.is_file()):
        # Hidden files and folders are skipped, judged below `source` (a source given as ../x is fine).
        hidden = any(part.startswith(".") for part in path.relative_to(source).parts)
        if path.suffix.lower() not in SUPPORTED_SUFFIXES or hidden:
            continue
        yield from _read_file(path, path.relative_to(source).as_posix(), report)


def _read_file(path: Path, file_id: str, report: SourceReport) -> Iterator[Document]:
    suffix = path.suffix.lower()
    try:
        size = path.stat().st_size
        if size == 0:
            raise Unreadable("empty file (0 bytes)")
        if size > MAX_FILE_BYTES:
            raise Unreadable(f"too large ({size:,} bytes; the limit is {MAX_FILE_BYTES:,})")
        if suffix in BINARY_READERS:
            record = BINARY_READERS[suffix](path)
            raw, encoding = "", UTF8
        else:
            decoded = decode_text(path.read_bytes(), html=suffix in HTML_SUFFIXES)
            raw, encoding = decoded.text, decoded.encoding
            if suffix in JSONL_SUFFIXES:
                yield from _read_jsonl(raw, path, file_id, report, encoding)
                return
            record = read_html(raw) if suffix in HTML_SUFFIXES else _read_text(raw)
    except (Unreadable, Undecodable) as exc:
        report.skipped.append(SkippedItem(str(path), None, str(exc)))
        return
    except OSError as exc:
        report.skipped.append(SkippedItem(str(path), None, f"unreadable: {exc}"))
        return
    if encoding != UTF8:
        # Said where a reader can see it; UTF-8, the norm, is not recorded (so documents read before are
        # the same documents now).
        record["metadata"] = {**(record.get("metadata") or {}), "encoding": encoding}
    record["title"] = record.get("title") or path.stem
    record["fileId"] = file_id
    if raw:
        record.update(_front_matter(raw))
    doc = _make_document(record, file_id, explicit_id=None)
    if doc is None:
        report.skipped.append(SkippedItem(str(path), None, "empty document"))
        return
    yield doc


def _read_text(raw: str) -> dict[str, Any]:
    front = _FRONT_MATTER.match(raw)
    text = raw[front.end() :] if front else raw
    return {"title": _markdown_title(text), "text": text}


def _read_jsonl(
    raw: str, path: Path, file_id: str, report: SourceReport, encoding: str = UTF8
) -> Iterator[Document]:
    for lineno, line in enumerate(raw.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            report.skipped.append(SkippedItem(str(path), lineno, f"invalid JSON: {exc.msg}"))
            continue
        if not isinstance(record, dict):
            report.skipped.append(SkippedItem(str(path), lineno, "a line must be a JSON object"))
            continue
        explicit = record.get("_id", record.get("id"))
        try:
            doc = _make_document(record, file_id, explicit_id=None if explicit is None else str(explicit))
        except ValueError as exc:
            report.skipped.append(SkippedItem(str(path), lineno, str(exc)))
            continue
        if doc is None:
            report.skipped.append(SkippedItem(str(path), lineno, "empty document"))
            continue
        if encoding != UTF8:
            doc.metadata["encoding"] = encoding
        yield doc


def _make_document(record: dict[str, Any], default_file_id: str, explicit_id: str | None) -> Document | None:
    title = _as_text(record.get("title"))
    text = _as_text(record.get("text", record.get("contents", record.get("content"))))
    if not text.strip() and not title.strip():
        return None
    if not text.strip():
        text = title
    raw_meta = record.get("metadata")
    meta: dict[str, Any] = raw_meta if isinstance(raw_meta, dict) else {}
    file_id = _as_text(record.get("fileId") or record.get("file_id") or meta.get("fileId")) or default_file_id
    url = _as_text(record.get("url") or meta.get("url")) or None
    if url is not None and not re.match(r"^https?://", url):
        url = None
    raw_date = record.get("date") or meta.get("date")
    when = normalize_date(raw_date) if raw_date not in (None, "") else None
    doc_id = explicit_id or "d-" + content_hash(file_id, title, text)
    extra = {
        k: v for k, v in record.items() if k not in {"_id", "id", "title", "text", "url", "date", "metadata"}
    }
    extra.update({k: v for k, v in meta.items() if k not in {"url", "date", "fileId"}})
    return Document(
        doc_id=doc_id,
        file_id=file_id,
        title=title.strip(),
        text=text,
        url=url,
        date=when,
        language=detect_language(title + "\n" + text),
        metadata=_jsonable(extra),
    )


def make_document(record: dict[str, Any], file_id: str, doc_id: str | None) -> Document | None:
    """A document from a JSON record (title, text, url, date, metadata), normalised as a JSON-lines source's;
    None when it has no text. Raises ValueError for a bad date."""
    return _make_document(record, file_id, doc_id)


def normalize_date(value: Any) -> str:
    """An ISO date/datetime string (UTC when zoned); raises ValueError naming the bad value."""
    if isinstance(value, (int, float)):
        return datetime.fromtimestamp(float(value), tz=UTC).isoformat()
    text = str(value).strip()
    try:
        if len(text) == 10:
            return date.fromisoformat(text).isoformat()
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"invalid date {value!r} (expected ISO 8601)") from None
    if parsed.tzinfo is not None:
        parsed = parsed.astimezone(UTC).replace(tzinfo=None)
    return parsed.isoformat()


def _as_text(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else str(value)


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, ensure_ascii=False, default=str))


_FRONT_MATTER = re.compile(r"\A---\n(.*?)\n---\n", re.S)


def _front_matter(raw: str) -> dict[str, str]:
    """`key: value` lines of a leading `---` block (date, url, title): enough for the bundled corpus."""
    match = _FRONT_MATTER.match(raw)
    if not match:
        return {}
    out = {}
    for line in match.group(1).splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() in {"title", "date", "url"}:
            out[key.strip()] = value.strip().strip("\"'")
    return out


def _markdown_title(raw: str) -> str:
    for line in raw.splitlines():
        if line.startswith("# "):
            return line[2:].strip()
    return ""
