"""The files of a loaded version, memory-mapped, and the release of the pages searches touched.

A mapped page a search reads stays in the process' page tables (with the kernel's fault-around neighbours,
16 pages a fault) until the mapping goes: over many searches a replica's resident set grows towards the
size of every table it reads rows from (2.2 GB file-backed after 1,000 searches at a million chunks),
although those pages are only page cache. `Mappings.release` drops them from the page tables with
`madvise(MADV_DONTNEED)`: for a read-only file mapping that loses nothing, the pages stay in the page cache
and the next read maps them again (a minor fault, no disk read while the cache holds them). The service
releases every `RELEASE_EVERY` searches, so what stays resident is what the last few searches read, in a
thread of its own: unmapping costs the kernel ~2 ms of work per search at a million chunks (the pages a
search touches, with their neighbours, are tens of MB), which no request should wait for.
"""

from __future__ import annotations

import itertools
import mmap
import threading
from pathlib import Path

import numpy as np
import pyarrow as pa

RELEASE_EVERY = 32


class Mappings:
    """The memory maps of one loaded version (Arrow tables and `.npy` arrays), released together."""

    def __init__(self, release_every: int = RELEASE_EVERY) -> None:
        if release_every < 0:
            raise ValueError("release_every must be 0 (never) or more")
        self.release_every = release_every
        self._maps: list[mmap.mmap] = []
        self._lock = threading.Lock()
        self._searches = itertools.count(1)
        self._releasing = threading.Lock()
        self.releases = 0

    def _map(self, path: Path) -> mmap.mmap:
        with open(path, "rb") as fh:
            mapped = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
        with self._lock:
            self._maps.append(mapped)
        return mapped

    def arrow(self, path: Path) -> pa.Table:
        """An Arrow IPC (Feather v2) file: uncompressed columns are views of the mapping, not copies."""
        return pa.ipc.open_file(pa.BufferReader(pa.py_buffer(self._map(path)))).read_all()

    def npy(self, path: Path) -> np.ndarray:
        """A `.npy` array, read-only, a view of the mapping."""
        with open(path, "rb") as fh:
            version = np.lib.format.read_magic(fh)
            if version == (1, 0):
                shape, fortran, dtype = np.lib.format.read_array_header_1_0(fh)
            else:
                shape, fortran, dtype = np.lib.format.read_array_header_2_0(fh)
            offset = fh.tell()
        if dtype.hasobject:
            raise ValueError(f"{path} holds Python objects")
        count = int(np.prod(shape)) if shape else 1
        if count == 0:
            return np.zeros(shape, dtype=dtype)
        flat = np.frombuffer(self._map(path), dtype=dtype, count=count, offset=offset)
        return flat.reshape(shape, order="F" if fortran else "C")

    @property
    def files(self) -> int:
        return len(self._maps)

    def release(self) -> None:
        """Drop every mapped page from the process' page tables (they stay in the page cache)."""
        with self._lock:
            maps = list(self._maps)
        for mapped in maps:
            mapped.madvise(mmap.MADV_DONTNEED)
        with self._lock:
            self.releases += 1

    def searched(self) -> threading.Thread | None:
        """Count a search; every `release_every`-th releases the pages in a thread of its own (returned;
        none when a release is still running)."""
        count = next(self._searches)
        if not self.release_every or count % self.release_every:
            return None
        if not self._releasing.acquire(blocking=False):
            return None

        def run() -> None:
            try:
                self.release()
            finally:
                self._releasing.release()

        thread = threading.Thread(target=run, name="release-mapped-pages", daemon=True)
        thread.start()
        return thread
