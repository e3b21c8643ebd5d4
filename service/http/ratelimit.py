"""A token-bucket rate limit per caller (API key, else client address), kept on the app, not globally."""

from __future__ import annotations

import hashlib
import math
import threading
import time
from collections import OrderedDict

MAX_CALLERS = 10_000  # least recently seen callers are forgotten beyond this


class RateLimiter:
    """`rate` requests per second on average, bursts of up to `burst`."""

    def __init__(self, rate: float, burst: int) -> None:
        if rate <= 0 or burst < 1:
            raise ValueError("rate must be > 0 and burst >= 1")
        self.rate, self.burst = rate, burst
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()
        self._lock = threading.Lock()

    def acquire(self, caller: str, now: float | None = None) -> float:
        """0.0 when the call may proceed; otherwise the seconds to wait before the next one would."""
        now = time.monotonic() if now is None else now
        with self._lock:
            tokens, last = self._buckets.pop(caller, (float(self.burst), now))
            tokens = min(float(self.burst), tokens + (now - last) * self.rate)
            wait = 0.0
            if tokens >= 1.0:
                tokens -= 1.0
            else:
                wait = (1.0 - tokens) / self.rate
            self._buckets[caller] = (tokens, now)
            while len(self._buckets) > MAX_CALLERS:
                self._buckets.popitem(last=False)
            return wait


def caller_key(presented_key: str, client_host: str | None) -> str:
    """Callers with a key are told apart by (a hash of) the key; others by their address."""
    if presented_key:
        return "key:" + hashlib.sha256(presented_key.encode()).hexdigest()[:16]
    return f"addr:{client_host or 'unknown'}"


def retry_after(wait: float) -> str:
    return str(max(1, math.ceil(wait)))
