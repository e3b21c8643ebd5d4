"""The documents and chunks tables as the service reads them: memory-mapped, a page of hits read together.

The service used to hold every document and chunk as a Python object (~11 KB a chunk with the vectors). These
mappings keep only flat arrays resident: the id -> row lookups (`keys.KeyIndex`, 16 bytes an id, written
beside the table, memory-mapped too); text and metadata stay in the Arrow file and the page cache. Tables
written uncompressed are mapped without a copy; older, compressed ones are decompressed once at load.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Generic, TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.feather as feather

from hybridrag.indexing.documents.sources import Document
from hybridrag.indexing.stores.keys import KeyIndex
from hybridrag.indexing.stores.memory_maps import Mappings
from hybridrag.indexing.stores.tables import (
    CHUNKS,
    Chunk,
    DocumentHead,
    chunk_from_row,
    dead_rows,
    document_from_row,
    document_head,
    gap_pieces,
    table_files,
    text_window,
    write_arrow,
)


def keys_path(table_path: Path, column: str) -> Path:
    """Where the lookup of `column` in the table at `table_path` is kept: chunks.arrow -> chunks.chunk_id.keys.npy."""
    return table_path.with_name(f"{table_path.name.split('.')[0]}.{column}.keys.npy")


def write_keys(table_path: Path, ids: list[str], column: str) -> None:
    KeyIndex.build(ids).save(keys_path(table_path, column))


def _keys(
    table: pa.Table, table_path: Path, column: str, maps: Mappings | None, dead: np.ndarray | None = None
) -> KeyIndex:
    """The lookup of `column`: no entry for a `dead` row (deleted by a write, still in the files)."""
    path = keys_path(table_path, column)
    dead_count = 0 if dead is None else len(dead)
    if path.is_file():
        keys = KeyIndex.load(path, maps)
        if len(keys) == table.num_rows - dead_count:
            return keys
    # A version written before the lookups existed: built in memory, once per load.
    built = KeyIndex.build(table.column(column).to_pylist())
    return built if dead is None else built.dropped(dead)


Data = TypeVar("Data", pa.Table, pa.ChunkedArray)


def _parts(data: pa.Table | pa.ChunkedArray) -> list[Any]:
    return data.to_batches() if isinstance(data, pa.Table) else list(data.chunks)


def _locate(parts: Sequence[Any], at: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The batch holding each row of `at` and the row's offset in it (IndexError for a row out of range)."""
    lengths = np.fromiter((len(p) for p in parts), dtype=np.int64, count=len(parts))
    ends = np.cumsum(lengths)
    total = int(ends[-1]) if len(ends) else 0
    if len(at) and (at.min() < 0 or at.max() >= total):
        raise IndexError(f"rows out of range 0..{total}")
    which = np.searchsorted(ends, at, side="right")
    return which, at - (ends - lengths)[which]


def _by_batch(parts: Sequence[Any], at: np.ndarray) -> list[tuple[Any, np.ndarray]]:
    """The rows `at` split by the batch holding them, batches in order: each batch's rows taken from it,
    and where in `at` they were asked for."""
    which, offsets = _locate(parts, at)
    out = []
    for b in np.unique(which).tolist():
        where = np.flatnonzero(which == b)
        out.append((parts[b].take(pa.array(offsets[where], pa.int64())), where))
    return out


def take(data: Data, rows: np.ndarray | Sequence[int]) -> Data:
    """`data.take(rows)`, chunk by chunk: Arrow's take over a column of several chunks concatenates them
    first, which on a mapped table is a copy of the whole column per call (a million chunks' text)."""
    at = np.asarray(rows, dtype=np.int64)
    parts = _parts(data)
    if len(parts) <= 1 or not len(at):
        return data.take(pa.array(at, pa.int64()))
    taken = _by_batch(parts, at)
    pieces = [piece for piece, _where in taken]
    joined = pa.Table.from_batches(pieces) if isinstance(data, pa.Table) else pa.chunked_array(pieces)
    if len(taken) == 1:  # one batch: already in the order asked
        return joined
    order = np.concatenate([where for _piece, where in taken])
    inverse = np.empty_like(order)
    inverse[order] = np.arange(len(order))
    return joined.take(pa.array(inverse, pa.int64()))


