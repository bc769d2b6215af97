"""An ASGI middleware that rate-limits every HTTP request (Starlette, FastAPI, Quart, ...).

    from ratekeeper import AsyncClient
    from ratekeeper.asgi import RateLimitMiddleware

    app = RateLimitMiddleware(
        app,
        client=AsyncClient("http://127.0.0.1:8080", api_key),
        resource="api.requests",
        key=lambda scope: scope["client"][0] if scope.get("client") else None,
    )

Denied requests are answered 429 (JSON body) with ``Retry-After`` and the ``RateLimit``
headers, without reaching the application; granted ones go on with the ``RateLimit``
headers added to their response.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from ._web import AnyClient, acquire, headers_for, resolve
from .models import Decision

__all__ = ["RateLimitMiddleware"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

ScopeFunc = Callable[[Scope], Any]


class RateLimitMiddleware:
    """Acquire ``permits`` of ``resource`` for each HTTP request.

    Args:
        app: the ASGI application to protect.
        client: a :class:`ratekeeper.AsyncClient` (or a :class:`ratekeeper.Client`, called
            in a worker thread).
        resource: the policy name, or a function of the ASGI scope giving it (``None``:
            this request is not limited).
        key: a function of the ASGI scope giving the caller's key (sync or async).
        permits: permits per request.
        fail_open: overrides the client's default when the server cannot be reached.
        wait: seconds a request may wait for its permit instead of being denied at once.

    A fail-closed decision made without the server (degraded) answers 503.
    """

    def __init__(
        self,
        app: ASGIApp,
        client: AnyClient,
        resource: str | ScopeFunc,
        key: ScopeFunc | None = None,
        permits: int = 1,
        fail_open: bool | None = None,
        wait: float | None = None,
    ) -> None:
        self.app = app
        self.client = client
        self.resource = resource
        self.key = key
        self.permits = permits
        self.fail_open = fail_open
        self.wait = wait

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get("type") != "http":
            await self.app(scope, receive, send)
            return
        resource: str | None = await resolve(self.resource, scope)
        if resource is None:
            await self.app(scope, receive, send)
            return
        key: str | None = None if self.key is None else await resolve(self.key, scope)
        decision = await acquire(
            self.client, resource, self.permits, key, self.fail_open, self.wait
        )
        headers = headers_for(decision)
        if not decision.allowed:
            await _refuse(send, decision, headers)
            return
        extra = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers.items()]

        async def send_with_headers(message: Message) -> None:
            if message.get("type") == "http.response.start" and extra:
                message = dict(message)
                message["headers"] = [*message.get("headers", []), *extra]
            await send(message)

        await self.app(scope, receive, send_with_headers)


async def _refuse(send: Send, decision: Decision, headers: dict[str, str]) -> None:
    body: dict[str, Any]
    if decision.degraded:
        status, body = 503, {"detail": "rate limiter unavailable"}
        headers = {}
    else:
        status = 429
        body = {"detail": "rate limited", "retry_after_ms": decision.retry_after_ms}
    payload = json.dumps(body).encode()
    raw = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(payload)).encode()),
        *((k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers.items()),
    ]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": payload})
