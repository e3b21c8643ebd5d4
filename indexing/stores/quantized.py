"""The vector store's serving files: int8 codes scanned in memory, float32 vectors on disk for exact rescoring.

`VectorIndexWriter.finish` derives them from the LanceDB table (the source of truth, which updates edit), in
the table's row order, beside it in the version's `vectors/` folder:

    serving-vectors.npy    rows x dim float32, unit length; only the rescored rows are read (`RowFile`) —
                           or, where the table's layout allows (`lance_rows`), no second copy at all:
    serving-pages.json     where each row's vector (float16; float32 before) lies in the table's data files, and
    serving-norms.npy      its norm (`lance_rows.LanceRows` reads the rows there, as unit vectors)
    serving-codes.faiss    the codes scanned in memory, inner product: below `IVF_MIN_ROWS` rows a flat faiss
                           IndexScalarQuantizer (8-bit uniform codes, dim bytes a row); from there an inverted
                           file (`ivf_lists(rows)` k-means lists, + 8 bytes a row for its id) so a search scans
                           the lists nearest the query, not every code: IndexIVFPQFastScan, product-quantized
                           codes of 4 bits per `PQ_DIMS` dimensions (dim / 4 bytes a row, scanned with SIMD
                           lookup tables), or in versions written before 2026-11-29 IndexIVFScalarQuantizer
                           (8-bit codes), which still read
    serving-columns.arrow  chunk_id, file_id, date, entity_types in row order (uncompressed Arrow IPC, mapped)
    serving-keys.npy       chunk id -> row (`keys.KeyIndex`)
    serving-refine.npy     beside the product-quantized inverted file only: rows x dim 8-bit codes (each
    serving-refine-range.npy  dimension's own range, faiss' ScalarQuantizer QT_8bit), mapped, which rank its
                           candidates before the best few are read for exact rescoring (versions written
                           before 2026-12-02 have none: every candidate is read)

A search scans the codes for a few hundred candidates (faiss, SIMD; a flat scan costs ~10 ms a million rows
on one core here, so from `IVF_MIN_ROWS` rows only the `IVF_PROBES` lists nearest the query are scanned: the
cost then grows with the square root of the rows) and rescores them with their float32 vectors, so every
similarity returned is exact and only the candidate set is approximate (recall against exact search:
benchmarks/docs/scale.md). Nothing here grows the process' own memory with the corpus except the codes (dim
bytes a row); the rest is file-backed and reclaimable. The float32 rows are read with `pread`, not mapped:
a mapping keeps every page a rescoring touched, with the kernel's fault-around neighbours (16 pages a
fault), in the process' resident set, which at a million rows grew to most of the 1.5 GB file; read, they
stay in the page cache only.
"""

from __future__ import annotations

import math
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from hybridrag.indexing.stores import lance_rows
from hybridrag.indexing.stores.filters import ChunkColumns, ChunkFilters, filter_mask
from hybridrag.indexing.stores.keys import KeyIndex
from hybridrag.indexing.stores.mapped import take_pylist
from hybridrag.indexing.stores.memory_maps import Mappings

