"""The order of a graph's chunk nodes: node len(entities) + j is the chunk at row j of the chunk table (the
service maps it; `ListOrder` is the same order from a list of ids, for a build)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np
import pyarrow as pa


class ChunkOrder(Protocol):
    """The graph's chunk nodes in order (the chunk table, mapped, in the service; `ListOrder` for a list)."""

    def __len__(self) -> int: ...

    @property
    def row_count(self) -> int:
        """Rows, deleted ones included: what node numbers and row numbers count."""
        ...

    def id_at(self, row: int) -> str: ...

    def ids_at(self, rows: Sequence[int]) -> list[str]: ...

    def row(self, key: str) -> int | None: ...

    def rows(self, keys: Sequence[str]) -> np.ndarray: ...


class ListOrder:
    """A `ChunkOrder` over a list of chunk ids."""

    def __init__(self, ids: Sequence[str]) -> None:
        self._ids = list(ids)
        self._row = {c: i for i, c in enumerate(self._ids)}

    def __len__(self) -> int:
        return len(self._ids)

    @property
    def row_count(self) -> int:
        return len(self._ids)

    def id_at(self, row: int) -> str:
        return self._ids[row]

    def ids_at(self, rows: Sequence[int]) -> list[str]:
        return [self._ids[int(r)] for r in rows]

    def row(self, key: str) -> int | None:
        return self._row.get(key)

    def rows(self, keys: Sequence[str]) -> np.ndarray:
        return np.array([self._row.get(k, -1) for k in keys], dtype=np.int64)


def table_rows(graph: ChunkOrder, table: ChunkOrder) -> np.ndarray:
    """The chunk table's row of each of the graph's chunk nodes, -1 for a chunk no longer in the table.

    A graph built for an earlier version of the table (writes since leave it behind until a merge) keeps
    its own order. Two mapped orders are joined on their ids' 64-bit hashes, vectorised (a million ids in
    ~0.1 s; two different chunk ids sharing a hash, ~N^2 / 2^65, is not guarded); others by their ids.
    """
    own, other = getattr(graph, "key_index", None), getattr(table, "key_index", None)
    if own is None or other is None:
        return np.asarray(table.rows(graph.ids_at(range(len(graph)))), dtype=np.int64)
    out = np.full(len(graph), -1, dtype=np.int64)
    if not len(own.hashes) or not len(other.hashes):
        return out
    at = np.minimum(np.searchsorted(other.hashes, own.hashes), len(other.hashes) - 1)
    found = np.asarray(other.hashes[at] == own.hashes)
    out[np.asarray(own.rows)[found]] = np.asarray(other.rows)[at[found]]
    return out


def list_rows(column: pa.ChunkedArray, order: ChunkOrder) -> tuple[np.ndarray, np.ndarray]:
    """A list column of chunk ids dictionary-encoded (`graph_arrays.shared_strings`), as each row's length
    and each value's chunk row in `order` (-1: not there): each distinct id looked up once, not once a
    value (a million-chunk graph's entities list ~30M chunk ids, of a million distinct ones)."""
    lists = column.combine_chunks()
    lengths = lists.value_lengths().fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
    values = lists.flatten()
    if not pa.types.is_dictionary(values.type):
        return lengths, order.rows(values.to_pylist())
    rows = order.rows(values.dictionary.to_pylist())
    return lengths, rows[values.indices.to_numpy(zero_copy_only=False).astype(np.int64)]
