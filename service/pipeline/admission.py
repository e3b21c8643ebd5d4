"""How many searches run at once: a first-come, first-served gate in front of the CPU-bound part of a search.

A search holds the GIL for most of its CPU time and lets it go at every Arrow, `pread`, faiss and tantivy
call. Sixteen searches at once on two cores spend their time handing the GIL to each other: measured in
process at 100k chunks, 16 threads searching through no gate 60-67 searches/s, through a gate of 2 93/s,
of 4 84/s (benchmarks/docs/speed.md, "Searches at once: a first-come gate"). The gate admits `slots` searches;
the rest wait in arrival order and a finished search hands its slot to the longest-waiting one, so a newcomer
never overtakes (a plain `threading.Semaphore` lets the thread that releases take the slot straight back).
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager


class Admission:
    """At most `slots` holders at once; waiters admitted in arrival order."""

    def __init__(self, slots: int) -> None:
        if slots < 1:
            raise ValueError("slots must be >= 1")
        self.slots = slots
        self._free = slots
        self._lock = threading.Lock()
        self._waiting: deque[threading.Event] = deque()

    @property
    def waiting(self) -> int:
        """Searches waiting for a slot now."""
        return len(self._waiting)

    def acquire(self, timeout: float | None = None) -> bool:
        """Take a slot, waiting at most `timeout` seconds (None: as long as it takes); False if none came."""
        with self._lock:
            if self._free and not self._waiting:
                self._free -= 1
                return True
            turn = threading.Event()
            self._waiting.append(turn)
        if turn.wait(timeout):
            return True
        with self._lock:
            if turn.is_set():  # handed over between the timeout and the lock
                return True
            self._waiting.remove(turn)
            return False

    def release(self) -> None:
        with self._lock:
            if self._waiting:
                self._waiting.popleft().set()  # the slot passes on without ever being free
            elif self._free < self.slots:
                self._free += 1
            else:
                raise RuntimeError("released more often than acquired")

    @contextmanager
    def held(self, timeout: float | None = None) -> Iterator[bool]:
        """A slot for the block (yields whether one came within `timeout`; the block runs either way, so
        that a search past its time budget still answers, with the stages it could not run skipped)."""
        got = self.acquire(timeout)
        try:
            yield got
        finally:
            if got:
                self.release()
