"""Row gathers of CSR matrices without scipy's fancy indexing.

The graph walk's reach reads the neighbours of a few hundred nodes per hop. `m[rows].indices` builds a
whole matrix (data and indptr too, validated) to read one array of it; a gather of the positions reads only
the indices, in the same order (measured: benchmarks/notes.md, "The index on disk").
"""

from __future__ import annotations

import numpy as np
from scipy import sparse


def row_lengths(indptr: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Each given row's number of entries (a node's degree in an adjacency matrix)."""
    rows = np.asarray(rows, dtype=np.int64)
    return np.asarray(indptr[rows + 1], dtype=np.int64) - np.asarray(indptr[rows], dtype=np.int64)


def row_positions(indptr: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Positions in `indices` / `data` of the given rows' entries, rows in the order given."""
    rows = np.asarray(rows, dtype=np.int64)
    starts = np.asarray(indptr[rows], dtype=np.int64)
    counts = row_lengths(indptr, rows)
    total = int(counts.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    # Each entry's position: its row's start plus its offset within the row.
    firsts = np.cumsum(counts) - counts
    return np.arange(total, dtype=np.int64) + np.repeat(starts - firsts, counts)


def row_indices(matrix: sparse.csr_matrix, rows: np.ndarray) -> np.ndarray:
    """The column indices of the given rows' entries, concatenated (what `matrix[rows].indices` gives)."""
    return np.asarray(matrix.indices[row_positions(matrix.indptr, rows)])
