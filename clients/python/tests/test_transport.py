"""Transport failures: degraded decisions, fail-open/closed, retries on refused only.

No timing assertions: a call against a server that never answers must return (with
generous bounds on how long the test may take) and say it is degraded.
"""

from __future__ import annotations

import asyncio

import httpx
import pytest
from fakes import Recorder, decision_response, refused_url, silent_server

import ratekeeper


def test_a_silent_server_gives_degraded_fail_closed_decisions() -> None:
    with silent_server() as url, ratekeeper.Client(url, "k", timeout=0.3) as client:
        decision = client.acquire("orders.create")
        assert decision.degraded and not decision.allowed and not decision.cached
        assert decision.remaining is None and decision.limit is None
        assert client.acquire("orders.create", fail_open=True).allowed
        check = client.check("orders.create", timeout=0.2)
        assert check.degraded and not check.allowed
        both = client.acquire_all([{"resource": "a"}, {"resource": "b", "key": "u"}])
        assert not both.allowed and len(both.results) == 2
        assert all(r.degraded and not r.allowed for r in both.results)
        with pytest.raises(ratekeeper.TransportError) as err:
            client.refund("orders.create", 1)
        assert isinstance(err.value, ratekeeper.RatekeeperError)
        with pytest.raises(ratekeeper.TransportError):
            client.release("orders.create", "0" * 32)
        with pytest.raises(ratekeeper.RateLimited) as denied, client.lease("jobs"):
            pass
        assert denied.value.decision.degraded


def test_the_client_default_fail_open_and_its_per_call_override() -> None:
    with silent_server() as url, ratekeeper.Client(url, "k", timeout=0.2, fail_open=True) as c:
        assert c.acquire("r").allowed and c.acquire("r").degraded
        assert not c.acquire("r", fail_open=False).allowed
        assert c.acquire_all([{"resource": "a"}]).allowed
        with c.lease("r") as granted:
            assert granted.degraded and granted.lease_id is None


def test_async_silent_server_gives_degraded_decisions() -> None:
    async def run() -> None:
        with silent_server() as url:
            async with ratekeeper.AsyncClient(url, "k", timeout=0.3) as client:
                decision = await client.acquire("r")
                assert decision.degraded and not decision.allowed
                assert (await client.acquire("r", fail_open=True)).allowed
                both = await client.acquire_all([{"resource": "a"}], fail_open=True)
                assert both.allowed and both.results[0].degraded
                with pytest.raises(ratekeeper.TransportError):
                    await client.refund("r", 1)
                with pytest.raises(ratekeeper.TransportError):
                    await client.release("r", "0" * 32)

    asyncio.run(asyncio.wait_for(run(), 30))


def test_connection_refused_is_degraded_after_retries() -> None:
    with ratekeeper.Client(refused_url(), "k", timeout=2) as client:
        decision = client.acquire("r", fail_open=True)
        assert decision.allowed and decision.degraded


def counting(exc: Exception) -> Recorder:
    def answer(request: httpx.Request, n: int) -> httpx.Response:
        raise exc

    return Recorder(answer)


def test_connect_errors_are_retried_at_most_twice_with_backoff() -> None:
    recorder = counting(httpx.ConnectError("refused"))
    client = recorder.client(timeout=10)
    pauses: list[float] = []
    client._sleep = pauses.append
    assert client.acquire("r").degraded
    assert len(recorder.requests) == 3
    assert len(pauses) == 2
    assert 0.025 <= pauses[0] <= 0.075 and 0.05 <= pauses[1] <= 0.15


def test_connect_errors_then_an_answer() -> None:
    def answer(request: httpx.Request, n: int) -> httpx.Response:
        if n < 3:
            raise httpx.ConnectError("refused")
        return decision_response(200, allowed=True, remaining=1, limit=2)

    recorder = Recorder(answer)
    client = recorder.client(timeout=10)
    client._sleep = lambda s: None
    decision = client.acquire("r")
    assert decision.allowed and not decision.degraded and decision.remaining == 1


@pytest.mark.parametrize(
    "exc",
    [
        httpx.ReadTimeout("slow"),
        httpx.ConnectTimeout("slow"),
        httpx.RemoteProtocolError("reset"),
        httpx.ReadError("reset"),
        httpx.WriteError("broken"),
    ],
)
def test_other_failures_are_not_retried(exc: Exception) -> None:
    recorder = counting(exc)
    client = recorder.client(timeout=10)
    client._sleep = lambda s: pytest.fail("no retry expected")
    assert client.acquire("r").degraded
    assert len(recorder.requests) == 1


def test_retries_never_go_past_the_call_timeout() -> None:
    recorder = counting(httpx.ConnectError("refused"))
    client = recorder.client(timeout=0.01)  # shorter than any backoff
    client._sleep = lambda s: pytest.fail("no retry fits in the timeout")
    assert client.acquire("r").degraded
    assert len(recorder.requests) == 1


def test_async_connect_errors_are_retried_at_most_twice() -> None:
    recorder = counting(httpx.ConnectError("refused"))
    client = recorder.async_client(timeout=10)
    pauses: list[float] = []

    async def sleep(seconds: float) -> None:
        pauses.append(seconds)

    client._sleep = sleep
    decision = asyncio.run(client.acquire("r", fail_open=True))
    assert decision.allowed and decision.degraded
    assert len(recorder.requests) == 3 and len(pauses) == 2