def checked_rows(lookup: KeyIndex, ids: pa.ChunkedArray, keys: Sequence[str]) -> np.ndarray:
    """The row of each key in `ids` (the column `lookup` indexes), -1 for an unknown one: hashed and searched
    together, then checked against the ids themselves in one comparison (a key whose first candidate is not
    its row is looked up alone)."""
    rows = lookup.first_rows(keys)
    if not len(rows):
        return rows
    found = rows >= 0
    if found.any():
        held = take_pylist(ids, rows[found])
        asked = [k for k, f in zip(keys, found, strict=True) if f]
        same = np.fromiter((h == k for h, k in zip(held, asked, strict=True)), dtype=bool, count=len(asked))
        wrong = np.flatnonzero(found)[~same]
        for i in wrong:
            row = lookup.find(keys[int(i)], ids)
            rows[i] = -1 if row is None else row
    return rows


#: Up to this many rows of a table of several batches, `take_pylist` reads each row as a zero-copy slice of
#: its batch: a page's rows cost ~15 us each that way against ~40 us for each batch a `take` touches
#: (benchmarks/README.md, "Constants"). A table of one batch is read by one `take` whatever the rows.
SLICED_ROWS = 64


def _sliced_pylist(data: pa.Table | pa.ChunkedArray, parts: Sequence[Any], at: np.ndarray) -> list[Any]:
    """The rows `at`, in that order, as one-row slices of the batches joined without a copy."""
    which, offsets = _locate(parts, at)
    pieces = [parts[b].slice(o, 1) for b, o in zip(which.tolist(), offsets.tolist(), strict=True)]
    if isinstance(data, pa.Table):
        return pa.Table.from_batches(pieces, schema=data.schema).to_pylist()
    return pa.chunked_array(pieces, type=data.type).to_pylist()


def take_pylist(data: pa.Table | pa.ChunkedArray, rows: np.ndarray | Sequence[int]) -> list[Any]:
    """`take(data, rows).to_pylist()` without joining: over several batches, a few rows as slices of their
    batches (`SLICED_ROWS`), more as each batch's rows converted on their own and put back in the order
    asked for in Python (a page's rows span the batches; the join was a second `take`)."""
    at = np.asarray(rows, dtype=np.int64)
    if not len(at):
        return []
    parts = _parts(data)
    if len(parts) <= 1:
        return take(data, at).to_pylist()
    if len(at) <= SLICED_ROWS:
        return _sliced_pylist(data, parts, at)
    out: list[Any] = [None] * len(at)
    for piece, where in _by_batch(parts, at):
        for i, value in zip(where.tolist(), piece.to_pylist(), strict=True):
            out[i] = value
    return out


def _rows(table: pa.Table, rows: np.ndarray) -> list[dict]:
    return take_pylist(table, rows)


T = TypeVar("T")


class Prefetched(Mapping[str, T], Generic[T]):
    """A table with some of its rows read ahead in one batch: a page of results reads its chunks (and then
    their documents) with one Arrow `take` instead of one slice per lookup; any other id falls through to
    the table."""

    def __init__(
        self, table: Mapping[str, T], held: dict[str, T], rows: dict[str, int] | None = None
    ) -> None:
        self.table = table
        self._held = held
        #: The table row of each id read ahead (the graph's chunk nodes follow the chunk table's rows).
        self.rows = rows or {}

    @property
    def held(self) -> dict[str, T]:
        """The rows read ahead, by id."""
        return self._held

    def __getitem__(self, key: str) -> T:
        held = self._held.get(key)
        return self.table[key] if held is None else held

    def __contains__(self, key: object) -> bool:
        return key in self._held or key in self.table

    def __iter__(self) -> Iterator[str]:
        return iter(self.table)

    def __len__(self) -> int:
        return len(self.table)


