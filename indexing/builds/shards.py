"""Work over contiguous shards of a list, side by side: the first shard in this process, each other one in a
child process that holds its shard between calls.

The graph build's passes over the corpus' words (`graph_build`: counting phrases and concepts, then linking
names and tallying mentions) are single-threaded Python and each chunk's work depends only on the chunk and
on what an earlier pass found in all of them, so shards split it without changing a result: the caller merges
the shards' results in shard order. A child is a fresh interpreter running this module (`python -m`), not a
fork, so a serving process' threads are not copied; nor `multiprocessing`'s spawn, which re-runs the parent's
main script (one without a `__main__` guard would start its work again in the child). `Aside` runs one
call in such a child while the caller goes on (a build's keyword index beside its graph).
"""

from __future__ import annotations

import contextlib
import gc
import multiprocessing
import os
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from multiprocessing.connection import Connection
from types import TracebackType
from typing import Any, Generic, TypeVar

from hybridrag.indexing.models.registry import CORES_ENV, available_cores

#: Fewer items than this are worked in one process: a child's start (~0.3 s, a fresh interpreter) and its
#: shard's transfer are worth it only for a large write (benchmarks/README.md, "Constants").
PARALLEL_MIN_ITEMS = 20_000
#: At most this many processes, whatever the cores.
MAX_WORKERS = 4

_Item = TypeVar("_Item")

#: The collector's thresholds while a write runs (`build_collections`; Python's own are 700, 10, 10). A
#: write makes and keeps millions of objects (chunks, mentions, the tally's counters): at the default
#: thresholds the young generations are collected every 700 allocations and the whole heap every hundred
#: collections, ~10% of a 100k build's CPU (perf). With these a 100k build takes 0.85-0.91x the wall clock,
#: a 1M build 0.79x (benchmarks/docs/scale.md, "Ten million").
BUILD_GC_THRESHOLDS = (100_000, 50, 100)


@contextlib.contextmanager
def build_collections() -> Iterator[None]:
    """Collect garbage less often while a write runs (`BUILD_GC_THRESHOLDS`), then as before.

    The thresholds are the process' (a documents-API write in the service sets them for its searches too,
    which only keeps their cyclic garbage a little longer); a write that finds them raised already (another
    one running) leaves them alone, so the first to finish puts back the thresholds it found and none is
    left raised."""
    before = gc.get_threshold()
    if before[0] >= BUILD_GC_THRESHOLDS[0]:
        yield
        return
    gc.set_threshold(*BUILD_GC_THRESHOLDS)
    try:
        yield
    finally:
        gc.set_threshold(*before)


def shard_workers(items: int, workers: int | None = None) -> int:
    """How many processes work `items` items: `workers` when given, else one a core (at most
    `MAX_WORKERS`) from `PARALLEL_MIN_ITEMS` items on; one inside a daemonic process (which may not start
    children) or where there is no interpreter to start."""
    if multiprocessing.current_process().daemon or not sys.executable:
        return 1
    if workers is not None:
        return max(1, min(workers, items))
    return min(available_cores(), MAX_WORKERS) if items >= PARALLEL_MIN_ITEMS else 1


