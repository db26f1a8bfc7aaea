"""Request pacing: a thread-safe token bucket and jittered exponential backoff.

The bucket caps the request rate across all worker threads of a client; a 429 answer with a
``Retry-After`` header also pauses the whole bucket (the provider's limit is per account, so every
worker should back off, not only the one that was told). Backoff delays use "equal jitter": half the
exponential delay is fixed and half is random, which spreads retries of a burst of failures while
keeping a guaranteed minimum wait.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from typing import Protocol

__all__ = ["TokenBucket", "backoff_delay"]


class _RandomSource(Protocol):
    """What backoff jitter draws from: a `random.Random` or the `random` module itself."""

    def random(self) -> float: ...

    def uniform(self, a: float, b: float) -> float: ...


_TOKEN_EPSILON = 1e-9  # float tolerance: a refill that reaches 0.999999999 counts as a whole token


class TokenBucket:
    """A token bucket shared by threads: `acquire()` blocks until a request may be sent.

    Args:
        rate_per_s (`float` or `None`): sustained requests per second; `None` or `<= 0` means no limit
            (only `hold()` pauses then).
        burst (`int`, *optional*, defaults to `1`): bucket capacity, the number of requests that may go
            out back to back after an idle period.
        clock (`Callable[[], float]`, *optional*): monotonic clock, replaceable in tests.
        sleep (`Callable[[float], None]`, *optional*): sleep function, replaceable in tests.

    Example:
        >>> bucket = TokenBucket(rate_per_s=1000.0, burst=2)
        >>> bucket.acquire() >= 0.0
        True
    """

    def __init__(
        self,
        rate_per_s: float | None,
        burst: int = 1,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if burst < 1:
            raise ValueError(f"burst must be at least 1, got {burst}")
        self.rate_per_s = rate_per_s if rate_per_s and rate_per_s > 0 else None
        self.burst = burst
        self._clock = clock
        self._sleep = sleep
        self._lock = threading.Lock()
        self._tokens = float(burst)
        self._updated_at = clock()
        self._paused_until = 0.0

    def hold(self, seconds: float) -> None:
        """Pause every caller of `acquire()` for at least `seconds` from now (e.g. after a 429)."""
        with self._lock:
            self._paused_until = max(self._paused_until, self._clock() + seconds)

    def acquire(self) -> float:
        """Take one token, sleeping as needed; returns the seconds spent waiting."""
        waited = 0.0
        while True:
            with self._lock:
                now = self._clock()
                wait = self._paused_until - now
                if wait <= 0:
                    if self.rate_per_s is None:
                        return waited
                    self._tokens = min(
                        float(self.burst), self._tokens + (now - self._updated_at) * self.rate_per_s
                    )
                    self._updated_at = now
                    if self._tokens >= 1.0 - _TOKEN_EPSILON:
                        self._tokens = max(self._tokens - 1.0, 0.0)
                        return waited
                    wait = (1.0 - self._tokens) / self.rate_per_s
            self._sleep(wait)
            waited += wait


def backoff_delay(
    retry_number: int,
    base_s: float,
    max_s: float,
    retry_after_s: float | None = None,
    max_retry_after_s: float = 120.0,
    rng: random.Random | None = None,
) -> float:
    """Seconds to wait before retry number `retry_number` (1 for the first retry).

    Without a server hint: `min(max_s, base_s * 2 ** (retry_number - 1))`, half of it fixed and half
    uniformly random. With a `Retry-After` hint: the hint (capped at `max_retry_after_s`) plus up to
    10% random jitter, so the server's wish is always honoured.

    Example:
        >>> 0.5 <= backoff_delay(1, base_s=1.0, max_s=30.0) <= 1.0
        True
        >>> 2.0 <= backoff_delay(3, base_s=1.0, max_s=30.0, retry_after_s=2.0) <= 2.2
        True
    """
    source: _RandomSource = rng or random
    if retry_after_s is not None and retry_after_s >= 0:
        hinted = min(retry_after_s, max_retry_after_s)
        return hinted * (1.0 + 0.1 * source.random())
    exponential = min(max_s, base_s * 2 ** max(retry_number - 1, 0))
    return exponential / 2 + source.uniform(0, exponential / 2)