def _map(path: Path, maps: Mappings | None) -> pa.Table:
    return maps.arrow(path) if maps is not None else feather.read_table(path, memory_map=True)


class _MappedTable:
    def __init__(
        self, path: Path, id_column: str, maps: Mappings | None = None, segmented: bool = False
    ) -> None:
        """`segmented`: a version's table, read with the segments writes appended beside it (`tables`)."""
        files = table_files(path.parent, path.name) if segmented else [path]
        parts = [_map(f, maps) for f in files]
        # Concatenated without a copy: each file's batches stay mapped. Rows writes deleted stay in the
        # files (`dead`, sorted); the lookups have no entry for them, iteration and paging skip them, and
        # row numbers (the graph's, the filter columns') are the files'.
        self.table = parts[0] if len(parts) == 1 else pa.concat_tables(parts)
        self.dead = dead_rows(path.parent, path.name) if segmented else np.zeros(0, dtype=np.int64)
        self._id_column = id_column
        self._ids = self.table.column(id_column)
        self._keys = _keys(self.table, path, id_column, maps, self.dead)

    @property
    def key_index(self) -> KeyIndex:
        """The id -> row lookup (hashes sorted, with their rows)."""
        return self._keys

    def row(self, key: str) -> int | None:
        return self._keys.find(key, self._ids)

    def __len__(self) -> int:
        """Live rows (deleted ones not counted)."""
        return self.table.num_rows - len(self.dead)

    @property
    def row_count(self) -> int:
        """Rows, deleted ones included (row numbers count them)."""
        return self.table.num_rows

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self.row(key) is not None

    def __iter__(self) -> Iterator[str]:
        """Ids of the live rows in row order (the order the builder wrote, which the graph's chunk nodes
        follow)."""
        if not len(self.dead):
            for chunk in self._ids.chunks:
                yield from chunk.to_pylist()
            return
        dead, at = self.dead, 0
        for chunk in self._ids.chunks:
            ids = chunk.to_pylist()
            gone = dead[(dead >= at) & (dead < at + len(ids))] - at
            skip = set(gone.tolist())
            yield from (i for n, i in enumerate(ids) if n not in skip)
            at += len(ids)

    def column(self, name: str) -> pa.ChunkedArray:
        return self.table.column(name)

    def id_at(self, row: int) -> str:
        return str(self._ids[row].as_py())

    def ids_at(self, rows: Sequence[int]) -> list[str]:
        """The ids of several rows in one read."""
        return [str(i) for i in take_pylist(self._ids, np.asarray(rows, dtype=np.int64))]

    def _read(
        self, keys: Sequence[str], convert: Callable[[dict], T], columns: Sequence[str] | None = None
    ) -> Prefetched[T]:
        """The rows of the known `keys`, read in one `take`, by key (each checked against its own id, so a
        hash collision's first candidate is never taken for the key: such a key is looked up alone);
        `columns`: only these (the id's among them), else all."""
        # A table written before a column existed (`text_gaps`) is read without it.
        names = self.table.column_names
        table = self.table if columns is None else self.table.select([c for c in columns if c in names])
        unique = list(dict.fromkeys(keys))
        rows = self._keys.first_rows(unique)
        known = rows >= 0
        found = [k for k, f in zip(unique, known, strict=True) if f]
        out: dict[str, T] = {}
        at: dict[str, int] = {}
        for key, row, value in zip(found, rows[known].tolist(), _rows(table, rows[known]), strict=True):
            if value[self._id_column] == key:
                out[key], at[key] = convert(value), row
            elif (other := self.row(key)) is not None:
                out[key], at[key] = convert(_rows(table, np.array([other]))[0]), other
        return Prefetched(self, out, at)  # type: ignore[arg-type]

    def rows(self, keys: Sequence[str]) -> np.ndarray:
        """The row of each key, -1 for an unknown one (`checked_rows`)."""
        return checked_rows(self._keys, self._ids, keys)


