"""Writing a version's documents or chunks table as a base file plus appended segments (`tables`).

A write that adds rows appends them as one segment file and extends the id lookups (`keys.KeyIndex`) by
insertion; a write that removes rows marks them deleted (`tables.deleted_path`: their row numbers, read by
every reader of the table) and drops their lookup entries. No row moves, so both cost what the write
changes. Past `DEAD_SHARE` of the rows deleted, the table is written anew without them (in Arrow, no row
turned into a Python object) and the lookups renumbered; a merge compacts the table the same way. Segments
are folded size-tiered, like tantivy's and Lucene's merge policies: past `MAX_FILES` files, the two
neighbouring files with the fewest rows together are folded into one until `FOLD_TO` are left, so every row
is rewritten a logarithmic number of times and the row order never changes (lookups and tombstones stay
valid as they are).

Every file is written under a temporary name and renamed: a staging copy shares its files with the
version it was cloned from through hard links, and that version is being served.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.feather as feather

from hybridrag.indexing.stores.keys import KeyIndex, write_npy
from hybridrag.indexing.stores.mapped import keys_path
from hybridrag.indexing.stores.tables import (
    KEY_COLUMNS,
    dead_rows,
    deleted_path,
    live_mask,
    read_version_table,
    segment_path,
    table_files,
    table_segments,
    write_arrow,
)

MAX_FILES = 12
FOLD_TO = 8
#: Past this share of a table's rows deleted, a write writes it anew without them (disk and scans bounded).
DEAD_SHARE = 0.1


def appendable(version: Path, name: str, schema: pa.Schema) -> bool:
    """Whether rows of `schema` can be appended to table `name` of `version` (a table written by an older
    release, with other columns, is written anew instead)."""
    path = version / name
    if not path.is_file():
        return False
    with pa.memory_map(str(path)) as source:
        return bool(pa.ipc.open_file(source).schema.equals(schema))


def update_table(
    version: Path,
    name: str,
    added: pa.Table,
    segment: str,
    remove_column: str,
    remove_ids: Sequence[str],
) -> None:
    """Table `name` of the staging copy `version` made into: its rows whose `remove_column` is not in
    `remove_ids`, then `added` (the rows a full rewrite would give, in the same order). `segment`: the
    name of the new segment (the version being written)."""
    table = read_version_table(version, name, memory_map=True, live=False)
    dead = dead_rows(version, name)
    keys = {c: _lookup(version, name, c, table, dead) for c in KEY_COLUMNS[name]}
    gone = _rows_holding(table, keys.get(remove_column), remove_column, remove_ids, dead)
    if not len(gone) and not added.num_rows:
        return
    dead = np.union1d(dead, gone)
    if len(gone) and len(dead) > DEAD_SHARE * table.num_rows:
        keep = live_mask(table.num_rows, dead)
        kept = table.filter(pa.array(keep))
        write_arrow(version / name, pa.concat_tables([kept, added]))
        for path in table_segments(version, name):
            path.unlink()
        deleted_path(version, name).unlink(missing_ok=True)
        for column, lookup in keys.items():
            lookup = lookup.kept(keep).appended(_ids(added, column), start=kept.num_rows)
            lookup.save(keys_path(version / name, column))
        return
    if len(gone):
        write_npy(deleted_path(version, name), dead)
    if added.num_rows:
        write_arrow(segment_path(version, name, segment), added)
    for column, lookup in keys.items():
        lookup = lookup.dropped(gone).appended(_ids(added, column), start=table.num_rows)
        lookup.save(keys_path(version / name, column))
    fold(version, name)


def _rows_holding(
    table: pa.Table, lookup: KeyIndex | None, column: str, values: Sequence[str], dead: np.ndarray
) -> np.ndarray:
    """The live rows whose `column` is one of `values` (looked up when the column has a lookup, which holds
    no deleted row; else a scan), sorted."""
    if not values or not table.num_rows:
        return np.zeros(0, dtype=np.int64)
    if lookup is not None:
        found = lookup.rows_of_many(list(values))
        rows = np.unique(np.concatenate(found)) if found else np.zeros(0, dtype=np.int64)
        if not len(rows):
            return rows.astype(np.int64)
        held = table.column(column).take(pa.array(rows))
        wanted = pc.is_in(held, value_set=pa.array(list(values), pa.string()))
        return rows[np.asarray(wanted.to_numpy(zero_copy_only=False), dtype=bool)].astype(np.int64)
    held = pc.is_in(table.column(column), value_set=pa.array(list(values), pa.string()))
    rows = np.flatnonzero(np.asarray(held.to_numpy(zero_copy_only=False), dtype=bool))
    return np.setdiff1d(rows, dead).astype(np.int64)


def fold(version: Path, name: str, max_files: int | None = None, fold_to: int | None = None) -> int:
    """Fold neighbouring files of table `name` (size-tiered, see the module's docstring) once there are more
    than `max_files`; returns how many folds were made. Rows keep their order, so lookups are unchanged."""
    max_files = MAX_FILES if max_files is None else max_files
    fold_to = FOLD_TO if fold_to is None else fold_to
    files = table_files(version, name)
    if len(files) <= max_files:
        return 0
    sizes = [_rows(f) for f in files]
    folds = 0
    while len(files) > fold_to:
        pair = int(np.argmin([a + b for a, b in itertools.pairwise(sizes)]))
        first, second = files[pair], files[pair + 1]
        joined = pa.concat_tables(
            [feather.read_table(first, memory_map=True), feather.read_table(second, memory_map=True)]
        )
        write_arrow(first, joined)
        second.unlink()
        sizes[pair : pair + 2] = [sizes[pair] + sizes[pair + 1]]
        del files[pair + 1]
        folds += 1
    return folds


def compact(version: Path, name: str) -> bool:
    """Table `name` of `version` (a merge's private copy) as one file, its segments folded in and its
    deleted rows dropped (its lookups renumbered); returns whether there was anything to
    do. The live rows keep their order."""
    parts = table_segments(version, name)
    dead = dead_rows(version, name)
    if not parts and not len(dead):
        return False
    table = read_version_table(version, name, memory_map=True, live=False)
    if len(dead):
        keep = live_mask(table.num_rows, dead)
        for column in KEY_COLUMNS[name]:
            lookup = _lookup(version, name, column, table, dead)
            lookup.kept(keep).save(keys_path(version / name, column))
        table = table.filter(pa.array(keep))
    write_arrow(version / name, table)
    for path in parts:
        path.unlink()
    deleted_path(version, name).unlink(missing_ok=True)
    return True


def adopt_compacted(source: Path, target: Path, name: str) -> None:
    """Table `name` of `target` replaced by `source`'s compacted file and lookups (the same live rows: a
    merge's copy of the version `target` was cloned from)."""
    for path in table_segments(target, name):
        path.unlink()
    deleted_path(target, name).unlink(missing_ok=True)
    for column in KEY_COLUMNS[name]:
        os.replace(keys_path(source / name, column), keys_path(target / name, column))
    os.replace(source / name, target / name)


def _rows(path: Path) -> int:
    return int(feather.read_table(path, memory_map=True).num_rows)


def _ids(table: pa.Table, column: str) -> list[str]:
    return [str(v) for v in table.column(column).to_pylist()]


def _lookup(version: Path, name: str, column: str, table: pa.Table, dead: np.ndarray) -> KeyIndex:
    """The stored lookup of `column` (no entry for a `dead` row of `table`, which has them all), read into
    memory (it is about to be replaced); built from the column when missing or stale (a version written
    before lookups existed)."""
    path = keys_path(version / name, column)
    if path.is_file():
        loaded = KeyIndex.load(path)
        if len(loaded) == table.num_rows - len(dead):
            return KeyIndex(np.array(loaded.hashes), np.array(loaded.rows))
    return KeyIndex.build(_ids(table, column)).dropped(dead)
