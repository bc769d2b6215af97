"""What the FastAPI dependency and the ASGI middleware share."""

from __future__ import annotations

import inspect
import math
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import anyio.to_thread

from .aio import AsyncClient
from .client import Client
from .models import Decision

T = TypeVar("T")
AnyClient = Client | AsyncClient


def retry_after_seconds(decision: Decision) -> int:
    """``Retry-After`` in whole seconds, at least 1."""
    return max(1, math.ceil(decision.retry_after_ms / 1000))


def headers_for(decision: Decision) -> dict[str, str]:
    """The headers to pass on to the caller: ``RateLimit``/``RateLimit-Policy`` when the
    server sent them, and on a denial ``Retry-After`` (always)."""
    out = {k: v for k, v in decision.headers.items() if k.lower() != "retry-after"}
    if not decision.allowed:
        out["Retry-After"] = decision.headers.get("Retry-After") or str(
            retry_after_seconds(decision)
        )
    return out


async def acquire(
    client: AnyClient,
    resource: str,
    permits: int,
    key: str | None,
    fail_open: bool | None,
    wait: float | None,
) -> Decision:
    """Acquire with either client; a sync one runs in a worker thread (no blocking)."""
    if isinstance(client, AsyncClient):
        return await client.acquire(resource, permits, key, fail_open=fail_open, wait=wait)

    def call() -> Decision:
        return client.acquire(resource, permits, key, fail_open=fail_open, wait=wait)

    return await anyio.to_thread.run_sync(call)


async def resolve(value: T | Callable[..., T | Awaitable[T]], arg: Any) -> T:
    """``value`` itself, or what the (sync or async) function ``value(arg)`` gives."""
    if not callable(value):
        return value
    result = value(arg)
    if inspect.isawaitable(result):
        return await result
    return result
