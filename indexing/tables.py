"""Documents and chunks as Arrow IPC files: the source of truth for text, offsets and metadata."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.feather as feather

from indexing.sources import Document

DOCUMENTS = "documents.arrow"
CHUNKS = "chunks.arrow"

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


def write_table(path: Path, rows: list[dict[str, Any]], schema: pa.Schema) -> None:
    """Write atomically: a reader never sees a half-written table."""
    table = pa.Table.from_pylist(rows, schema=schema)
    tmp = path.with_name(path.name + ".tmp")
    feather.write_feather(table, tmp, compression="zstd")
    os.replace(tmp, path)


def read_table(path: Path) -> pa.Table:
    return feather.read_table(path, memory_map=False)


def document_row(doc: Document) -> dict[str, Any]:
    return {
        "doc_id": doc.doc_id,
        "file_id": doc.file_id,
        "title": doc.title,
        "text": doc.text,
        "url": doc.url,
        "date": doc.date,
        "language": doc.language,
        "metadata": json.dumps(doc.metadata, ensure_ascii=False, sort_keys=True),
    }


def document_from_row(row: dict[str, Any]) -> Document:
    return Document(
        doc_id=row["doc_id"],
        file_id=row["file_id"],
        title=row["title"] or "",
        text=row["text"] or "",
        url=row["url"],
        date=row["date"],
        language=row["language"] or "en",
        metadata=json.loads(row["metadata"] or "{}"),
    )


def chunk_row(chunk: Chunk) -> dict[str, Any]:
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
    }


def chunk_from_row(row: dict[str, Any]) -> Chunk:
    return Chunk(**{k: row[k] for k in CHUNK_SCHEMA.names})
