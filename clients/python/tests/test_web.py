"""The FastAPI dependency and the ASGI middleware, through Starlette's TestClient, against
the real server."""

from __future__ import annotations

import pytest
from conftest import Live
from fakes import refused_url
from fastapi import Depends, FastAPI, Request
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route
from starlette.testclient import TestClient

import ratekeeper
from ratekeeper.asgi import RateLimitMiddleware
from ratekeeper.fastapi import RateLimit


def fastapi_app(limiter: RateLimit) -> FastAPI:
    app = FastAPI()

    @app.get("/orders")
    async def orders(decision: ratekeeper.Decision = Depends(limiter)) -> dict[str, object]:
        return {"remaining": decision.remaining}

    return app


@pytest.mark.parametrize("kind", ["async", "sync"])
def test_fastapi_dependency_grants_then_answers_429(live: Live, kind: str) -> None:
    name = live.policy(rate=0.001, max_permits=2, scope="per_key")
    client: ratekeeper.Client | ratekeeper.AsyncClient = (
        ratekeeper.AsyncClient(live.url, live.key)
        if kind == "async"
        else ratekeeper.Client(live.url, live.key)
    )
    limiter = RateLimit(client, name, key=lambda request: request.headers.get("x-user", "anon"))
    with TestClient(fastapi_app(limiter)) as http:
        first = http.get("/orders", headers={"x-user": "u1"})
        assert first.status_code == 200 and first.json() == {"remaining": 1}
        assert "ratelimit" in first.headers and "ratelimit-policy" in first.headers
        assert http.get("/orders", headers={"x-user": "u1"}).status_code == 200
        denied = http.get("/orders", headers={"x-user": "u1"})
        assert denied.status_code == 429
        assert int(denied.headers["retry-after"]) >= 1
        assert "ratelimit" in denied.headers and "ratelimit-policy" in denied.headers
        cached = http.get("/orders", headers={"x-user": "u1"})  # answered by the cache
        assert cached.status_code == 429 and int(cached.headers["retry-after"]) >= 1
        assert http.get("/orders", headers={"x-user": "u2"}).status_code == 200


def test_fastapi_dependency_with_an_async_key_and_resource_function(live: Live) -> None:
    name = live.policy(rate=0.001, max_permits=1, scope="per_key")

    async def key(request: Request) -> str:
        return request.query_params.get("user", "anon")

    limiter = RateLimit(ratekeeper.AsyncClient(live.url, live.key), lambda r: name, key=key)
    with TestClient(fastapi_app(limiter)) as http:
        assert http.get("/orders?user=a").status_code == 200
        assert http.get("/orders?user=a").status_code == 429
        assert http.get("/orders?user=b").status_code == 200


def test_fastapi_dependency_fail_closed_without_the_server_is_503() -> None:
    limiter = RateLimit(ratekeeper.AsyncClient(refused_url(), "k", timeout=2), "r")
    with TestClient(fastapi_app(limiter)) as http:
        assert http.get("/orders").status_code == 503
    opened = RateLimit(ratekeeper.AsyncClient(refused_url(), "k", timeout=2), "r", fail_open=True)
    with TestClient(fastapi_app(opened)) as http:
        assert http.get("/orders").status_code == 200


def hello(request: object) -> PlainTextResponse:
    return PlainTextResponse("hello", headers={"x-app": "yes"})


def test_asgi_middleware(live: Live) -> None:
    name = live.policy(rate=0.001, max_permits=2, scope="per_key")
    starlette = Starlette(routes=[Route("/", hello), Route("/health", hello)])
    app = RateLimitMiddleware(
        starlette,
        client=ratekeeper.AsyncClient(live.url, live.key),
        resource=lambda scope: None if scope["path"] == "/health" else name,
        key=lambda scope: dict(scope["headers"]).get(b"x-user", b"anon").decode(),
    )
    with TestClient(app) as http:
        granted = http.get("/", headers={"x-user": "a"})
        assert granted.status_code == 200 and granted.text == "hello"
        assert granted.headers["x-app"] == "yes"
        assert "ratelimit" in granted.headers and "ratelimit-policy" in granted.headers
        assert http.get("/", headers={"x-user": "a"}).status_code == 200
        denied = http.get("/", headers={"x-user": "a"})
        assert denied.status_code == 429
        assert denied.json()["retry_after_ms"] > 0
        assert int(denied.headers["retry-after"]) >= 1
        assert "ratelimit" in denied.headers and "ratelimit-policy" in denied.headers
        for _ in range(3):
            assert http.get("/health", headers={"x-user": "a"}).status_code == 200
        assert http.get("/", headers={"x-user": "b"}).status_code == 200


def test_asgi_middleware_with_a_sync_client_and_fail_modes(live: Live) -> None:
    name = live.policy(rate=0.001, max_permits=1)
    app = RateLimitMiddleware(
        Starlette(routes=[Route("/", hello)]),
        client=ratekeeper.Client(live.url, live.key),
        resource=name,
    )
    with TestClient(app) as http:
        assert http.get("/").status_code == 200
        assert http.get("/").status_code == 429
    down = RateLimitMiddleware(
        Starlette(routes=[Route("/", hello)]),
        client=ratekeeper.AsyncClient(refused_url(), "k", timeout=2),
        resource="r",
    )
    with TestClient(down) as http:
        assert http.get("/").status_code == 503


def test_asgi_middleware_passes_other_scopes_through() -> None:
    seen: list[str] = []

    async def app(scope: dict[str, object], receive: object, send: object) -> None:
        seen.append(str(scope["type"]))
        if scope["type"] == "lifespan":
            message = await receive()  # type: ignore[operator]
            assert message["type"] == "lifespan.startup"
            await send({"type": "lifespan.startup.complete"})  # type: ignore[operator]
            message = await receive()  # type: ignore[operator]
            await send({"type": "lifespan.shutdown.complete"})  # type: ignore[operator]

    client = ratekeeper.AsyncClient(refused_url(), "k")
    with TestClient(RateLimitMiddleware(app, client=client, resource="r")):
        pass
    assert seen == ["lifespan"]