VECTORS = "serving-vectors.npy"
CODES = "serving-codes.faiss"
COLUMNS = "serving-columns.arrow"
KEYS = "serving-keys.npy"
FILES = (VECTORS, CODES, COLUMNS, KEYS)
REFINE = "serving-refine.npy"
REFINE_RANGE = "serving-refine-range.npy"
REFINE_FILES = (REFINE, REFINE_RANGE)
FILTER_COLUMNS = ("chunk_id", "file_id", "date", "entity_types")
# Candidates rescored exactly per search: at least RESCORE_MIN, and RESCORE_PER_RESULT per result asked for —
# the fewest that keep recall against exact search at 1.0 (benchmarks/README.md, "Constants"), since every
# candidate is a positional read of its stored vector, the largest part of a semantic search's own CPU.
RESCORE_MIN = 50
RESCORE_PER_RESULT = 1.5
# The product-quantized inverted file ranks coarser than 8-bit codes: more candidates are taken from it, the
# fewest that keep recall@10 near 0.99 at 3M rows; the 1,600 cover a list of 100 (a search's default depth)
# at recall@100 0.984 against 0.993 with 4,000, in half the time (benchmarks/README.md, "Constants"). Where
# the version has 8-bit refine codes they rank those candidates and only the best `rescored(FLAT_KIND, k)`
# are read and rescored exactly (at 1M, the same recall as reading all 1,600: benchmarks/docs/scale.md).
PQ_RESCORE_MIN = 1600
PQ_RESCORE_PER_RESULT = 16
PQ_DIMS = 2  # dimensions a 4-bit sub-quantizer codes: 384-d vectors in 96 bytes
# A filter passing at most this many rows is answered exactly over those rows (no code scan); over the
# product-quantized inverted file only when they are fewer than twice the candidates (its scan of every list
# costs less than reading that many rows: benchmarks/docs/scale.md, "Vector search, product-quantized").
EXACT_FILTERED_MAX = 20_000
TRAIN_SAMPLE = 200_000
BLOCK = 65_536
REFINE_BLOCK = 16_384  # rows of refine codes widened to float32 at a time (25 MB at 384 dimensions)
# The inverted file (benchmarks/README.md, "Constants"): from this many rows; IVF_LISTS_PER_SQRT * sqrt(rows)
# lists, trained on IVF_TRAIN_PER_LIST sampled rows a list; IVF_PROBES lists scanned a search. A filter that
# passes a share s of the rows scans IVF_PROBES / s lists (all of them for a selective one), so about as many
# eligible codes are compared as without a filter and a filtered page is as full and as exact.
IVF_MIN_ROWS = 200_000
IVF_LISTS_PER_SQRT = 4
IVF_TRAIN_PER_LIST = 40
# k-means iterations training the lists (faiss' IVF default is 10): each compares every sampled row with every
# list (N^1.5 in the rows); five gave the same recall@10 at 1M (benchmarks/README.md, "Constants").
IVF_TRAIN_ITERATIONS = 5
IVF_PROBES = 128
FLAT_KIND = "sq8-rescored"
IVF_KIND = "ivf-pq4-rescored"
IVF_SQ8_KIND = "ivf-sq8-rescored"  # an inverted file of 8-bit codes (written before 2026-11-29, or odd dims)
# The first bytes of each kind's faiss file (its index type's fourcc): a version's kind without loading it.
_FOURCC = {b"IxSQ": FLAT_KIND, b"IwPf": IVF_KIND, b"IwSq": IVF_SQ8_KIND}


def serving_kind(rows: int, ivf_min_rows: int | None = None) -> str:
    """How the codes of `rows` rows are searched: a flat scan, or an inverted file from `ivf_min_rows`
    (default `IVF_MIN_ROWS`)."""
    return IVF_KIND if rows >= (IVF_MIN_ROWS if ivf_min_rows is None else ivf_min_rows) else FLAT_KIND


def codes_kind(folder: Path, segment: str | None = None) -> str:
    """The kind of the codes already written in `folder` (read from the file's first bytes)."""
    with open(folder / file_name(CODES, segment), "rb") as fh:
        fourcc = fh.read(4)
    if fourcc not in _FOURCC:
        raise ValueError(f"{folder / file_name(CODES, segment)} holds codes of an unknown kind {fourcc!r}")
    return _FOURCC[fourcc]


def _kind_of(index: Any) -> str:
    import faiss

    if isinstance(index, faiss.IndexIVFPQFastScan):
        return IVF_KIND
    return IVF_SQ8_KIND if isinstance(index, faiss.IndexIVFScalarQuantizer) else FLAT_KIND


def rescored(kind: str, limit: int) -> int:
    """How many candidates a search for `limit` results rescores exactly, for codes of `kind`."""
    if kind == IVF_KIND:
        return max(PQ_RESCORE_MIN, PQ_RESCORE_PER_RESULT * max(1, limit))
    return max(RESCORE_MIN, math.ceil(RESCORE_PER_RESULT * max(1, limit)))


