"""The vectors of the LanceDB table, read in place from its data files for exact rescoring.

The serving files rescore a search's candidates with their stored vectors. Those vectors are already on
disk once, in the LanceDB table (the source of truth); a second copy (`serving-vectors.npy`) was 1.5 KB a
chunk of 384 dimensions, a fifth of the index. A compacted table stores its `vector` column, page by page,
as plain little-endian rows (Lance file format 2.1 and later: a full-zip page of a fixed-size list with
no validity, flat 16- or 32-bit values: float16 from index format 6, `vectors.VECTOR_TYPE`, float32
before), so a row can be read from the data file where it lies:

    serving-pages.json   each page's data file (relative to the `vectors/` folder), byte offset and rows,
                         in the table's row order, and the values' width (format 2; format 1: float32)
    serving-norms.npy    each row's float32 norm: a read row, widened to float32 and divided by it, is the
                         unit vector the codes were made from, with the writer's own float32 arithmetic

`table_pages` reads the layout from Lance's own file metadata (`lance.file.LanceFileReader.metadata`) and
accepts it only when every page is of that plain kind and the table has no deleted rows; the writer then
compares every mapped row with the table's own values before it relies on them. Anything else (an older
file format, a table with deletion files, another encoding) keeps the `.npy`. Lance never rewrites a data
file in place (appends add files, deletions add deletion files, compaction writes new files), and a
version's folder holds its own hard links, so a version's pages stay valid as long as the version exists;
a merge that compacts the table writes the serving files anew (`vector_segments.compact`).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

PAGES = "serving-pages.json"
NORMS = "serving-norms.npy"
FORMAT = 2  # 2: the values' width is recorded (float16 pages); float32 pages are written as format 1
READABLE = (1, 2)
VALUE_TYPES: dict[int, np.dtype[Any]] = {16: np.dtype("<f2"), 32: np.dtype("<f4")}


@dataclass(frozen=True, slots=True)
class Page:
    file: str  # relative to the vectors folder
    offset: int  # bytes
    rows: int
    bits: int = 32  # each value's width: float16 or float32


def _plain_page(encoding: str, rows: int, size: int, dim: int, bits: int) -> bool:
    """Whether a page's layout (Lance's description of it) is `rows` plain rows of `dim` float values of
    `bits` bits."""
    squeezed = "".join(encoding.split())
    return (
        "FullZipLayout" in squeezed
        and "bits_rep:0," in squeezed
        and "bits_def:0," in squeezed
        and f"items_per_value:{dim}," in squeezed
        and "has_validity:false" in squeezed
        and f"Flat(Flat{{bits_per_value:{bits},data:None,}}" in squeezed
        and squeezed.count("CompressiveEncoding") == 2  # the list, then its flat values: nothing else
        and size * 8 == rows * dim * bits
    )


def table_pages(folder: Path, table: Any, dim: int) -> list[Page] | None:
    """Where each row of `table` (a LanceDB table in `folder`) holds its vector, in the table's row order;
    None when any part of the layout is not plain float16 or float32 rows (see the module's docstring)."""
    try:
        from lance.file import LanceFileReader

        dataset = table.to_lance()
        value_type = dataset.schema.field("vector").type.value_type
        bits = {pa.float16(): 16, pa.float32(): 32}.get(value_type)
        if bits is None:
            return None
        field = next(f for f in dataset.lance_schema.fields() if f.name() == "vector")
        field_id = field.id()
        root = Path(dataset.uri)
        pages: list[Page] = []
        for fragment in dataset.get_fragments():
            meta = fragment.metadata
            if meta.deletion_file is not None:
                return None
            holding = [f for f in meta.files if field_id in f.fields]
            if len(holding) != 1 or holding[0].base_id is not None:
                return None
            data_file = holding[0]
            column = data_file.column_indices[data_file.fields.index(field_id)]
            path = root / "data" / data_file.path
            metadata = LanceFileReader(str(path)).metadata()
            version = (getattr(metadata, "major_version", 0), getattr(metadata, "minor_version", 0))
            if version < (2, 1):
                return None
            found = 0
            for page in metadata.columns[column].pages:
                if len(page.buffers) != 1:
                    return None
                buffer = page.buffers[0]
                rows = buffer.size * 8 // (dim * bits)
                if not _plain_page(str(page.encoding), rows, buffer.size, dim, bits):
                    return None
                pages.append(Page(os.path.relpath(path, folder), int(buffer.position), int(rows), bits))
                found += rows
            if found != meta.physical_rows:
                return None
        return pages
    except (ImportError, AttributeError, KeyError, StopIteration, ValueError, OSError):
        return None


def write(folder: Path, pages: list[Page], norms: np.ndarray, dim: int, suffix: str = ".tmp") -> list[Path]:
    """Write the page list and the norms under temporary names (`suffix`); returns their paths (the caller
    renames them into place with the other serving files)."""
    from hybridrag.indexing.stores.keys import write_npy

    tmp_pages = folder / (PAGES + suffix)
    bits = _width(pages)
    record: dict[str, Any] = {"format": 1, "dim": dim, "pages": [[p.file, p.offset, p.rows] for p in pages]}
    if bits != 32:  # format 1 (float32) where it is enough, which a release before format 2 reads
        record.update(format=FORMAT, bits=bits)
    tmp_pages.write_text(json.dumps(record), "utf-8")
    tmp_norms = folder / (NORMS + suffix)
    write_npy(tmp_norms, np.ascontiguousarray(norms, dtype=np.float32))
    return [tmp_pages, tmp_norms]


def _width(pages: list[Page]) -> int:
    widths = {page.bits for page in pages} or {32}
    if len(widths) != 1 or next(iter(widths)) not in VALUE_TYPES:
        raise ValueError(f"vector pages of widths {sorted(widths)}: one of {sorted(VALUE_TYPES)} expected")
    return widths.pop()


def read_pages(folder: Path) -> list[Page]:
    record = json.loads((folder / PAGES).read_text("utf-8"))
    if record.get("format") not in READABLE:
        raise ValueError(f"{folder / PAGES} is of an unknown format {record.get('format')!r}")
    bits = int(record.get("bits", 32))
    return [Page(str(name), int(offset), int(rows), bits) for name, offset, rows in record["pages"]]


def pages_readable(folder: Path) -> bool:
    """Whether every data file the pages name is still in `folder` (a table operation in a write's copy,
    such as Lance's own cleanup of files its newest manifest no longer names, may have unlinked one)."""
    return all((folder / name).is_file() for name in {page.file for page in read_pages(folder)})


def present(folder: Path) -> bool:
    return (folder / PAGES).is_file() and (folder / NORMS).is_file()


def remove(folder: Path) -> None:
    for name in (PAGES, NORMS):
        (folder / name).unlink(missing_ok=True)


class LanceRows:
    """Unit float32 vectors read from the table's data files (`pread`, safe across threads), a `RowFile`
    look-alike: `shape`, `dtype`, `take(rows)`, `all()`."""

    def __init__(
        self, folder: Path, dim: int, pages: list[Page] | None = None, norms: np.ndarray | None = None
    ) -> None:
        """The rows `folder`'s serving files map; `pages` and `norms` given: those (before they are
        written)."""
        pages = read_pages(folder) if pages is None else pages
        self._norms = np.load(folder / NORMS, mmap_mode="r") if norms is None else norms
        self._stored = VALUE_TYPES[_width(pages)]
        self._row_bytes = dim * self._stored.itemsize
        files: dict[str, Any] = {}
        ends: dict[str, int] = {}
        for page in pages:
            ends[page.file] = max(ends.get(page.file, 0), page.offset + page.rows * self._row_bytes)
        self._fd: list[int] = []
        self._offset: list[int] = []
        for page in pages:
            handle = files.get(page.file)
            if handle is None:
                path = folder / page.file
                handle = files[page.file] = open(path, "rb", buffering=0)  # noqa: SIM115 - held while used
                if os.fstat(handle.fileno()).st_size < ends[page.file]:
                    raise ValueError(f"{path} is shorter than the serving pages say")
            self._fd.append(handle.fileno())
            self._offset.append(page.offset)
        sizes = [page.rows for page in pages]
        self._files = files  # the descriptors live as long as this object
        self._starts = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        self._offsets = np.asarray(self._offset, dtype=np.int64)
        self.shape: tuple[int, int] = (int(self._starts[-1]), dim)
        self.dtype = np.dtype(np.float32)
        if len(self._norms) != self.shape[0]:
            raise ValueError(f"{folder / NORMS} holds {len(self._norms)} rows, the pages {self.shape[0]}")

    def take(self, rows: np.ndarray) -> np.ndarray:
        """The given rows as unit vectors, in the order given (consecutive rows of a page read together)."""
        dim = self.shape[1]
        stored = np.empty((len(rows), dim), dtype=self._stored)
        if not len(rows):
            return stored.astype(np.float32)
        at = np.asarray(rows, dtype=np.int64)
        if at.min() < 0 or at.max() >= self.shape[0]:
            raise IndexError("row out of range")
        page = np.searchsorted(self._starts, at, side="right") - 1
        # Runs of consecutive rows on one page: one read each (offsets worked out in numpy, the loop on ints).
        breaks = np.flatnonzero((np.diff(at) != 1) | (np.diff(page) != 0)) + 1
        first = np.r_[0, breaks]
        counts = (np.r_[breaks, len(at)] - first).tolist()
        pages = page[first]
        offsets = (self._offsets[pages] + (at[first] - self._starts[pages]) * self._row_bytes).tolist()
        view, size, fds = stored.data.cast("B"), self._row_bytes, self._fd
        for start, count, p, offset in zip(first.tolist(), counts, pages.tolist(), offsets, strict=True):
            want = count * size
            if os.preadv(fds[p], [view[start * size : start * size + want]], offset) != want:
                raise OSError("short read from a vector page")
        out = stored.astype(np.float32, copy=False)
        norms = np.asarray(self._norms[at], dtype=np.float32)
        out /= np.where(norms > 0, norms, np.float32(1.0))[:, None]
        return out

    def all(self) -> np.ndarray:
        return self.take(np.arange(self.shape[0]))
