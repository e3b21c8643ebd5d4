"""Documents and chunks as Arrow IPC files: the source of truth for text, offsets and metadata.

A version's table is a base file and the segments later writes appended beside it, read in order as one
table: `chunks.arrow`, then `chunks.<version>.arrow` of each write that only added rows (so a write of one
document writes its rows, not the whole table again). A write that removes rows marks them deleted in
`chunks.deleted.npy` (their row numbers in that order; readers skip them), until too many are dead and the
table is written anew, in Arrow (no row becomes a Python object), or a merge compacts it
(`indexing.stores.segments`).
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.feather as feather

from hybridrag.indexing.analysis.entities import Mention
from hybridrag.indexing.documents.sources import Document

DOCUMENTS = "documents.arrow"
CHUNKS = "chunks.arrow"
MENTIONS = "mentions.arrow"
#: The columns of each table with an id lookup beside it (`mapped.keys_path`).
KEY_COLUMNS = {DOCUMENTS: ("doc_id",), CHUNKS: ("chunk_id", "doc_id")}

DOCUMENT_SCHEMA = pa.schema(
    [
        ("doc_id", pa.string()),
        ("file_id", pa.string()),
        ("title", pa.string()),
        ("text", pa.string()),
        ("url", pa.string()),
        ("date", pa.string()),
        ("language", pa.string()),
        ("metadata", pa.string()),  # JSON
        # Null text: the document's chunks hold it all but these characters, JSON [[offset, chars], ...]
        # (`stored_text`); a text its chunks do not hold exactly is stored, with null here.
        ("text_gaps", pa.string()),
    ]
)

CHUNK_SCHEMA = pa.schema(
    [
        ("chunk_id", pa.string()),
        ("doc_id", pa.string()),
        ("file_id", pa.string()),
        ("position", pa.int32()),
        ("start", pa.int32()),
        ("end", pa.int32()),
        ("text", pa.string()),
        ("language", pa.string()),
        ("entity_types", pa.list_(pa.string())),
        ("pages", pa.list_(pa.int32())),  # 1-based pages the chunk lies on (PDF); empty when unpaged
        # The document's date, per chunk: the filter columns load without parsing a date a chunk.
        ("date", pa.timestamp("us")),
    ]
)


@dataclass(slots=True)
class Chunk:
    chunk_id: str
    doc_id: str
    file_id: str
    position: int
    start: int
    end: int
    text: str
    language: str
    entity_types: list[str] = field(default_factory=list)
    pages: list[int] = field(default_factory=list)


def write_table(path: Path, rows: list[dict[str, Any]], schema: pa.Schema, compression: str = "zstd") -> None:
    """Write atomically: a reader never sees a half-written table. `compression="uncompressed"` for the
    tables the service memory-maps (documents, chunks): a compressed one would be decompressed into memory."""
    write_arrow(path, pa.Table.from_pylist(rows, schema=schema), compression)


def write_arrow(path: Path, table: pa.Table, compression: str = "uncompressed") -> None:
    """An Arrow table written under a temporary name, then renamed (a version sharing the file through a
    hard link never sees it change); uncompressed by default, as the service maps it."""
    tmp = path.with_name(path.name + ".tmp")
    feather.write_feather(table, tmp, compression=compression)
    os.replace(tmp, path)


def read_table(path: Path) -> pa.Table:
    """One Arrow file, read whole (a version's table with its segments: `read_version_table`)."""
    return feather.read_table(path, memory_map=False)


def segment_path(version: Path, name: str, segment: str) -> Path:
    """The segment `segment` (the version that wrote it) of table `name`: chunks.arrow -> chunks.<segment>.arrow."""
    return version / f"{name.split('.')[0]}.{segment}.arrow"


def table_segments(version: Path, name: str) -> list[Path]:
    """The segments of table `name` in `version`, oldest first (their names sort as the versions do)."""
    return sorted(version.glob(f"{name.split('.')[0]}.*.arrow"))


def table_files(version: Path, name: str) -> list[Path]:
    """Every file of table `name` in `version`, in row order: the base, then its segments."""
    return [version / name, *table_segments(version, name)]


def deleted_path(version: Path, name: str) -> Path:
    """The rows of table `name` that writes deleted (numbered over its files in order, sorted): chunks.arrow
    -> chunks.deleted.npy."""
    return version / f"{name.split('.')[0]}.deleted.npy"


def dead_rows(version: Path, name: str) -> np.ndarray:
    """The deleted rows of table `name` of `version` (`deleted_path`), sorted; empty when none."""
    path = deleted_path(version, name)
    return np.asarray(np.load(path), dtype=np.int64) if path.is_file() else np.zeros(0, dtype=np.int64)


def read_version_table(version: Path, name: str, memory_map: bool = False, live: bool = True) -> pa.Table:
    """Table `name` of `version` with its segments, as one table (the segments' batches follow the base's),
    without its deleted rows (`live=False`: with them, so row numbers are the lookups' and tombstones')."""
    parts = [feather.read_table(f, memory_map=memory_map) for f in table_files(version, name)]
    table = parts[0] if len(parts) == 1 else pa.concat_tables(parts)
    dead = dead_rows(version, name) if live else None
    if dead is not None and len(dead):
        table = table.filter(pa.array(live_mask(table.num_rows, dead)))
    return table


def live_mask(rows: int, dead: np.ndarray) -> np.ndarray:
    """True for each of `rows` rows but the `dead` ones."""
    keep = np.ones(rows, dtype=bool)
    keep[dead] = False
    return keep


def live_row_count(version: Path, name: str) -> int:
    """How many rows table `name` of `version` holds, its deleted ones not counted (no row is read)."""
    total = 0
    for path in table_files(version, name):
        with pa.memory_map(str(path)) as source:
            reader = pa.ipc.open_file(source)
            total += sum(reader.get_batch(i).num_rows for i in range(reader.num_record_batches))
    return total - len(dead_rows(version, name))


def document_row(doc: Document, chunks: Sequence[Chunk] | None = None) -> dict[str, Any]:
    """The document's row; given its `chunks`, its text is left to them where they hold it (`stored_text`)."""
    gaps = stored_text(doc.text, chunks) if chunks is not None else None
    return {
        "doc_id": doc.doc_id,
        "file_id": doc.file_id,
        "title": doc.title,
        "text": doc.text if gaps is None else None,
        "url": doc.url,
        "date": doc.date,
        "language": doc.language,
        "metadata": json.dumps(doc.metadata, ensure_ascii=False, sort_keys=True),
        "text_gaps": gaps,
    }


def stored_text(text: str, chunks: Sequence[Chunk]) -> str | None:
    """What a document's row keeps of `text` when its `chunks` hold the rest: the characters no chunk
    covers (the spaces between chunks), as JSON [[offset, chars], ...]; None when the chunks do not hold
    their parts of the text exactly (then the row keeps the text itself). The text is held once, in the
    chunks table: the documents table held it a second time (0.65-0.77 KB a chunk)."""
    if not text or not chunks:
        return None
    gaps: list[list[Any]] = []
    at = 0
    for start, end, part in sorted((c.start, c.end, c.text) for c in chunks):
        if not 0 <= start <= end <= len(text) or text[start:end] != part:
            return None
        if start > at:
            gaps.append([at, text[at:start]])
        at = max(at, end)
    if at < len(text):
        gaps.append([at, text[at:]])
    gaps.append([len(text), ""])  # where the text ends: a missing last chunk cannot go unnoticed
    encoded = json.dumps(gaps, ensure_ascii=False)
    if joined_text([(c.start, c.text) for c in chunks], encoded) != text:  # checked, not assumed
        return None
    return encoded


def text_held_by_chunks(path: Path) -> bool:
    """Whether a documents table file may leave texts to the chunks (its schema has `text_gaps`)."""
    if not path.is_file():
        return False
    with pa.memory_map(str(path)) as source:
        try:
            return "text_gaps" in pa.ipc.open_file(source).schema.names
        except pa.ArrowInvalid:  # not an Arrow IPC file (an early release's Feather v1): texts stored
            return False


def joined_text(parts: Sequence[tuple[int, str]], gaps: str) -> str:
    """A document's text from its chunks' (start, text) and its row's `text_gaps` (`stored_text`, whose
    last entry marks where the text ends). Raises ValueError when they do not make the whole text (a
    chunk missing)."""
    held = gap_pieces(gaps)
    out: list[str] = []
    end = 0
    for start, part in sorted([*parts, *held]):
        if start > end:
            raise ValueError("a document's chunks and gaps leave a hole in its text")
        if start + len(part) > end:
            out.append(part[end - start :])
            end = start + len(part)
    if not held or end != held[-1][0]:
        raise ValueError("a document's chunks and gaps do not end where its text does")
    return "".join(out)


def text_window(pieces: Iterable[tuple[int, str]], start: int, end: int) -> str | None:
    """`text[start:end]` of a text made of `pieces` ((offset, characters): a document's chunks, which may
    overlap, and its gaps, `stored_text`), from the pieces that overlap the window only; None when they leave
    a hole in it. "" for an empty window."""
    out: list[str] = []
    at = start
    for offset, part in sorted(p for p in pieces if p[0] < end and p[0] + len(p[1]) > start):
        if at >= end:
            break
        if offset > at:
            return None
        if offset + len(part) > at:
            out.append(part[at - offset : end - offset])
            at = min(end, offset + len(part))
    return "".join(out) if at >= end else None


def gap_pieces(gaps: str) -> list[tuple[int, str]]:
    """A row's `text_gaps` (`stored_text`) as (offset, characters); the last, empty, marks the text's end."""
    return [(int(at), str(chars)) for at, chars in json.loads(gaps)]


@dataclass(frozen=True, slots=True)
class DocumentHead:
    """A document's row without its text: what a page of results shows of it (the text is read only around
    the page's chunks, `mapped.DocumentTable.around`)."""

    doc_id: str
    file_id: str
    title: str
    url: str | None
    date: str | None
    language: str


def document_head(row: dict[str, Any]) -> DocumentHead:
    return DocumentHead(
        doc_id=row["doc_id"],
        file_id=row["file_id"],
        title=row.get("title") or "",
        url=row.get("url"),
        date=row.get("date"),
        language=row.get("language") or "en",
    )


def document_from_row(
    row: dict[str, Any], parts: Callable[[str], Sequence[tuple[int, str]]] | None = None
) -> Document:
    """The document of a row. A row whose text its chunks hold needs `parts`: a document id -> its chunks'
    (start, text)."""
    text = row["text"]
    gaps = row.get("text_gaps")
    if text is None and gaps is not None:
        if parts is None:
            raise ValueError(f"the text of document {row['doc_id']!r} is held by its chunks: read them too")
        text = joined_text(parts(row["doc_id"]), gaps)
    return Document(
        doc_id=row["doc_id"],
        file_id=row["file_id"],
        title=row["title"] or "",
        text=text or "",
        url=row["url"],
        date=row["date"],
        language=row["language"] or "en",
        metadata=json.loads(row["metadata"] or "{}"),
    )


def chunk_row(chunk: Chunk, date: datetime | None = None) -> dict[str, Any]:
    return {
        "chunk_id": chunk.chunk_id,
        "doc_id": chunk.doc_id,
        "file_id": chunk.file_id,
        "position": chunk.position,
        "start": chunk.start,
        "end": chunk.end,
        "text": chunk.text,
        "language": chunk.language,
        "entity_types": list(chunk.entity_types),
        "pages": list(chunk.pages),
        "date": date,
    }


_CHUNK_FIELDS = tuple(f.name for f in dataclasses.fields(Chunk))


def chunk_from_row(row: dict[str, Any]) -> Chunk:
    # Versions written before `pages` existed read as unpaged.
    fields = {k: row[k] for k in _CHUNK_FIELDS if k in row}
    fields["pages"] = fields.get("pages") or []
    return Chunk(**fields)


MENTION_SCHEMA = pa.schema(
    [
        ("chunk_id", pa.string()),
        ("key", pa.string()),
        ("surface", pa.string()),
        ("type", pa.string()),
        ("sentence_start", pa.int32()),
        ("sentence_end", pa.int32()),
        # Added with the Japanese tagger's node-only names; a table written before reads as all False.
        ("node_only", pa.bool_()),
    ]
)


def write_mentions(path: Path, mentions: dict[str, list[Mention]], chunk_order: list[str]) -> None:
    """Entity mentions per chunk, kept so an update re-extracts only the chunks it adds."""
    rows = [
        {
            "chunk_id": cid,
            "key": m.key,
            "surface": m.surface,
            "type": m.type,
            "sentence_start": m.sentence_start,
            "sentence_end": m.sentence_end,
            "node_only": m.node_only,
        }
        for cid in chunk_order
        for m in mentions.get(cid, ())
    ]
    write_table(path, rows, MENTION_SCHEMA)


def mention_segment(version: Path, name: str) -> Path:
    """Where a write that leaves the graph behind keeps the mentions of the chunks it adds (`read_all_mentions`
    reads them after mentions.arrow; a merge folds them in)."""
    return segment_path(version, MENTIONS, name)


def mention_segments(version: Path) -> list[Path]:
    return table_segments(version, MENTIONS)


def read_all_mentions(version: Path, keep: set[str]) -> dict[str, list[Mention]]:
    """The mentions of the chunks in `keep`: mentions.arrow, then each write's segment in order."""
    out: dict[str, list[Mention]] = {}
    for path in [version / MENTIONS, *mention_segments(version)]:
        if path.is_file():
            out.update(read_mentions(path, keep))
    return out


def read_mentions(path: Path, keep: set[str]) -> dict[str, list[Mention]]:
    out: dict[str, list[Mention]] = {}
    for row in read_table(path).to_pylist():
        if row["chunk_id"] in keep:
            out.setdefault(row["chunk_id"], []).append(
                Mention(
                    row["key"],
                    row["surface"],
                    row["type"],
                    row["sentence_start"],
                    row["sentence_end"],
                    bool(row.get("node_only")),
                )
            )
    return out