def ivf_lists(rows: int) -> int:
    """How many inverted lists the codes of `rows` rows are split into."""
    return max(1, round(IVF_LISTS_PER_SQRT * math.sqrt(rows)))


def ivf_probes(lists: int, share: float) -> int:
    """Lists scanned a search when a filter passes `share` of the rows: `IVF_PROBES / share`, at most all."""
    return min(lists, math.ceil(IVF_PROBES / max(share, 1e-9)))


def _trained_codes(folder: Path, rows: int, dim: int, kind: str) -> Any | None:
    """The codes index already in `folder` (the version an update started from), emptied, when its training
    still fits `rows` rows: an update then adds every row again but trains nothing (k-means over a million
    rows is most of the cost). None when there is none, or when the corpus has grown or shrunk past a factor
    of two in lists (or crossed `IVF_MIN_ROWS`), so a fresh training is due."""
    import faiss

    path = folder / CODES
    if not path.is_file():
        return None
    old: Any = faiss.read_index(str(path))
    if old.d != dim:
        return None
    if kind != IVF_KIND or _kind_of(old) != _new_kind(dim):
        return None  # a flat index trains in a second: trained afresh; another kind of codes is replaced
    if not (old.nlist / 2 <= ivf_lists(rows) <= old.nlist * 2):
        return None
    old.reset()
    return old


def _new_kind(dim: int) -> str:
    """The inverted file's kind for `dim`-d vectors: product-quantized where the dimensions split evenly."""
    return IVF_KIND if dim % PQ_DIMS == 0 else IVF_SQ8_KIND


def _new_codes(matrix: np.ndarray, rows: int, dim: int, kind: str) -> Any:
    """A codes index of `kind` for `rows` rows, trained on a fixed sample of them."""
    import faiss

    sq8 = faiss.ScalarQuantizer.QT_8bit_uniform
    index: Any
    if kind == FLAT_KIND:
        index = faiss.IndexScalarQuantizer(dim, sq8, faiss.METRIC_INNER_PRODUCT)
        sample_size = min(rows, TRAIN_SAMPLE)
    else:
        lists = ivf_lists(rows)
        if _new_kind(dim) == IVF_KIND:
            index = faiss.IndexIVFPQFastScan(
                faiss.IndexFlatIP(dim), dim, lists, dim // PQ_DIMS, 4, faiss.METRIC_INNER_PRODUCT
            )
        else:
            index = faiss.IndexIVFScalarQuantizer(
                faiss.IndexFlatIP(dim), dim, lists, sq8, faiss.METRIC_INNER_PRODUCT
            )
        index.cp.niter = IVF_TRAIN_ITERATIONS
        sample_size = min(rows, IVF_TRAIN_PER_LIST * lists)
    # A fixed sample: the same vectors always give the same codes.
    rng = np.random.default_rng(0)
    sample = np.sort(rng.choice(rows, size=sample_size, replace=False))
    index.train(np.ascontiguousarray(matrix[sample]))
    return index


def present(folder: Path) -> bool:
    """Whether the base's serving files are complete: codes, columns, keys and the float32 rows (a file
    of them, or their place in the table's data files)."""
    have = all((folder / name).is_file() for name in FILES if name != VECTORS)
    return have and ((folder / VECTORS).is_file() or lance_rows.present(folder))


def open_rows(folder: Path, dim: int, segment: str | None = None) -> RowFile | lance_rows.LanceRows:
    """A part's float32 rows: the base's from the table's data files when its serving files say where,
    else (and for a segment) from its `.npy`."""
    if segment is None and lance_rows.present(folder):
        return lance_rows.LanceRows(folder, dim)
    return RowFile(folder / file_name(VECTORS, segment))


def file_name(name: str, segment: str | None) -> str:
    """A serving file's name; a segment's (`vector_segments`) carries the version that wrote it:
    serving-codes.faiss -> serving-codes.<segment>.faiss."""
    if segment is None:
        return name
    stem, ext = name.split(".", 1)
    return f"{stem}.{segment}.{ext}"


