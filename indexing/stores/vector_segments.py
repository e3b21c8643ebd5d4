"""The vector serving files as a base plus the segments later writes added, less the rows they removed.

A write that adds passages writes their serving files as a segment beside the base's (`quantized`, with
the segment's name, the version that wrote it: flat 8-bit codes, float32 rows, filter columns, key lookup),
and a write that removes passages lists their rows in `serving-deleted.npy` (tombstones: rows numbered
across the base, then the segments in order). Neither reads or rewrites the base, so a write costs what it
writes. A search runs on each part (the base's inverted file or flat codes, each segment's flat codes, every
candidate rescored exactly) with the tombstones ruled out like a filter, and the parts' best are merged by
their exact similarity, ties in row order.

Bounded: once segments are more than `SEGMENTS_MAX`, they are folded into one (their live rows; the base is
not touched); once the segments hold more than `segment_rows_max(base rows)` rows, or tombstones more than
`DEAD_SHARE` of the rows, the serving files are written anew from the vector table (`write_serving_files`,
reusing the base's trained lists), which also drops every segment and tombstone.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.feather as feather

from hybridrag.indexing.stores import lance_rows
from hybridrag.indexing.stores.filters import ChunkFilters
from hybridrag.indexing.stores.keys import KeyIndex, write_npy
from hybridrag.indexing.stores.mapped import take_pylist
from hybridrag.indexing.stores.memory_maps import Mappings
from hybridrag.indexing.stores.quantized import (
    COLUMNS,
    FILES,
    FILTER_COLUMNS,
    KEYS,
    REFINE_FILES,
    VECTORS,
    QuantizedVectors,
    RowFile,
    codes_kind,
    file_name,
    open_rows,
    present,
    write_serving_files,
)

DELETED = "serving-deleted.npy"
SEGMENTS_MAX = 4
SEGMENT_ROWS_FLOOR = 2_000
SEGMENT_ROWS_CAP = 50_000
SEGMENT_SHARE = 0.1
DEAD_SHARE = 0.1


def segment_rows_max(base_rows: int) -> int:
    """Rows the segments may hold before the serving files are written anew: a tenth of the base, at least
    `SEGMENT_ROWS_FLOOR` and at most `SEGMENT_ROWS_CAP` (their flat codes are scanned whole each search:
    50k rows of 384 bytes, ~2 ms)."""
    return min(SEGMENT_ROWS_CAP, max(SEGMENT_ROWS_FLOOR, int(SEGMENT_SHARE * base_rows)))


def segment_names(folder: Path) -> list[str]:
    """The segments in `folder`, oldest first (complete ones: the float32 rows are written last)."""
    stem, ext = VECTORS.split(".", 1)
    names = [p.name[len(stem) + 1 : -len(ext) - 1] for p in folder.glob(f"{stem}.*.{ext}")]
    return sorted(n for n in names if n)


def _dead_rows(folder: Path) -> np.ndarray:
    path = folder / DELETED
    return np.load(path) if path.is_file() else np.zeros(0, dtype=np.int64)


def _drop_segments(folder: Path, names: Sequence[str]) -> None:
    for name in names:
        for base in FILES:
            (folder / file_name(base, name)).unlink(missing_ok=True)


@dataclass(slots=True)
class ServingVectors:
    """The base's and each segment's `QuantizedVectors` read as one: rows numbered across them, the
    tombstoned ones never returned. Answers what `QuantizedVectors` answers."""

    parts: list[QuantizedVectors]
    offsets: np.ndarray  # first row of each part
    alive: np.ndarray | None  # False for a tombstoned row; None when there is none
    columns: pa.Table  # the parts' filter columns, concatenated without a copy

    @classmethod
    def open(cls, folder: Path, dim: int, maps: Mappings | None = None) -> QuantizedVectors | ServingVectors:
        """The serving files of `folder`: the base alone (a `QuantizedVectors`) when writes left nothing."""
        maps = maps or Mappings()
        names = segment_names(folder)
        dead = _dead_rows(folder)
        base = QuantizedVectors.open(folder, dim, maps)
        if not names and not len(dead):
            return base
        parts = [base, *(QuantizedVectors.open(folder, dim, maps, segment=n) for n in names)]
        sizes = np.array([p.rows for p in parts], dtype=np.int64)
        offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]])
        alive = None
        if len(dead):
            alive = np.ones(int(sizes.sum()), dtype=bool)
            alive[dead] = False
        columns = pa.concat_tables([p.columns for p in parts])
        return cls(parts, offsets, alive, columns)

    @property
    def rows(self) -> int:
        """Live rows (the vector table's count)."""
        total = int(self.columns.num_rows)
        return total if self.alive is None else int(self.alive.sum())

    @property
    def kind(self) -> str:
        return self.parts[0].kind

    def chunk_ids(self, rows: np.ndarray) -> list[str]:
        return [str(i) for i in take_pylist(self.columns.column("chunk_id"), rows)]

    def filter_mask(self, filters: ChunkFilters) -> np.ndarray:
        """Which rows (of every part, in order) pass `filters`."""
        return np.concatenate([part.filter_mask(filters) for part in self.parts])

    def search(
        self, unit: np.ndarray, limit: int, mask: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray, int]:
        """`QuantizedVectors.search` over every part, tombstones ruled out: each part's best `limit`, merged."""
        if self.alive is not None:
            mask = self.alive if mask is None else mask & self.alive
        found, sims, eligible = [], [], 0
        for part, lo in zip(self.parts, self.offsets.tolist(), strict=True):
            part_mask = None if mask is None else mask[lo : lo + part.rows]
            if part_mask is not None and part_mask.all():
                part_mask = None  # no filtered scan where nothing is ruled out
            rows, part_sims, part_eligible = part.search(unit, limit, part_mask)
            found.append(rows + lo)
            sims.append(part_sims)
            eligible += part_eligible
        rows, similarities = np.concatenate(found), np.concatenate(sims)
        top = np.lexsort((rows, -similarities))[: max(1, limit)]
        return rows[top], similarities[top], eligible

    def vector(self, chunk_id: str) -> np.ndarray | None:
        """The newest live row of `chunk_id` (a replaced passage's old row is tombstoned)."""
        for part, lo in reversed(list(zip(self.parts, self.offsets.tolist(), strict=True))):
            row = part.row_of(chunk_id)
            if row is not None and (self.alive is None or self.alive[lo + row]):
                return part.vector(chunk_id)
        return None


def update(
    folder: Path,
    table: Any,
    dim: int,
    segment: str,
    added: pa.Table | None,
    removed: Sequence[str],
) -> str:
    """Bring the serving files of `folder` (a staging copy's) up to the vector table `table` after a write
    that appended the rows `added` (chunk_id, the filter columns, vector) and deleted the passages whose
    chunk ids are `removed`; returns the codes' kind. Written as a segment and tombstones when within the
    bounds of the module's docstring, else anew."""
    if not present(folder) or (lance_rows.present(folder) and not lance_rows.pages_readable(folder)):
        return rewrite(folder, table, dim)
    names = segment_names(folder)
    # Their lookups, columns and float rows only: the base's codes (hundreds of MB at a million rows)
    # are neither read nor written.
    parts = [_Rows.open(folder, dim, None), *(_Rows.open(folder, dim, n) for n in names)]
    sizes = [p.rows for p in parts]
    offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
    dead = set(_dead_rows(folder).tolist())
    for chunk_id in removed:
        for part, lo in zip(parts, offsets.tolist(), strict=True):
            row = part.row_of(chunk_id)
            if row is not None and lo + row not in dead:
                dead.add(lo + row)
    new_rows = 0 if added is None else added.num_rows
    segment_rows = sum(sizes[1:]) + new_rows
    total = sum(sizes) + new_rows
    if segment_rows > segment_rows_max(sizes[0]) or len(dead) > DEAD_SHARE * total:
        return rewrite(folder, table, dim)
    if len(names) + (1 if new_rows else 0) > SEGMENTS_MAX:
        # The segments folded into one, named for this write: their live rows, then the new ones.
        kept = [_live_table(p, lo, dead) for p, lo in zip(parts[1:], offsets[1:].tolist(), strict=True)]
        tables = [*kept, *([_serving_table(added)] if new_rows else [])]
        folded = pa.concat_tables([t.cast(tables[-1].schema) for t in tables])  # nullability differs
        write_serving_files(folder, folded, dim, segment=segment)
        _drop_segments(folder, names)
        dead = {r for r in dead if r < sizes[0]}  # a segment's dead rows went with the fold
    elif new_rows:
        assert added is not None
        write_serving_files(folder, added, dim, segment=segment)
    _write_dead(folder, dead)
    return codes_kind(folder)  # the base's, as its last rewrite wrote it


def rewrite(folder: Path, table: Any, dim: int) -> str:
    """The serving files written anew from the whole vector table; no segment or tombstone is left."""
    names = segment_names(folder)
    kind = write_serving_files(folder, table, dim)
    _drop_segments(folder, names)
    (folder / DELETED).unlink(missing_ok=True)
    return kind


def compact(folder: Path, table: Any, dim: int) -> bool:
    """The serving files of `folder` (a merge's private copy) written anew when writes left segments or
    tombstones, or when the table's compaction moved the rows the base reads in place; returns whether
    they were."""
    moved = lance_rows.present(folder) and lance_rows.read_pages(folder) != lance_rows.table_pages(
        folder, table, dim
    )
    if not segment_names(folder) and not (folder / DELETED).is_file() and not moved:
        return False
    rewrite(folder, table, dim)
    return True


def adopt_compacted(source: Path, target: Path) -> None:
    """The serving files of `target` replaced by `source`'s compacted ones (the same rows: a merge's copy
    of the version `target` was cloned from)."""
    _drop_segments(target, segment_names(target))
    (target / DELETED).unlink(missing_ok=True)
    (target / VECTORS).unlink(missing_ok=True)
    lance_rows.remove(target)
    for name in REFINE_FILES:
        (target / name).unlink(missing_ok=True)
    for name in (*FILES, *REFINE_FILES, lance_rows.PAGES, lance_rows.NORMS):
        if (source / name).is_file():
            os.replace(source / name, target / name)


def _write_dead(folder: Path, dead: set[int]) -> None:
    path = folder / DELETED
    if not dead:
        path.unlink(missing_ok=True)
        return
    write_npy(path, np.array(sorted(dead), dtype=np.int64))


def _serving_table(table: pa.Table | None) -> pa.Table:
    """A write's added rows as a fold takes them: float32 vectors (widening a float16 table's is exact), as
    the kept segments' rows are, which a cast to float16 would round a second time."""
    assert table is not None
    vectors = table.column("vector")
    wide = pa.list_(pa.float32(), vectors.type.list_size)
    return table.select(list(FILTER_COLUMNS)).append_column("vector", vectors.cast(wide))


@dataclass(frozen=True, slots=True)
class _Rows:
    """A part's rows without its codes: what a write needs to find and copy rows."""

    matrix: RowFile | lance_rows.LanceRows
    columns: pa.Table
    keys: KeyIndex

    @classmethod
    def open(cls, folder: Path, dim: int, segment: str | None) -> _Rows:
        columns = feather.read_table(folder / file_name(COLUMNS, segment), memory_map=True)
        keys = KeyIndex.load(folder / file_name(KEYS, segment))
        return cls(open_rows(folder, dim, segment), columns, keys)

    @property
    def rows(self) -> int:
        return int(self.matrix.shape[0])

    def row_of(self, chunk_id: str) -> int | None:
        return self.keys.find(chunk_id, self.columns.column("chunk_id"))


def _live_table(part: _Rows, lo: int, dead: set[int]) -> pa.Table:
    """A segment's live rows as a table of the filter columns and the vector."""
    keep = np.ones(part.rows, dtype=bool)
    gone = np.array(sorted(dead), dtype=np.int64) - lo
    keep[gone[(gone >= 0) & (gone < part.rows)]] = False
    rows = np.flatnonzero(keep)
    matrix = part.matrix.take(rows)
    columns = part.columns.take(pa.array(rows, pa.int64()))
    flat = pa.array(np.ascontiguousarray(matrix, dtype=np.float32).reshape(-1))
    vectors = pa.FixedSizeListArray.from_arrays(flat, matrix.shape[1])
    return columns.append_column("vector", vectors)
