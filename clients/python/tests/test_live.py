"""The client against a real server (skipped when none can be started)."""

from __future__ import annotations

import asyncio

import pytest
from conftest import Live

import ratekeeper


def test_grants_then_denies_then_answers_locally(live: Live) -> None:
    name = live.policy(rate=0.001, max_permits=2)
    with ratekeeper.Client(live.url, live.key) as client:
        first = client.acquire(name)
        assert first.allowed and first.remaining == 1 and first.limit == 2
        assert first.policy_version is not None and not first.degraded
        assert "RateLimit" in first.headers and "RateLimit-Policy" in first.headers
        assert client.acquire(name).remaining == 0
        denied = client.acquire(name)
        assert not denied.allowed and not denied.cached and denied.retry_after_ms > 0
        assert denied.headers["Retry-After"]
        local = client.acquire(name)
        assert local.cached and not local.allowed and local.limit == 2
        assert 0 < local.retry_after_ms <= denied.retry_after_ms
        refunded = client.refund(name, 1)
        assert refunded.remaining == 1
        assert client.acquire(name).allowed  # the refund dropped the cached denial


def test_check_acquire_all_and_errors(live: Live) -> None:
    a = live.policy(rate=0.001, max_permits=3)
    b = live.policy(rate=0.001, max_permits=1, scope="per_key")
    with ratekeeper.Client(live.url, live.key) as client:
        check = client.check(a)
        assert check.allowed and check.remaining == 3
        both = client.acquire_all([{"resource": a, "permits": 2}, {"resource": b, "key": "u1"}])
        assert both.allowed and [r.remaining for r in both.results] == [1, 0]
        again = client.acquire_all([{"resource": a}, {"resource": b, "key": "u1"}])
        assert not again.allowed and not again.results[1].allowed
        assert "Retry-After" in again.headers
        assert client.acquire(b, key="u1").cached
        assert client.acquire(b, key="u2").allowed
        with pytest.raises(ratekeeper.NotFound):
            client.acquire(f"{live.app}.missing")
        with pytest.raises(ratekeeper.Invalid) as invalid:
            client.acquire(a, permits=10)
        assert invalid.value.field == "permits" and invalid.value.status == 422
        with pytest.raises(ratekeeper.Invalid) as no_key:
            client.acquire(b)
        assert no_key.value.field == "key"
        with pytest.raises(ratekeeper.BadRequest):
            client.acquire("not a name")
    with ratekeeper.Client(live.url, "rk_live_madeup") as stranger:
        with pytest.raises(ratekeeper.Unauthorized) as unauthorized:
            stranger.acquire(a)
        assert unauthorized.value.type.startswith("urn:ratekeeper:problem:")


def test_leases(live: Live) -> None:
    name = live.policy(algorithm="concurrency", max_permits=1, lease_ttl_ms=600_000)
    plain = live.policy(rate=1, max_permits=5)
    with ratekeeper.Client(live.url, live.key) as client:
        with client.lease(name) as held:
            assert held.lease_id
            with pytest.raises(ratekeeper.RateLimited) as denied, client.lease(name):
                pass
            assert not denied.value.decision.allowed
        with client.lease(name) as again:  # released at the end of the first scope
            assert again.lease_id
        granted = client.acquire(name)
        assert granted.lease_id
        released = client.release(name, granted.lease_id)
        assert released.released and released.remaining == 1
        with pytest.raises(ratekeeper.NotFound):
            client.release(name, granted.lease_id)
        lease_id = granted.lease_id
        with pytest.raises(ratekeeper.Conflict):
            client.release(plain, lease_id)
        with pytest.raises(ValueError), client.lease(name):
            raise ValueError("the work failed")
        assert client.acquire(name).allowed  # released despite the error


def test_wait_for_a_permit(live: Live) -> None:
    name = live.policy(rate=5, max_permits=1)  # a permit every 200 ms
    with ratekeeper.Client(live.url, live.key) as client:
        assert client.acquire(name).allowed
        waited = client.acquire(name, wait=5)
        assert waited.allowed
        slow = live.policy(rate=0.001, max_permits=1)
        assert client.acquire(slow).allowed
        assert not client.acquire(slow, wait=0.5).allowed


def test_async_client(live: Live) -> None:
    name = live.policy(rate=0.001, max_permits=1)
    lease = live.policy(algorithm="concurrency", max_permits=1, lease_ttl_ms=600_000)
    live.server.app_key("pytests-other")
    foreign = "pytests-other.only"
    live.server.policy({"name": foreign, "owner_app": "pytests-other", "max_permits": 1, "rate": 1})

    async def run() -> None:
        async with ratekeeper.AsyncClient(live.url, live.key) as client:
            assert (await client.acquire(name)).allowed
            denied = await client.acquire(name)
            assert not denied.allowed and not denied.cached
            assert (await client.acquire(name)).cached
            assert (await client.check(name)).cached is False  # 0 permits < 1: asked
            both = await client.acquire_all([{"resource": name}])
            assert not both.allowed
            assert (await client.refund(name, 1)).remaining == 1
            async with client.lease(lease) as held:
                assert held.lease_id
                with pytest.raises(ratekeeper.RateLimited):
                    async with client.lease(lease):
                        pass
            granted = await client.acquire(lease)
            assert granted.lease_id
            assert (await client.release(lease, granted.lease_id)).released
            with pytest.raises(ratekeeper.Forbidden):
                await client.acquire(foreign)

    asyncio.run(asyncio.wait_for(run(), 60))
