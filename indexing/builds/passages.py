"""Documents into passages: chunks with content-hashed ids and page numbers, what each is embedded as, and
the passage engine that chunks and embeds them in this process or on a cluster (`builds.distributed`)."""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from hybridrag.indexing.analysis.entities import Mention
from hybridrag.indexing.analysis.text import chunk_text, content_hash
from hybridrag.indexing.builds.config import BuildConfig
from hybridrag.indexing.documents.sources import Document
from hybridrag.indexing.models.embedders import Embedder
from hybridrag.indexing.stores.tables import Chunk


def make_chunks(doc: Document, config: BuildConfig) -> list[Chunk]:
    page_starts = doc.metadata.get("pageStarts") or []
    spans = chunk_text(doc.text, config.chunk_size, config.chunk_overlap, breaks=page_starts)
    return [
        Chunk(
            chunk_id="c-" + content_hash(doc.doc_id, str(span.start), span.text),
            doc_id=doc.doc_id,
            file_id=doc.file_id,
            position=span.position,
            start=span.start,
            end=span.end,
            text=span.text,
            language=doc.language,
            pages=pages_of(page_starts, span.start, span.end),
        )
        for span in spans
    ]


def pages_of(page_starts: list[int], start: int, end: int) -> list[int]:
    """The 1-based pages that the span [start, end) lies on, given where each page starts."""
    if not page_starts:
        return []
    first = bisect.bisect_right(page_starts, start)
    last = bisect.bisect_right(page_starts, max(start, end - 1))
    return list(range(max(1, first), max(1, last) + 1))


def embedding_text(title: str, text: str) -> str:
    """What a chunk is embedded as: its document title gives short chunks their topic."""
    return f"{title}\n{text}" if title else text


@dataclass(slots=True)
class WrittenVectors:
    """The vector table of a new version, written by the passage engine itself straight to the index's
    object store (by the Ray workers, committed once by the driver) instead of handed to the builder.

    `fetch(dest)` copies the committed table into `dest` (the local staging version's ``vectors/``),
    checking what the workers wrote, and returns every file of it on the store with its size and sha256
    (paths relative to the version), so the upload of the version skips them.
    """

    rows: int
    fetch: Callable[[Path], dict[str, dict[str, Any]]]


@dataclass(slots=True)
class Passages:
    """What a passage engine made of new documents: chunks in document order, one vector per chunk (or
    `written` when the engine wrote the table itself), and entity mentions per chunk id when it extracted
    them (None: the builder extracts)."""

    chunks: list[Chunk]
    vectors: np.ndarray | None = None
    mentions: dict[str, list[Mention]] | None = None
    written: WrittenVectors | None = None


class PassageEngine(Protocol):
    """Chunks documents and embeds their chunks: in this process (the default) or on a cluster (Ray).

    Whatever runs it, the result is the same: `make_chunks` gives the chunks, `embedding_text` what each is
    embedded as, a chunk's entities are its title's mentions then its text's, and the vectors come from the
    configured model, one row per chunk in the same order. `version` is given for a complete new version (no
    base): an engine that writes the vector table itself writes it for that version.
    """

    name: str

    def chunk_and_embed(
        self,
        docs: Sequence[Document],
        config: BuildConfig,
        embedder: Embedder | None,
        version: str | None = None,
    ) -> Passages: ...