def write_serving_files(
    folder: Path, table: Any, dim: int, ivf_min_rows: int | None = None, segment: str | None = None
) -> str:
    """Write the serving files of a LanceDB table (`chunk_id`, filter columns, `vector`); returns their kind
    (flat codes, or an inverted file from `ivf_min_rows` rows, default `IVF_MIN_ROWS`: `serving_kind`).
    `segment`: the files of a write's segment (`vector_segments`: always flat codes), not the base's.

    Every file is written under a temporary name and renamed, so a version sharing files with this one
    through hard links (an update's staging copy) never sees one change.
    """
    import faiss

    data: pa.Table = table.to_arrow() if hasattr(table, "to_arrow") else table
    # The base's rows stay in the table's data files when their layout is plain (then no second copy).
    pages = (
        lance_rows.table_pages(folder, table, dim) if segment is None and hasattr(table, "to_lance") else None
    )
    n = data.num_rows
    kind = FLAT_KIND if segment is not None else serving_kind(n, ivf_min_rows)
    names = {name: file_name(name, segment) for name in FILES}
    vectors = data.column("vector").combine_chunks()
    flat = vectors.values.to_numpy(zero_copy_only=False)
    tmp_vectors = folder / (names[VECTORS] + ".tmp")
    matrix = np.lib.format.open_memmap(tmp_vectors, mode="w+", dtype=np.float32, shape=(n, dim))
    row_norms = np.empty(n, dtype=np.float32)
    for lo in range(0, n, BLOCK):
        block = np.asarray(flat[lo * dim : min(n, lo + BLOCK) * dim], dtype=np.float32).reshape(-1, dim)
        norms = np.linalg.norm(block, axis=1, keepdims=True)
        row_norms[lo : lo + len(block)] = norms[:, 0]
        matrix[lo : lo + len(block)] = block / np.where(norms > 0, norms, 1.0)
    matrix.flush()
    if pages is not None and not _same_rows(folder, dim, pages, row_norms, matrix):
        pages = None
    if n:
        trained = _trained_codes(folder, n, dim, kind) if segment is None else None
        index = trained or _new_codes(matrix, n, dim, kind)
        for lo in range(0, n, BLOCK):
            index.add(np.ascontiguousarray(matrix[lo : lo + BLOCK]))
    else:
        index = faiss.IndexScalarQuantizer(
            dim, faiss.ScalarQuantizer.QT_8bit_uniform, faiss.METRIC_INNER_PRODUCT
        )
    written = _kind_of(index)
    refine = _write_refine(folder, matrix, n, dim) if segment is None and written == IVF_KIND else None
    del matrix
    tmp_codes = folder / (names[CODES] + ".tmp")
    faiss.write_index(index, str(tmp_codes))
    columns = data.select(list(FILTER_COLUMNS)).combine_chunks()
    tmp_columns = folder / (names[COLUMNS] + ".tmp")
    with pa.OSFile(str(tmp_columns), "wb") as sink, pa.ipc.new_file(sink, columns.schema) as writer:
        writer.write_table(columns)
    keys = KeyIndex.build(columns.column("chunk_id").to_pylist())
    keys.save(folder / names[KEYS])
    os.replace(tmp_columns, folder / names[COLUMNS])
    os.replace(tmp_codes, folder / names[CODES])
    if segment is None:
        for name in REFINE_FILES:
            if refine is None:
                (folder / name).unlink(missing_ok=True)
            else:
                os.replace(refine[name], folder / name)
    # The vectors last: a folder with every file present is complete.
    if pages is not None:
        tmp_pages, tmp_norms = lance_rows.write(folder, pages, row_norms, dim)
        (folder / VECTORS).unlink(missing_ok=True)
        tmp_vectors.unlink()
        os.replace(tmp_pages, folder / lance_rows.PAGES)
        os.replace(tmp_norms, folder / lance_rows.NORMS)
    else:
        if segment is None:
            lance_rows.remove(folder)
        os.replace(tmp_vectors, folder / names[VECTORS])
    return written