class IdList(_MappedTable):
    """A mapped list of ids in row order and its lookup (`write_id_list`): a `graph_order.ChunkOrder`."""

    def __init__(self, path: Path, column: str, maps: Mappings | None = None) -> None:
        super().__init__(path, column, maps)


def write_id_list(path: Path, ids: Sequence[str], column: str) -> None:
    """One string column, uncompressed (mapped), written atomically, with its key lookup beside it."""
    write_arrow(path, pa.table({column: pa.array(list(ids), pa.string())}))
    write_keys(path, list(ids), column)


class ChunkTable(_MappedTable, Mapping[str, Chunk]):
    """chunks.arrow: a `Mapping` from chunk id to `Chunk`, each read from its row when asked for."""

    def __init__(self, path: Path, maps: Mappings | None = None) -> None:
        super().__init__(path, "chunk_id", maps, segmented=True)
        self._docs = _keys(self.table, path, "doc_id", maps, self.dead)

    def __getitem__(self, chunk_id: str) -> Chunk:
        row = self.row(chunk_id)
        if row is None:
            raise KeyError(chunk_id)
        return self.at(row)

    def at(self, row: int) -> Chunk:
        return chunk_from_row(self.table.slice(row, 1).to_pylist()[0])

    def prefetch(self, chunk_ids: Sequence[str]) -> Prefetched[Chunk]:
        """This table with `chunk_ids` read ahead in one batch."""
        return self._read(chunk_ids, chunk_from_row)

    def of_doc(self, doc_id: str) -> list[Chunk]:
        """The document's chunks in reading order (none for an unknown id)."""
        rows = np.sort(self._docs.rows_of(doc_id))
        chunks = [chunk_from_row(r) for r in _rows(self.table, rows) if r["doc_id"] == doc_id]
        return sorted(chunks, key=lambda c: c.position)

    def neighbours(self, chunk: Chunk) -> tuple[str | None, str | None]:
        """The ids of the chunks before and after `chunk` in its document's reading order (`of_doc`'s), from
        its chunks' ids and positions alone, not their texts."""
        rows = np.sort(self._docs.rows_of(chunk.doc_id))
        mine = [
            r
            for r in _rows(self.table.select(["doc_id", "position", "chunk_id"]), rows)
            if r["doc_id"] == chunk.doc_id
        ]
        ids = [r["chunk_id"] for r in sorted(mine, key=lambda r: r["position"])]
        at = ids.index(chunk.chunk_id)
        return (ids[at - 1] if at > 0 else None), (ids[at + 1] if at + 1 < len(ids) else None)

    def parts_of(self, doc_ids: Sequence[str]) -> dict[str, list[tuple[int, str]]]:
        """Each document's chunks' (start, text), read in one `take`: what holds its text
        (`tables.joined_text`)."""
        return self._pieces(list(dict.fromkeys(doc_ids)))

    def pieces_near(self, spans: Mapping[str, Sequence[tuple[int, int]]]) -> dict[str, list[tuple[int, str]]]:
        """For each document id, the (start, text) of its chunks that overlap one of its `spans` ([start, end)
        character ranges), in one read of the bounds of all its chunks and one of the texts wanted."""
        return self._pieces(list(spans), spans)

    def _pieces(
        self, docs: list[str], spans: Mapping[str, Sequence[tuple[int, int]]] | None = None
    ) -> dict[str, list[tuple[int, str]]]:
        """The (start, text) of the chunks of each of `docs`: all of them, or those overlapping its `spans`."""
        found = self._docs.rows_of_many(docs)
        out: dict[str, list[tuple[int, str]]] = {d: [] for d in docs}
        rows = np.concatenate(found) if found else np.zeros(0, dtype=np.int64)
        if spans is not None and len(rows):
            bounds = take(self.table.select(["start", "end"]), rows)
            starts = bounds.column("start").to_numpy()
            ends = bounds.column("end").to_numpy()
            owner = np.repeat(np.arange(len(docs)), [len(f) for f in found])
            near = np.zeros(len(rows), dtype=bool)
            for i, doc_id in enumerate(docs):
                mine = owner == i
                for start, end in spans[doc_id]:
                    near |= mine & (starts < end) & (ends > start)
            rows = rows[near]
        for r in _rows(self.table.select(["doc_id", "start", "text"]), np.sort(rows)):
            if r["doc_id"] in out:  # a hash collision's other rows are not this document's
                out[r["doc_id"]].append((int(r["start"]), str(r["text"])))
        return out

    def count_of_doc(self, doc_id: str) -> int:
        rows = self._docs.rows_of(doc_id)
        docs = self.table.column("doc_id")
        return sum(1 for r in rows if docs[int(r)].as_py() == doc_id)


