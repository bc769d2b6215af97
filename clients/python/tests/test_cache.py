"""The local denial cache, on a clock the tests move."""

from __future__ import annotations

from ratekeeper import Decision, DenialCache


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def denial(retry_ms: int = 1000, limit: int = 2) -> Decision:
    return Decision(
        allowed=False,
        remaining=0,
        limit=limit,
        retry_after_ms=retry_ms,
        reset_after_ms=retry_ms + 500,
        policy_version=3,
        headers={
            "RateLimit": '"r";r=0;t=1',
            "RateLimit-Policy": '"r";q=2',
            "Retry-After": "1",
        },
    )


def test_a_denial_answers_the_same_or_more_permits_until_its_retry_time() -> None:
    clock = Clock()
    cache = DenialCache(10, clock=clock)
    cache.record("r", "k", 2, denial(retry_ms=3000))
    assert cache.lookup("r", "k", 1) is None  # fewer permits: ask the server
    hit = cache.lookup("r", "k", 2)
    assert hit is not None and not hit.allowed and hit.cached
    assert hit.remaining == 0 and hit.limit == 2 and hit.policy_version == 3
    assert hit.retry_after_ms == 3000
    assert cache.lookup("r", "k", 5) is not None
    assert cache.lookup("r", "other", 2) is None
    assert cache.lookup("other", "k", 2) is None
    clock.now += 1.2
    hit = cache.lookup("r", "k", 2)
    assert hit is not None and hit.retry_after_ms == 1800
    assert hit.headers["Retry-After"] == "2"
    assert hit.headers["RateLimit"] == '"r";r=0;t=2'
    assert hit.headers["RateLimit-Policy"] == '"r";q=2'
    clock.now += 1.8
    assert cache.lookup("r", "k", 2) is None  # expired
    assert len(cache) == 0


def test_a_grant_drops_the_entry_and_forget_too() -> None:
    cache = DenialCache(10, clock=Clock())
    cache.record("r", None, 1, denial())
    assert cache.lookup("r", None, 1) is not None
    cache.record("r", None, 1, Decision(allowed=True, remaining=1))
    assert cache.lookup("r", None, 1) is None
    cache.record("r", None, 1, denial())
    cache.forget("r", None)
    assert cache.lookup("r", None, 1) is None


def test_degraded_cached_and_retryless_denials_are_not_remembered() -> None:
    cache = DenialCache(10, clock=Clock())
    cache.record("a", None, 1, Decision(allowed=False, degraded=True))
    cache.record("b", None, 1, denial(retry_ms=0))
    cache.record("c", None, 1, Decision(allowed=False, retry_after_ms=500, cached=True))
    assert len(cache) == 0


def test_a_check_denial_answers_checks_and_acquires() -> None:
    cache = DenialCache(10, clock=Clock())
    cache.record("r", None, 0, denial())
    assert cache.lookup("r", None, 0) is not None
    assert cache.lookup("r", None, 1) is not None


def test_bounded_evicting_expired_entries_first_then_the_oldest() -> None:
    clock = Clock()
    cache = DenialCache(3, clock=clock)
    cache.record("old", None, 1, denial(retry_ms=10_000))
    cache.record("short", None, 1, denial(retry_ms=100))
    cache.record("mid", None, 1, denial(retry_ms=10_000))
    clock.now += 0.5  # "short" has expired
    cache.record("new", None, 1, denial(retry_ms=10_000))
    assert len(cache) == 3
    assert cache.lookup("old", None, 1) is not None  # kept: an expired one went first
    cache.record("newer", None, 1, denial(retry_ms=10_000))
    assert len(cache) == 3
    assert cache.lookup("old", None, 1) is None  # none expired: the oldest went
    assert cache.lookup("mid", None, 1) is not None
    assert cache.lookup("newer", None, 1) is not None


def test_many_keys_stay_within_the_bound() -> None:
    cache = DenialCache(100, clock=Clock())
    for i in range(1000):
        cache.record("r", f"k{i}", 1, denial())
    assert len(cache) == 100
    assert cache.lookup("r", "k999", 1) is not None
    assert cache.lookup("r", "k0", 1) is None


def test_size_zero_switches_it_off() -> None:
    cache = DenialCache(0, clock=Clock())
    cache.record("r", None, 1, denial())
    assert cache.lookup("r", None, 1) is None
    assert len(cache) == 0
