"""Answers mapped to errors and decisions; what the client sends."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from fakes import Recorder, decision_response, problem

import ratekeeper

CASES = [
    (400, "malformed", ratekeeper.BadRequest),
    (401, "unauthorized", ratekeeper.Unauthorized),
    (403, "forbidden", ratekeeper.Forbidden),
    (404, "not-found", ratekeeper.NotFound),
    (404, "lease-not-held", ratekeeper.NotFound),
    (409, "not-a-lease-policy", ratekeeper.Conflict),
    (422, "validation", ratekeeper.Invalid),
    (503, "unavailable", ratekeeper.Unavailable),
    (500, "internal", ratekeeper.UnexpectedResponse),
    (405, "method-not-allowed", ratekeeper.UnexpectedResponse),
]


@pytest.mark.parametrize(("status", "kind", "cls"), CASES)
def test_problems_map_to_their_error(status: int, kind: str, cls: type) -> None:
    errors = [{"field": "permits", "message": "must be at most 2"}]
    recorder = Recorder(lambda r, n: problem(status, kind, "it went wrong", errors=errors))
    client = recorder.client()
    for call in (
        lambda: client.acquire("r"),
        lambda: client.check("r"),
        lambda: client.acquire_all([{"resource": "r"}]),
        lambda: client.refund("r", 1),
        lambda: client.release("r", "ab" * 16),
    ):
        with pytest.raises(cls) as err:
            call()
        e = err.value
        assert isinstance(e, ratekeeper.RatekeeperError)
        assert e.status == status
        assert e.type == f"urn:ratekeeper:problem:{kind}"
        assert e.title == kind and e.detail == "it went wrong"
        assert e.errors == errors and e.field == "permits"


def test_a_non_json_error_is_unexpected() -> None:
    recorder = Recorder(lambda r, n: httpx.Response(502, text="<html>bad gateway</html>"))
    with pytest.raises(ratekeeper.UnexpectedResponse) as err:
        recorder.client().acquire("r")
    assert err.value.status == 502 and "bad gateway" in err.value.detail


def test_a_200_that_is_not_a_decision_is_unexpected() -> None:
    recorder = Recorder(lambda r, n: httpx.Response(200, text="hello"))
    with pytest.raises(ratekeeper.UnexpectedResponse):
        recorder.client().acquire("r")


def test_async_errors_map_the_same() -> None:
    recorder = Recorder(lambda r, n: problem(404, "not-found"))
    with pytest.raises(ratekeeper.NotFound):
        asyncio.run(recorder.async_client().acquire("r"))


def test_decisions_from_200_and_429() -> None:
    def answer(request: httpx.Request, n: int) -> httpx.Response:
        if n == 1:
            return httpx.Response(
                200,
                json={
                    "allowed": True,
                    "remaining": 1,
                    "limit": 2,
                    "retry_after_ms": 0,
                    "reset_after_ms": 5000,
                    "policy_version": 4,
                    "lease_id": "ab" * 16,
                },
                headers={
                    "RateLimit": '"r";r=1;t=5',
                    "RateLimit-Policy": '"r";q=2',
                    "X-Other": "no",
                },
            )
        return decision_response(
            429, allowed=False, remaining=0, limit=2, retry_after_ms=4987, reset_after_ms=9987
        )

    client = Recorder(answer).client()
    granted = client.acquire("r", permits=1, key="u")
    assert granted.allowed and granted.remaining == 1 and granted.limit == 2
    assert granted.reset_after_ms == 5000 and granted.policy_version == 4
    assert granted.lease_id == "ab" * 16 and granted.enforced and not granted.shadow_denied
    assert granted.headers == {"RateLimit": '"r";r=1;t=5', "RateLimit-Policy": '"r";q=2'}
    denied = client.acquire("r")
    assert not denied.allowed and denied.retry_after_ms == 4987 and not denied.cached
    assert denied.headers["Retry-After"] == "5"
    with pytest.raises(AttributeError):
        denied.allowed = True  # type: ignore[misc]


def test_disabled_shadow_and_server_degraded_flags() -> None:
    bodies = [
        {"allowed": True, "remaining": 2, "limit": 2, "enforced": False},
        {"allowed": True, "remaining": 0, "limit": 2, "shadow_denied": True, "retry_after_ms": 9},
        {"allowed": True, "limit": 2, "degraded": True},
    ]
    client = Recorder(lambda r, n: httpx.Response(200, json=bodies[n - 1])).client()
    assert not client.acquire("r").enforced
    shadow = client.acquire("r")
    assert shadow.shadow_denied and shadow.allowed and shadow.retry_after_ms == 9
    degraded = client.acquire("r")
    assert degraded.degraded and degraded.remaining is None


def test_requests_carry_the_key_user_agent_and_body() -> None:
    def answer(request: httpx.Request, n: int) -> httpx.Response:
        if b'"all"' in request.content:
            return httpx.Response(200, json={"allowed": True, "results": []})
        return decision_response(200, allowed=True, remaining=1)

    recorder = Recorder(answer)
    client = recorder.client()
    client.acquire("orders.create", permits=2, key="u42")
    client.check("orders.create")
    client.acquire_all([{"resource": "a", "key": "k"}, {"resource": "b", "permits": 3}])
    request = recorder.requests[0]
    assert request.url.path == "/v1/acquire"
    assert request.headers["Authorization"] == "Bearer sekret-key"
    assert request.headers["User-Agent"] == f"ratekeeper-python/{ratekeeper.__version__}"
    assert recorder.bodies() == [
        {"resource": "orders.create", "permits": 2, "key": "u42"},
        {"resource": "orders.create", "permits": 0},
        {"all": [{"resource": "a", "permits": 1, "key": "k"}, {"resource": "b", "permits": 3}]},
    ]


def test_the_api_key_is_never_shown() -> None:
    client = ratekeeper.Client("http://127.0.0.1:1/", "sekret-key")
    aclient = ratekeeper.AsyncClient("http://127.0.0.1:1", "sekret-key")
    for text in (repr(client), str(client), repr(aclient)):
        assert "sekret" not in text
    assert client.url == "http://127.0.0.1:1"
    client.close()


def test_a_denial_is_cached_and_a_grant_or_refund_drops_it() -> None:
    answers = iter(
        [
            decision_response(429, allowed=False, remaining=0, limit=2, retry_after_ms=60_000),
            decision_response(200, allowed=True, remaining=1, limit=2),  # 1 permit: asked
            decision_response(429, allowed=False, remaining=0, limit=2, retry_after_ms=60_000),
            decision_response(200, allowed=True, remaining=1, limit=2),  # the refund
            decision_response(200, allowed=True, remaining=0, limit=2),
        ]
    )
    recorder = Recorder(lambda r, n: next(answers))
    client = recorder.client()
    assert not client.acquire("r", permits=2).allowed
    local = client.acquire("r", permits=2)
    assert local.cached and not local.allowed and local.remaining == 0 and local.limit == 2
    assert 0 < local.retry_after_ms <= 60_000
    assert len(recorder.requests) == 1
    assert client.acquire("r", permits=1).allowed  # fewer permits go to the server...
    assert len(recorder.requests) == 2
    assert not client.acquire("r", permits=2).cached  # ...and the grant dropped the entry
    assert client.acquire("r", permits=2).cached
    client.refund("r", 1)
    assert client.acquire("r", permits=2).allowed
    assert len(recorder.requests) == 5


def test_acquire_all_always_asks_and_records_its_denials() -> None:
    reply = {
        "allowed": False,
        "results": [
            {"allowed": True, "remaining": 3, "limit": 5},
            {"allowed": False, "remaining": 0, "limit": 1, "retry_after_ms": 30_000},
        ],
    }
    recorder = Recorder(lambda r, n: httpx.Response(429, json=reply))
    client = recorder.client()
    items = [{"resource": "a"}, {"resource": "b", "key": "k"}]
    first = client.acquire_all(items)
    second = client.acquire_all(items)
    assert len(recorder.requests) == 2
    assert not first.allowed and first.results[0].allowed and not first.results[1].allowed
    assert second == first
    assert client.acquire("b", key="k").cached


def test_disabled_cache_always_asks() -> None:
    recorder = Recorder(
        lambda r, n: decision_response(429, allowed=False, remaining=0, retry_after_ms=60_000)
    )
    for client in (recorder.client(denial_cache=False), recorder.client(denial_cache_size=0)):
        client.acquire("r")
        assert not client.acquire("r").cached
    assert len(recorder.requests) == 4