#: The columns of a document's row a `DocumentHead` holds.
HEAD_COLUMNS = ("doc_id", "file_id", "title", "url", "date", "language")


class DocumentTable(_MappedTable, Mapping[str, Document]):
    """documents.arrow: a `Mapping` from document id to `Document`, read from its row when asked for."""

    def __init__(self, path: Path, maps: Mappings | None = None, chunks: ChunkTable | None = None) -> None:
        """`chunks`: the version's chunk table, which holds the text of most documents (`tables.stored_text`);
        opened beside this one when first needed if not given."""
        super().__init__(path, "doc_id", maps, segmented=True)
        self._sorted: np.ndarray | None = None
        self._path, self._maps, self._chunks = path, maps, chunks

    def _chunk_table(self) -> ChunkTable:
        if self._chunks is None:
            self._chunks = ChunkTable(self._path.with_name(CHUNKS), self._maps)
        return self._chunks

    def _documents(self, rows: Sequence[dict]) -> list[Document]:
        """Documents of rows; the texts their chunks hold read from the chunk table in one batch."""
        held = [r["doc_id"] for r in rows if r["text"] is None and r.get("text_gaps") is not None]
        if not held:
            return [document_from_row(r) for r in rows]
        parts = self._chunk_table().parts_of(held)
        return [document_from_row(r, parts.__getitem__) for r in rows]

    def heads(self, doc_ids: Sequence[str]) -> dict[str, DocumentHead]:
        """The known documents of `doc_ids` without their texts, in one read."""
        return {
            doc_id: document_head(row) for doc_id, row in self._read(doc_ids, dict, HEAD_COLUMNS).held.items()
        }

    def around(
        self, chunks: Sequence[Chunk], chars: int
    ) -> tuple[dict[str, DocumentHead], dict[str, tuple[str, str]]]:
        """The documents of `chunks` without their texts, and each chunk's context: up to `chars` characters
        of its document before it and after it (`text[start - chars:start]`, `text[end:end + chars]`).

        A document whose chunks hold its text (`tables.stored_text`) is read only around these chunks: the
        chunks that overlap those windows, and its gaps. Reading its whole text cost a page of hits in long
        documents ~2 ms a hit per 750 KB document (benchmarks/docs/speed.md, "A page reads its documents
        around its hits"). Should the pieces leave a hole in a window, the whole text is read, as before."""
        raw = self._read([c.doc_id for c in chunks], dict, (*HEAD_COLUMNS, "text", "text_gaps")).held
        heads = {doc_id: document_head(row) for doc_id, row in raw.items()}
        if not chars:
            return heads, {c.chunk_id: ("", "") for c in chunks if c.doc_id in raw}
        context: dict[str, tuple[str, str]] = {}
        # Per document: its gaps and the page's own chunks of it, which hold many windows already (a
        # document of one chunk, hits next to each other); the chunks the other windows need read after.
        known: dict[str, list[tuple[int, str]]] = {}
        lengths: dict[str, int] = {}
        windows: dict[str, tuple[tuple[int, int], tuple[int, int]]] = {}
        for chunk in chunks:
            row = raw.get(chunk.doc_id)
            if row is None:
                continue
            if row["text"] is not None or row.get("text_gaps") is None:
                text = row["text"] or ""
                context[chunk.chunk_id] = (
                    text[max(0, chunk.start - chars) : chunk.start],
                    text[chunk.end : chunk.end + chars],
                )
                continue
            if chunk.doc_id not in known:
                known[chunk.doc_id] = gap_pieces(row["text_gaps"])
                lengths[chunk.doc_id] = known[chunk.doc_id][-1][0]  # the last gap marks the text's end
            known[chunk.doc_id].append((chunk.start, chunk.text))
            end = max(chunk.end, min(lengths[chunk.doc_id], chunk.end + chars))
            windows[chunk.chunk_id] = ((max(0, chunk.start - chars), chunk.start), (chunk.end, end))
        spans: dict[str, list[tuple[int, int]]] = {}
        for chunk in chunks:
            if chunk.chunk_id in windows:
                (a, b), (c, d) = windows[chunk.chunk_id]
                before, after = text_window(known[chunk.doc_id], a, b), text_window(known[chunk.doc_id], c, d)
                if before is None or after is None:
                    spans.setdefault(chunk.doc_id, []).extend(windows[chunk.chunk_id])
                else:
                    context[chunk.chunk_id] = (before, after)
        for doc_id, pieces in (self._chunk_table().pieces_near(spans) if spans else {}).items():
            known[doc_id].extend(pieces)
        for chunk in chunks:
            if chunk.chunk_id in windows and chunk.chunk_id not in context:
                (a, b), (c, d) = windows[chunk.chunk_id]
                pieces = known[chunk.doc_id]
                held = text_window(pieces, a, b), text_window(pieces, c, d)
                if held[0] is None or held[1] is None:
                    text = self[chunk.doc_id].text
                    context[chunk.chunk_id] = (text[a:b], text[c:d])
                else:
                    context[chunk.chunk_id] = (held[0], held[1])
        return heads, context

    def __getitem__(self, doc_id: str) -> Document:
        row = self.row(doc_id)
        if row is None:
            raise KeyError(doc_id)
        return self._documents(self.table.slice(row, 1).to_pylist())[0]

    def prefetch(self, doc_ids: Sequence[str]) -> Prefetched[Document]:
        """This table with `doc_ids` read ahead in one batch (and the chunks holding their texts in another)."""
        raw = self._read(doc_ids, dict)
        keys = list(raw.held)
        documents = self._documents([raw.held[k] for k in keys])
        return Prefetched(self, dict(zip(keys, documents, strict=True)), raw.rows)

    def page(self, offset: int, limit: int) -> list[Document]:
        """Documents in id order, `limit` from `offset` (the order is sorted once, in Arrow, on first use)."""
        return self._documents(_rows(self.table, self._page_rows(offset, limit)))

    def page_heads(self, offset: int, limit: int) -> list[DocumentHead]:
        """`page` without the texts: a listing reads rows, not every document's chunks."""
        return [
            document_head(r)
            for r in _rows(
                self.table.select([c for c in HEAD_COLUMNS if c in self.table.column_names]),
                self._page_rows(offset, limit),
            )
        ]

    def _page_rows(self, offset: int, limit: int) -> np.ndarray:
        if self._sorted is None:
            order = pc.sort_indices(self._ids).to_numpy()
            self._sorted = order[~np.isin(order, self.dead)] if len(self.dead) else order
        return np.asarray(self._sorted[offset : offset + limit])
