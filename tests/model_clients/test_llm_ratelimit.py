"""Token bucket and backoff delays (ratelimit.py), on a simulated clock."""

from __future__ import annotations

import random

import pytest

from model_clients.ratelimit import TokenBucket, backoff_delay


class SimulatedClock:
    """A clock that only advances when someone sleeps."""

    def __init__(self) -> None:
        self.now = 0.0

    def time(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


class TestTokenBucket:
    def test_rate_is_respected_after_the_burst(self):
        clock = SimulatedClock()
        bucket = TokenBucket(rate_per_s=10.0, burst=5, clock=clock.time, sleep=clock.sleep)
        for _ in range(25):
            bucket.acquire()
        # 5 go out at once, the other 20 at 10 per second.
        assert clock.now == pytest.approx(2.0)

    def test_unlimited_never_waits(self):
        clock = SimulatedClock()
        bucket = TokenBucket(rate_per_s=None, clock=clock.time, sleep=clock.sleep)
        for _ in range(1_000):
            bucket.acquire()
        assert clock.now == 0.0

    def test_hold_pauses_everyone(self):
        clock = SimulatedClock()
        bucket = TokenBucket(rate_per_s=None, clock=clock.time, sleep=clock.sleep)
        bucket.hold(1.5)
        waited = bucket.acquire()
        assert waited == pytest.approx(1.5)
        assert clock.now == pytest.approx(1.5)

    def test_invalid_burst(self):
        with pytest.raises(ValueError, match="burst"):
            TokenBucket(rate_per_s=1.0, burst=0)


class TestBackoffDelay:
    @pytest.mark.parametrize(
        ("retry_number", "low", "high"),
        [
            (1, 0.5, 1.0),  # base 1 s, half fixed, half jitter
            (2, 1.0, 2.0),  # doubled
            (4, 4.0, 8.0),  # doubled twice more
            (10, 5.0, 10.0),  # capped at max_s = 10
        ],
    )
    def test_exponential_with_jitter(self, retry_number, low, high):
        rng = random.Random(0)
        delays = [backoff_delay(retry_number, 1.0, 10.0, rng=rng) for _ in range(200)]
        assert low <= min(delays) and max(delays) <= high
        assert len(set(delays)) > 1

    def test_retry_after_is_honoured(self):
        rng = random.Random(0)
        delays = [backoff_delay(1, 0.01, 0.05, retry_after_s=2.0, rng=rng) for _ in range(100)]
        assert min(delays) >= 2.0 and max(delays) <= 2.2

    def test_retry_after_is_capped(self):
        assert backoff_delay(1, 0.01, 0.05, retry_after_s=3_600.0, max_retry_after_s=30.0) <= 33.0