def _write_refine(folder: Path, matrix: np.ndarray, n: int, dim: int) -> dict[str, Path]:
    """The 8-bit refine codes of the unit rows `matrix` and each dimension's range, under temporary names
    (returned by final name): faiss' ScalarQuantizer QT_8bit trained on a fixed sample, so the same
    vectors always give the same codes."""
    import faiss

    quantizer = faiss.ScalarQuantizer(dim, faiss.ScalarQuantizer.QT_8bit)
    rng = np.random.default_rng(0)
    sample = np.sort(rng.choice(n, size=min(n, TRAIN_SAMPLE), replace=False))
    quantizer.train(np.ascontiguousarray(matrix[sample]))
    # QT_8bit decodes code c of dimension i as low[i] + (c + 0.5) / 255 * width[i].
    ranges = faiss.vector_to_array(quantizer.trained).astype(np.float32).reshape(2, dim)
    tmp = {name: folder / (name + ".tmp") for name in REFINE_FILES}
    codes = np.lib.format.open_memmap(tmp[REFINE], mode="w+", dtype=np.uint8, shape=(n, dim))
    for lo in range(0, n, BLOCK):
        codes[lo : lo + BLOCK] = quantizer.compute_codes(np.ascontiguousarray(matrix[lo : lo + BLOCK]))
    codes.flush()
    del codes
    with open(tmp[REFINE_RANGE], "wb") as fh:
        np.save(fh, ranges)
    return tmp


def _same_rows(
    folder: Path, dim: int, pages: list[lance_rows.Page], norms: np.ndarray, matrix: np.ndarray
) -> bool:
    """Whether the rows `pages` locate, divided by `norms`, are exactly `matrix` (the unit rows of the
    table's own values): the layout read from Lance's metadata checked, not assumed."""
    try:
        rows = lance_rows.LanceRows(folder, dim, pages, norms)
    except (OSError, ValueError):
        return False
    if rows.shape[0] != len(matrix):
        return False
    for lo in range(0, len(matrix), BLOCK):
        part = np.arange(lo, min(len(matrix), lo + BLOCK))
        if not np.array_equal(rows.take(part), matrix[lo : lo + len(part)]):
            return False
    return True


class RowFile:
    """The rows of a 2-d `.npy` matrix, read from disk when asked for (positional reads, safe across threads).

    Holds an open file and the header's geometry; the file object closes itself when the last reference to
    a version's vectors goes, so a swapped-out version leaves no descriptor behind."""

    def __init__(self, path: Path) -> None:
        header = np.load(path, mmap_mode="r")  # the header parsed; the mapping is dropped at once
        if header.ndim != 2 or not header.flags.c_contiguous:
            raise ValueError(f"{path} is not a row-major matrix")
        self.shape: tuple[int, int] = (int(header.shape[0]), int(header.shape[1]))
        self.dtype = np.dtype(header.dtype)
        self._offset = int(header.offset)
        del header
        self._row_bytes = self.shape[1] * self.dtype.itemsize
        self._file = open(path, "rb", buffering=0)  # noqa: SIM115 - lives as long as this object

    def take(self, rows: np.ndarray) -> np.ndarray:
        """The given rows, in the order given (consecutive rows read together)."""
        out = np.empty((len(rows), self.shape[1]), dtype=self.dtype)
        if not len(rows):
            return out
        view, size, fd = out.data.cast("B"), self._row_bytes, self._file.fileno()
        at = np.asarray(rows, dtype=np.int64)
        if at.min() < 0 or at.max() >= self.shape[0]:
            raise IndexError("row out of range")
        # Runs of consecutive rows: one read each (offsets worked out in numpy, the loop on ints).
        breaks = np.flatnonzero(np.diff(at) != 1) + 1
        first = np.r_[0, breaks]
        counts = (np.r_[breaks, len(at)] - first).tolist()
        offsets = (self._offset + at[first] * size).tolist()
        for start, count, offset in zip(first.tolist(), counts, offsets, strict=True):
            want = count * size
            if os.preadv(fd, [view[start * size : start * size + want]], offset) != want:
                raise OSError(f"short read from {self._file.name}")
        return out

    def all(self) -> np.ndarray:
        return self.take(np.arange(self.shape[0]))


