"""Row gathers of CSR matrices without scipy's fancy indexing, and the integer type of their rows.

The graph walk pushes along the rows of a few hundred nodes per round. `m[rows]` builds a whole matrix
(data, indices and indptr, validated) to read part of it; a gather of the positions reads only what is
needed, in the same order (measured: benchmarks/docs/speed.md, "The index on disk").
"""

from __future__ import annotations

import numpy as np


def index_type(bound: int) -> type[np.signedinteger]:
    """int32 for row or column numbers below `bound` where they fit (the type scipy gives such a sparse
    matrix's indices, and half the bytes on disk and in the page cache), else int64."""
    return np.int32 if bound < 2**31 - 1 else np.int64


def row_lengths(indptr: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Each given row's number of entries (a node's degree in an adjacency matrix)."""
    rows = np.asarray(rows, dtype=np.int64)
    return np.asarray(indptr[rows + 1], dtype=np.int64) - np.asarray(indptr[rows], dtype=np.int64)


def row_positions(indptr: np.ndarray, rows: np.ndarray, most: np.ndarray | None = None) -> np.ndarray:
    """Positions in `indices` / `data` of the given rows' entries, rows in the order given; with `most`, only
    each row's first `most[i]` entries (a prefix: the graph walk's fanout over rows stored heaviest first)."""
    rows = np.asarray(rows, dtype=np.int64)
    starts = np.asarray(indptr[rows], dtype=np.int64)
    counts = row_lengths(indptr, rows)
    if most is not None:
        counts = np.minimum(counts, most)
    total = int(counts.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    # Each entry's position: its row's start plus its offset within the row.
    firsts = np.cumsum(counts) - counts
    return np.arange(total, dtype=np.int64) + np.repeat(starts - firsts, counts)


def distinct_by_slot(values: np.ndarray, slot: np.ndarray) -> np.ndarray:
    """`values` (non-negative ints below `len(slot)`) each once, in no set order, without a sort: every
    value's position is written into `slot`, and a value is kept where it reads back its own. Whichever
    write of a repeated value lands, exactly one of its positions reads it back. `slot`: int32 scratch of
    any content (what it held is overwritten before it is read). A sort of the walk's targets was most of
    its time (benchmarks/docs/scale.md, "The walk's node ids without a sort")."""
    if len(values) < 2:
        return values
    positions = np.arange(len(values), dtype=slot.dtype)
    slot[values] = positions
    return values[slot[values] == positions]
