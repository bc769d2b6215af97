"""A FastAPI (or Starlette-routed) dependency that rate-limits an endpoint.

    from fastapi import Depends, FastAPI
    from ratekeeper import AsyncClient
    from ratekeeper.fastapi import RateLimit

    limiter = AsyncClient("http://127.0.0.1:8080", api_key)
    app = FastAPI()

    @app.post("/orders", dependencies=[Depends(RateLimit(limiter, "orders.create"))])
    async def create_order() -> dict[str, str]: ...

A denial answers 429 with ``Retry-After`` and the ``RateLimit`` headers; a grant passes
the ``RateLimit`` headers on to the response. (This module does not use postponed
annotations: FastAPI reads the ``__call__`` signature at run time.)
"""

from collections.abc import Awaitable, Callable

from fastapi import HTTPException, Request, Response

from ._web import AnyClient, acquire, headers_for, resolve
from .models import Decision

__all__ = ["RateLimit"]

KeyFunc = Callable[[Request], str | None] | Callable[[Request], Awaitable[str | None]]
ResourceFunc = Callable[[Request], str] | Callable[[Request], Awaitable[str]]


class RateLimit:
    """A dependency (``Depends(RateLimit(client, "orders.create", key=...))``).

    Args:
        client: a :class:`ratekeeper.AsyncClient` (or a :class:`ratekeeper.Client`, called
            in a worker thread).
        resource: the policy name, or a function of the request giving it.
        key: a function of the request giving the caller's key on a ``per_key`` policy
            (such as a user id or ``request.client.host``); sync or async.
        permits: permits per request.
        fail_open: overrides the client's default when the server cannot be reached.
        wait: seconds a request may wait for its permit instead of being denied at once.

    The dependency's value is the :class:`ratekeeper.Decision`. A denial raises
    ``HTTPException(429)`` with ``Retry-After`` and the ``RateLimit`` headers; a
    fail-closed decision made without the server (degraded) raises 503. Errors of the
    client (an unknown policy, a bad key) propagate.
    """

    def __init__(
        self,
        client: AnyClient,
        resource: str | ResourceFunc,
        key: KeyFunc | None = None,
        permits: int = 1,
        fail_open: bool | None = None,
        wait: float | None = None,
    ) -> None:
        self.client = client
        self.resource = resource
        self.key = key
        self.permits = permits
        self.fail_open = fail_open
        self.wait = wait

    async def __call__(self, request: Request, response: Response) -> Decision:
        resource: str = await resolve(self.resource, request)
        key: str | None = None if self.key is None else await resolve(self.key, request)
        decision = await acquire(
            self.client, resource, self.permits, key, self.fail_open, self.wait
        )
        headers = headers_for(decision)
        if decision.allowed:
            for name, value in headers.items():
                response.headers[name] = value
            return decision
        if decision.degraded:
            raise HTTPException(status_code=503, detail="rate limiter unavailable")
        raise HTTPException(
            status_code=429,
            detail=f"rate limited: retry after {decision.retry_after_ms} ms",
            headers=headers,
        )
