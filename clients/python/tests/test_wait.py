"""The wait bound: sleep by retry_after_ms when it fits, never spin, else answer at once."""

from __future__ import annotations

import asyncio

import httpx
from fakes import Recorder, decision_response


def deny_then_grant(denials: int, retry_ms: int) -> Recorder:
    def answer(request: httpx.Request, n: int) -> httpx.Response:
        if n <= denials:
            return decision_response(
                429, allowed=False, remaining=0, limit=1, retry_after_ms=retry_ms
            )
        return decision_response(200, allowed=True, remaining=0, limit=1)

    return Recorder(answer)


def test_a_denial_within_the_bound_sleeps_its_retry_time_and_asks_again() -> None:
    recorder = deny_then_grant(2, retry_ms=300)
    client = recorder.client()
    pauses: list[float] = []
    client._sleep = pauses.append
    decision = client.acquire("r", wait=5)
    assert decision.allowed
    assert len(recorder.requests) == 3
    assert len(pauses) == 2
    assert all(0.3 < p < 0.35 for p in pauses)  # the retry time plus a little jitter


def test_a_denial_beyond_the_bound_answers_at_once() -> None:
    recorder = deny_then_grant(5, retry_ms=3000)
    client = recorder.client()
    client._sleep = lambda s: (_ for _ in ()).throw(AssertionError("must not sleep"))
    decision = client.acquire("r", wait=1)
    assert not decision.allowed and decision.retry_after_ms == 3000
    assert len(recorder.requests) == 1


def test_without_wait_a_denial_answers_at_once() -> None:
    recorder = deny_then_grant(5, retry_ms=10)
    client = recorder.client()
    client._sleep = lambda s: (_ for _ in ()).throw(AssertionError("must not sleep"))
    assert not client.acquire("r").allowed
    assert len(recorder.requests) == 1


def test_a_zero_retry_time_still_sleeps_a_little() -> None:
    recorder = deny_then_grant(1, retry_ms=0)
    client = recorder.client()
    pauses: list[float] = []
    client._sleep = pauses.append
    assert client.acquire("r", wait=1).allowed
    assert len(pauses) == 1 and pauses[0] > 0


def test_the_wait_budget_runs_out() -> None:
    # Each denial says 400 ms; with a budget of 1 s and sleeps that really pass, at most
    # two sleeps fit, then the denial is answered.
    recorder = deny_then_grant(100, retry_ms=400)
    client = recorder.client(denial_cache=False)
    slept: list[float] = []

    def fake_sleep(seconds: float) -> None:
        slept.append(seconds)
        import time as _time

        _time.sleep(seconds)

    client._sleep = fake_sleep
    decision = client.acquire("r", wait=1.0)
    assert not decision.allowed
    assert 1 <= len(slept) <= 2
    assert len(recorder.requests) == len(slept) + 1


def test_wait_uses_the_denial_cache_without_spinning() -> None:
    # The denial is cached; a later call with a wait sleeps the cached retry time instead
    # of asking the server again and again.
    recorder = deny_then_grant(1, retry_ms=200)
    client = recorder.client()
    assert not client.acquire("r").allowed
    pauses: list[float] = []

    def fake_sleep(seconds: float) -> None:
        pauses.append(seconds)
        import time as _time

        _time.sleep(seconds)

    client._sleep = fake_sleep
    assert client.acquire("r", wait=2).allowed
    assert len(recorder.requests) == 2
    assert len(pauses) == 1


def test_async_wait() -> None:
    recorder = deny_then_grant(1, retry_ms=250)
    client = recorder.async_client()
    pauses: list[float] = []

    async def sleep(seconds: float) -> None:
        pauses.append(seconds)

    client._sleep = sleep
    assert asyncio.run(client.acquire("r", wait=1)).allowed
    assert len(pauses) == 1 and pauses[0] > 0.25