@dataclass(slots=True)
class QuantizedVectors:
    matrix: RowFile | lance_rows.LanceRows  # rows x dim float32 unit vectors, on disk
    codes: Any  # faiss.IndexScalarQuantizer
    columns: pa.Table  # FILTER_COLUMNS, memory-mapped
    keys: KeyIndex
    refine: np.ndarray | None = None  # REFINE, memory-mapped: rows x dim uint8; None where there is none
    refine_width: np.ndarray | None = None  # each dimension's width in REFINE_RANGE (float32)
    # The filter columns encoded on the first filtered search: a cache of `columns`, never a constructor's.
    _filter_columns: ChunkColumns | None = field(default=None, init=False, repr=False, compare=False)
    _encoding: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False, compare=False)

    @classmethod
    def open(
        cls, folder: Path, dim: int, maps: Mappings | None = None, segment: str | None = None
    ) -> QuantizedVectors:
        """The codes read into memory, the filter columns and keys mapped (through `maps` when given),
        the float32 rows read when rescored. `segment`: a write's segment's files (`vector_segments`)."""
        import faiss

        maps = maps or Mappings()
        matrix = open_rows(folder, dim, segment)
        codes = faiss.read_index(str(folder / file_name(CODES, segment)))
        columns = maps.arrow(folder / file_name(COLUMNS, segment))
        keys = KeyIndex.load(folder / file_name(KEYS, segment), maps)
        n = matrix.shape[0]
        if matrix.shape[1] != dim or codes.d != dim:
            raise ValueError(f"serving vectors of {folder} are not {dim}-d")
        if not (codes.ntotal == columns.num_rows == len(keys) == n):
            raise ValueError(f"serving files of {folder} disagree on the number of rows")
        refine = width = None
        if segment is None and all((folder / name).is_file() for name in REFINE_FILES):
            refine = maps.npy(folder / REFINE)
            ranges = np.load(folder / REFINE_RANGE)
            if refine.shape != (n, dim) or refine.dtype != np.uint8 or ranges.shape != (2, dim):
                raise ValueError(f"refine codes of {folder} are not {n} x {dim} bytes with their ranges")
            width = np.asarray(ranges[1], dtype=np.float32)
        return cls(matrix, codes, columns, keys, refine, width)

    @property
    def rows(self) -> int:
        return int(self.matrix.shape[0])

    @property
    def kind(self) -> str:
        """`ivf-pq4-rescored` or `ivf-sq8-rescored` when the codes are an inverted file, else `sq8-rescored`
        (a flat scan)."""
        return _kind_of(self.codes)

    def chunk_ids(self, rows: np.ndarray) -> list[str]:
        """The chunk ids of several rows in one read."""
        return [str(i) for i in take_pylist(self.columns.column("chunk_id"), rows)]

    def row_of(self, chunk_id: str) -> int | None:
        return self.keys.find(chunk_id, self.columns.column("chunk_id"))

    def filter_mask(self, filters: ChunkFilters) -> np.ndarray:
        """Which rows pass `filters` (`filters.filter_mask`'s predicate): over the columns encoded once, on
        the first filtered search (1M rows: ~0.1 s once, then ~1 ms a file filter and ~0.5 ms a type filter
        against ~8 and 50-165 ms comparing strings; benchmarks/docs/scale.md)."""
        columns = self._filter_columns
        if columns is None:
            with self._encoding:
                if self._filter_columns is None:
                    table = self.columns
                    self._filter_columns = ChunkColumns.from_arrow(
                        table.column("file_id"), table.column("entity_types"), table.column("date")
                    )
                columns = self._filter_columns
        return columns.mask(filters, self._rows_of)

    def _rows_of(self, chunk_ids: list[str]) -> np.ndarray:
        """The rows of `chunk_ids`, by the predicate itself (`filters.filter_mask`)."""
        return np.flatnonzero(filter_mask(self.columns, ChunkFilters(chunk_ids=chunk_ids)))

    def search(
        self, unit: np.ndarray, limit: int, mask: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray, int]:
        """Best `limit` rows (best first, ties in row order), their exact cosine similarities, and how many
        rows were eligible. `mask`: the rows that may be returned (a filter), None for all."""
        n = self.rows
        if mask is not None:
            eligible_rows = np.flatnonzero(mask)
            eligible = len(eligible_rows)
        else:
            eligible_rows, eligible = None, n
        if eligible == 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32), 0
        kind = self.kind
        want = rescored(kind, limit)
        # Few enough rows pass the filter: all of them are candidates (ranked by the refine codes where the
        # version has them: ~0.23 us a row at 1M, against ~10 ms for a scan of every list).
        exact_max = 0 if kind == IVF_KIND and self.refine is None else EXACT_FILTERED_MAX
        if eligible_rows is not None and (eligible <= exact_max or want * 2 >= eligible):
            candidates = eligible_rows
        elif eligible_rows is None and want * 2 >= n:
            candidates = np.arange(n)
        else:
            candidates = self._scan(unit, want, mask, eligible / n)
        keep = rescored(FLAT_KIND, limit)
        if self.refine is not None and len(candidates) > keep:
            candidates = self._refined(candidates, unit, keep)
        sims = self._exact(candidates, unit)
        k = min(max(1, limit), len(sims))
        top = np.argpartition(-sims, k - 1)[:k] if k < len(sims) else np.arange(len(sims))
        top = top[np.lexsort((candidates[top], -sims[top]))]
        return candidates[top], sims[top], eligible

    def _scan(self, unit: np.ndarray, want: int, mask: np.ndarray | None, share: float) -> np.ndarray:
        """The `want` rows whose codes score best (sorted by row); `share`: of the rows `mask` passes."""
        import faiss

        query = np.ascontiguousarray(unit.reshape(1, -1), dtype=np.float32)
        nlist = getattr(self.codes, "nlist", None)
        params: Any = faiss.SearchParameters() if nlist is None else faiss.SearchParametersIVF()
        if nlist is not None:
            params.nprobe = ivf_probes(int(nlist), share)
        if mask is not None:
            bitmap = np.packbits(mask, bitorder="little")  # alive until the search returns
            params.sel = faiss.IDSelectorBitmap(len(mask), faiss.swig_ptr(bitmap))
        _scores, found = self.codes.search(query, want, params=params)
        rows = found[0]
        return np.sort(rows[rows >= 0]).astype(np.int64)

    def _refined(self, rows: np.ndarray, unit: np.ndarray, keep: int) -> np.ndarray:
        """The `keep` of `rows` (sorted) whose refine codes score best: a code's decoded value is its
        dimension's low end (the same for every row) plus the code times the dimension's width / 255, so
        codes @ (unit * width) ranks as the decoded rows' similarities do."""
        assert self.refine is not None and self.refine_width is not None
        weights = unit.astype(np.float32) * self.refine_width
        approx = np.empty(len(rows), dtype=np.float32)
        for lo in range(0, len(rows), REFINE_BLOCK):  # bounded transient memory (a page deeper than the scan)
            approx[lo : lo + REFINE_BLOCK] = (
                self.refine[rows[lo : lo + REFINE_BLOCK]].astype(np.float32) @ weights
            )
        best = np.argpartition(-approx, keep - 1)[:keep]
        return np.sort(rows[best])

    def _exact(self, rows: np.ndarray, unit: np.ndarray) -> np.ndarray:
        out = np.empty(len(rows), dtype=np.float32)
        # Sorted rows, in blocks: reads the file in order, bounded transient memory.
        for lo in range(0, len(rows), BLOCK):
            part = rows[lo : lo + BLOCK]
            out[lo : lo + len(part)] = self.matrix.take(part) @ unit
        return out

    def vector(self, chunk_id: str) -> np.ndarray | None:
        row = self.row_of(chunk_id)
        return None if row is None else self.matrix.take(np.array([row]))[0]
