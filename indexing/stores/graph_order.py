"""The order of a graph's chunk nodes: node len(entities) + j is the chunk at row j of the chunk table (the
service maps it; `ListOrder` is the same order from a list of ids, for a build)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np


class ChunkOrder(Protocol):
    """The graph's chunk nodes in order (the chunk table, mapped, in the service; `ListOrder` for a list)."""

    def __len__(self) -> int: ...

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

    def id_at(self, row: int) -> str:
        return self._ids[row]

    def ids_at(self, rows: Sequence[int]) -> list[str]:
        return [self._ids[int(r)] for r in rows]

    def row(self, key: str) -> int | None:
        return self._row.get(key)

    def rows(self, keys: Sequence[str]) -> np.ndarray:
        return np.array([self._row.get(k, -1) for k in keys], dtype=np.int64)
