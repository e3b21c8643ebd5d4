"""Writing a version's documents or chunks table as a base file plus appended segments (`tables`).

A write that only adds rows appends them as one segment file and extends the id lookups (`keys.KeyIndex`)
by insertion: its cost follows the rows it adds. A write that removes rows writes the table anew in Arrow
(the kept rows filtered out of the mapped files in one pass, no row turned into a Python object) and
renumbers the lookups. Segments are folded size-tiered, like tantivy's and Lucene's merge policies: past
`MAX_FILES` files, the two neighbouring files with the fewest rows together are folded into one until
`FOLD_TO` are left, so every row is rewritten a logarithmic number of times and the row order never
changes (the lookups stay valid as they are).

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

from hybridrag.indexing.stores.keys import KeyIndex
from hybridrag.indexing.stores.mapped import keys_path
from hybridrag.indexing.stores.tables import (
    read_version_table,
    segment_path,
    table_files,
    table_segments,
    write_arrow,
)

MAX_FILES = 12
FOLD_TO = 8


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
    key_columns: Sequence[str],
    remove_column: str,
    remove_ids: Sequence[str],
) -> None:
    """Table `name` of the staging copy `version` made into: its rows whose `remove_column` is not in
    `remove_ids`, then `added` (the rows a full rewrite would give, in the same order). `segment`: the
    name of the new segment (the version being written); `key_columns`: the columns with a lookup."""
    table = read_version_table(version, name, memory_map=True)
    keys = {c: _lookup(version, name, c, table) for c in key_columns}
    keep: np.ndarray | None = None
    if remove_ids and table.num_rows:
        held = pc.is_in(table.column(remove_column), value_set=pa.array(list(remove_ids), pa.string()))
        gone = np.asarray(held.to_numpy(zero_copy_only=False), dtype=bool)
        if gone.any():
            keep = ~gone
    if keep is not None:
        kept = table.filter(pa.array(keep))
        write_arrow(version / name, pa.concat_tables([kept, added]))
        for path in table_segments(version, name):
            path.unlink()
        for column, lookup in keys.items():
            lookup.kept(keep).appended(_ids(added, column)).save(keys_path(version / name, column))
        return
    if not added.num_rows:
        return
    write_arrow(segment_path(version, name, segment), added)
    for column, lookup in keys.items():
        lookup.appended(_ids(added, column)).save(keys_path(version / name, column))
    fold(version, name)


def fold(version: Path, name: str, max_files: int = MAX_FILES, fold_to: int = FOLD_TO) -> int:
    """Fold neighbouring files of table `name` (size-tiered, see the module's docstring) once there are more
    than `max_files`; returns how many folds were made. Rows keep their order, so lookups are unchanged."""
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
    """Table `name` of `version` (a merge's private copy) as one file, its segments folded in; returns
    whether there were any. The rows keep their order, so lookups are unchanged."""
    parts = table_segments(version, name)
    if not parts:
        return False
    write_arrow(version / name, read_version_table(version, name, memory_map=True))
    for path in parts:
        path.unlink()
    return True


def adopt_compacted(source: Path, target: Path, name: str) -> None:
    """Table `name` of `target` replaced by `source`'s compacted file (the same rows: a merge's copy of
    the version `target` was cloned from)."""
    for path in table_segments(target, name):
        path.unlink()
    os.replace(source / name, target / name)


def _rows(path: Path) -> int:
    return int(feather.read_table(path, memory_map=True).num_rows)


def _ids(table: pa.Table, column: str) -> list[str]:
    return [str(v) for v in table.column(column).to_pylist()]


def _lookup(version: Path, name: str, column: str, table: pa.Table) -> KeyIndex:
    """The stored lookup of `column`, read into memory (it is about to be replaced); built from the column
    when missing or stale (a version written before lookups existed)."""
    path = keys_path(version / name, column)
    if path.is_file():
        loaded = KeyIndex.load(path)
        if len(loaded) == table.num_rows:
            return KeyIndex(np.array(loaded.hashes), np.array(loaded.rows))
    return KeyIndex.build(_ids(table, column))
