"""Id -> row lookups as two flat arrays: sorted 64-bit hashes of the ids and the rows they belong to.

A dict of a million ids costs ~100 bytes an id and seconds to build at every load; these arrays cost 16 bytes
an id, are written once with the table they index and memory-mapped when it is opened. A lookup is one binary
search; the caller checks the row's own id, so a hash collision never returns a wrong row.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from hybridrag.indexing.stores.memory_maps import Mappings

KEY_DTYPE = np.dtype([("hash", "<u8"), ("row", "<i8")])


def key_hash(key: str) -> int:
    return int.from_bytes(hashlib.blake2b(key.encode("utf-8"), digest_size=8).digest(), "little")


def _hashes(keys: Sequence[str]) -> np.ndarray:
    return np.fromiter((key_hash(k) for k in keys), dtype=np.uint64, count=len(keys))


@dataclass(frozen=True, slots=True)
class KeyIndex:
    hashes: np.ndarray  # uint64, ascending
    rows: np.ndarray  # int64, the row of each hash (rows of one hash ascending)

    @classmethod
    def build(cls, keys: Iterable[str]) -> KeyIndex:
        hashes = np.fromiter((key_hash(k) for k in keys), dtype=np.uint64)
        order = np.lexsort((np.arange(len(hashes)), hashes))
        return cls(hashes[order], order.astype(np.int64))

    def appended(self, keys: Sequence[str], start: int | None = None) -> KeyIndex:
        """This index with `keys` added as the rows from `start` on (a table segment's ids; default: right
        after this index's own rows): one insertion of their sorted hashes, not a new sort of every hash."""
        new = KeyIndex.build(keys)
        if not len(new):
            return self
        first = len(self.hashes) if start is None else start
        at = np.searchsorted(self.hashes, new.hashes, side="right")  # after an equal hash's older rows
        return KeyIndex(
            np.insert(np.asarray(self.hashes), at, new.hashes),
            np.insert(np.asarray(self.rows), at, new.rows + first),
        )

    def dropped(self, rows: np.ndarray) -> KeyIndex:
        """This index without the entries of `rows` (deleted rows that stay in the table, unnumbered)."""
        if not len(rows):
            return self
        held = ~np.isin(np.asarray(self.rows), rows)
        return KeyIndex(np.asarray(self.hashes)[held], np.asarray(self.rows)[held])

    def kept(self, keep: np.ndarray) -> KeyIndex:
        """This index of the rows `keep` (a boolean mask over the rows) passes, numbered as they are once
        the others are removed from the table."""
        renumber = np.cumsum(keep, dtype=np.int64) - 1
        rows = np.asarray(self.rows)
        held = keep[rows]
        return KeyIndex(np.asarray(self.hashes)[held], renumber[rows[held]])

    @classmethod
    def load(cls, path: Path, maps: Mappings | None = None) -> KeyIndex:
        """Mapped from disk (through `maps` when given, so its pages are released with the version's)."""
        data = maps.npy(path) if maps is not None else np.load(path, mmap_mode="r")
        if data.dtype != KEY_DTYPE:
            raise ValueError(f"{path} is not a key index")
        return cls(data["hash"], data["row"])

    def save(self, path: Path) -> None:
        """Written beside its table, atomically (a new file, never the served one rewritten in place)."""
        data = np.empty(len(self.hashes), dtype=KEY_DTYPE)
        data["hash"], data["row"] = self.hashes, self.rows
        write_npy(path, data)

    def __len__(self) -> int:
        return len(self.hashes)

    def rows_of(self, key: str) -> np.ndarray:
        """Candidate rows of `key` (usually one, more for a repeated key or a hash collision)."""
        h = np.uint64(key_hash(key))
        lo = int(np.searchsorted(self.hashes, h, side="left"))
        hi = int(np.searchsorted(self.hashes, h, side="right"))
        return np.asarray(self.rows[lo:hi])

    def rows_of_many(self, keys: Sequence[str]) -> list[np.ndarray]:
        """`rows_of` of each key, hashed and searched together (most keys of a query's n-grams are absent)."""
        if not len(self.hashes) or not keys:
            return [np.zeros(0, dtype=np.int64) for _ in keys]
        wanted = _hashes(keys)
        lo = np.searchsorted(self.hashes, wanted, side="left")
        hi = np.searchsorted(self.hashes, wanted, side="right")
        empty = np.zeros(0, dtype=np.int64)
        return [
            np.asarray(self.rows[a:b]) if b > a else empty
            for a, b in zip(lo.tolist(), hi.tolist(), strict=True)
        ]

    def find(self, key: str, ids: Any) -> int | None:
        """The row whose id in `ids` (the indexed Arrow column) is `key`; a hash collision is skipped."""
        for row in self.rows_of(key):
            if ids[int(row)].as_py() == key:
                return int(row)
        return None

    def first_rows(self, keys: Sequence[str]) -> np.ndarray:
        """The first candidate row of each key, -1 for a key not held (one binary search for all)."""
        if not len(self.hashes) or not keys:
            return np.full(len(keys), -1, dtype=np.int64)
        wanted = _hashes(keys)
        at = np.minimum(np.searchsorted(self.hashes, wanted), len(self.hashes) - 1)
        return np.where(self.hashes[at] == wanted, self.rows[at], -1).astype(np.int64)


def write_npy(path: Path, array: np.ndarray) -> None:
    """An .npy file written under a temporary name, then renamed: never written through a hard link that a
    served version shares."""
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as fh:
        np.save(fh, array)
    os.replace(tmp, path)
