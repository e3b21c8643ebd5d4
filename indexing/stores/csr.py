"""Row gathers of CSR matrices without scipy's fancy indexing.

The graph walk's reach reads the neighbours of a few hundred nodes per hop. `m[rows].indices` builds a
whole matrix (data and indptr too, validated) to read one array of it; a gather of the positions reads only
the indices, in the same order (measured: benchmarks/notes.md, "The index on disk").
"""

from __future__ import annotations

import numpy as np
from scipy import sparse


def row_positions(indptr: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Positions in `indices` / `data` of the given rows' entries, rows in the order given, and each
    row's entry count."""
    rows = np.asarray(rows, dtype=np.int64)
    starts = np.asarray(indptr[rows], dtype=np.int64)
    counts = np.asarray(indptr[rows + 1], dtype=np.int64) - starts
    total = int(counts.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64), counts
    # Each entry's position: its row's start plus its offset within the row.
    firsts = np.cumsum(counts) - counts
    positions = np.arange(total, dtype=np.int64) + np.repeat(starts - firsts, counts)
    return positions, counts


def row_indices(matrix: sparse.csr_matrix, rows: np.ndarray) -> np.ndarray:
    """The column indices of the given rows' entries, concatenated (what `matrix[rows].indices` gives)."""
    positions, _counts = row_positions(matrix.indptr, rows)
    return np.asarray(matrix.indices[positions])