class Shards(Generic[_Item]):
    """`items` cut into `workers` contiguous shards; `map(fn, *args)` runs `fn(shard, *args)` on every
    shard at once and returns the results in shard order. `fn` and its arguments and results cross
    processes by pickle (`fn` a module-level function). A context manager that stops its children."""

    def __init__(self, items: Sequence[_Item], workers: int, align: int = 1) -> None:
        """`align`: shards (but the last) hold a multiple of this many items, so that work done in batches
        of that size cuts them where one process would."""
        size = max(1, -(-len(items) // max(1, workers)))
        size = -(-size // align) * align
        self._own = items[:size]
        self._children: list[tuple[subprocess.Popen[bytes], Connection]] = []
        # Each shard gets its share of the cores (`cores`): a child as its `registry.core_share`, this
        # process' shard from its caller (`EntityExtractor.on_cores`). Models' runtimes would otherwise
        # each start a thread a core beside the other shards' (benchmarks/docs/scale.md, "Ten million").
        count = len(range(0, len(items), size))
        self.cores: int | None = max(1, available_cores() // count) if count > 1 else None
        try:
            for at in range(size, len(items), size):
                process, conn = _start_child(self.cores)
                self._children.append((process, conn))
                conn.send(list(items[at : at + size]))
        except BaseException:
            self._stop(failed=True)
            raise

    def map(self, fn: Callable[..., Any], *args: Any, here: Callable[..., Any] | None = None) -> list[Any]:
        """`here`: what runs on this process' shard instead of `fn` (the same work, with what cannot cross
        processes, such as a progress bar or a loaded model)."""
        for _process, conn in self._children:
            conn.send((fn, args))
        results = [(here or fn)(self._own, *args)]
        for process, conn in self._children:
            results.append(_receive(process, conn))
        return results

    def __enter__(self) -> Shards[_Item]:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self._stop(failed=kind is not None)

    def _stop(self, failed: bool) -> None:
        for process, conn in self._children:
            _stop_child(process, conn, failed)
        self._children = []


class Aside:
    """`fn(payload, *args)` run in a child process while this one goes on with other work; `result()`
    waits for it and returns what it returned (raises what it raised, as `Shards.map` does). A context
    manager: leaving it stops the child (killed when the block failed or the result was never asked for).
    `fn` is a module-level function; `payload` and `args` cross by pickle, `payload` once."""

    def __init__(self, fn: Callable[..., Any], payload: Any, *args: Any) -> None:
        self._process, self._conn = _start_child()
        self._done = False
        try:
            # No shard: the payload goes with the call, so the child lets it go once the call returns.
            self._conn.send(None)
            self._conn.send((_aside, (fn, payload, *args)))
            # Then the end of its loop: the child exits once it has sent its result, rather than hold what
            # its work left in its heap until `result()` is read (a 1M build's keyword child lived through
            # the graph stage: see benchmarks/docs/scale.md, "The keyword child leaves when it is done").
            self._conn.send(None)
        except BaseException:
            self._stop(failed=True)
            raise

    def result(self) -> Any:
        got = _receive(self._process, self._conn)
        self._done = True
        return got

    def __enter__(self) -> Aside:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self._stop(failed=kind is not None or not self._done)

    def _stop(self, failed: bool) -> None:
        _stop_child(self._process, self._conn, failed)


def _aside(_shard: None, fn: Callable[..., Any], payload: Any, *args: Any) -> Any:
    return fn(payload, *args)


def _stop_child(process: subprocess.Popen[bytes], conn: Connection, failed: bool) -> None:
    """Tell a child its loop ends (or kill it, when its work is abandoned) and wait for it."""
    if not failed and process.poll() is None:
        with contextlib.suppress(OSError):
            conn.send(None)  # the child's loop ends
    conn.close()
    if failed:
        process.kill()
    process.wait()


def _receive(process: subprocess.Popen[bytes], conn: Connection) -> Any:
    try:
        ok, got = conn.recv()
    except (EOFError, ConnectionError):
        code = process.wait(timeout=5)
        raise RuntimeError(f"a shard's process ended early (exit code {code})") from None
    if not ok:
        raise RuntimeError(f"a shard's process failed: {got}")
    return got


def _start_child(cores: int | None = None) -> tuple[subprocess.Popen[bytes], Connection]:
    """A child running `_serve` on one end of a socket pair; the other end, as a `Connection`. `cores`: the
    child's share of the cores (`registry.core_share`), None: as this process'."""
    ours, theirs = socket.socketpair()
    # The child imports what this process imports, from where it imports it.
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    if cores is not None:
        env[CORES_ENV] = str(cores)
    with theirs:
        process = subprocess.Popen(
            [sys.executable, "-m", __spec__.name if __spec__ else __name__, str(theirs.fileno())],
            pass_fds=(theirs.fileno(),),
            stdin=subprocess.DEVNULL,
            env=env,
        )
    return process, Connection(ours.detach())


def _serve(conn: Connection) -> None:
    """A child's side: receive its shard, then run each call sent on it until told to stop (None)."""
    try:
        shard = conn.recv()
        while (call := conn.recv()) is not None:
            fn, args = call
            # (True, the result) or (False, what went wrong): the parent raises the latter.
            try:
                result = fn(shard, *args)
            except Exception as exc:  # reported to the parent, which raises it
                conn.send((False, f"{type(exc).__name__}: {exc}"))
                return
            conn.send((True, result))
            del call, fn, args, result  # not held while the next call is awaited
    except EOFError:
        pass  # the parent went away
    finally:
        conn.close()


if __name__ == "__main__":
    gc.set_threshold(*BUILD_GC_THRESHOLDS)  # a child does a write's work and nothing else
    _serve(Connection(int(sys.argv[1])))
