"""The asyncio (and trio, through anyio) client: the same API as :class:`ratekeeper.Client`."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any

import anyio
import httpx

from ._core import (
    DEFAULT_TIMEOUT,
    Core,
    Failure,
    Flow,
    Item,
    Outcome,
    Reply,
    Send,
    Sleep,
    failure_from,
    normalize_base_url,
    request_headers,
)
from .errors import RatekeeperError, RateLimited
from .models import AllDecision, Decision, Release

__all__ = ["AsyncClient"]


class AsyncClient:
    """The async twin of :class:`ratekeeper.Client`: same arguments, awaitable methods.

    ``http_client`` takes an ``httpx.AsyncClient``. Use ``async with`` or ``await
    aclose()`` to close it.
    """

    def __init__(
        self,
        url: str,
        api_key: str,
        timeout: float = DEFAULT_TIMEOUT,
        fail_open: bool = False,
        denial_cache_size: int = 10_000,
        *,
        denial_cache: bool = True,
        http_client: httpx.AsyncClient | None = None,
    ) -> None:
        self.url = normalize_base_url(url)
        self._core = Core(
            timeout=timeout,
            fail_open=fail_open,
            denial_cache_size=denial_cache_size if denial_cache else 0,
        )
        self._headers = request_headers(api_key)
        self._own_http = http_client is None
        self._http = http_client if http_client is not None else httpx.AsyncClient()
        self._sleep: Callable[[float], Awaitable[None]] = anyio.sleep

    @property
    def timeout(self) -> float:
        return self._core.timeout

    @property
    def fail_open(self) -> bool:
        return self._core.fail_open

    @property
    def denial_cache(self) -> Any:
        """The local denial cache (``len()`` of it, ``clear()``)."""
        return self._core.cache

    def __repr__(self) -> str:
        return (
            f"AsyncClient(url={self.url!r}, timeout={self.timeout!r}, "
            f"fail_open={self.fail_open!r}, "
            f"denial_cache_size={self._core.cache.max_entries!r})"
        )

    async def aclose(self) -> None:
        if self._own_http:
            await self._http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # --- the API --------------------------------------------------------------------------

    async def acquire(
        self,
        resource: str,
        permits: int = 1,
        key: str | None = None,
        fail_open: bool | None = None,
        timeout: float | None = None,
        wait: float | None = None,
    ) -> Decision:
        """See :meth:`ratekeeper.Client.acquire`."""
        result: Decision = await self._run(
            self._core.acquire(resource, permits, key, fail_open, timeout, wait)
        )
        return result

    async def check(
        self,
        resource: str,
        key: str | None = None,
        fail_open: bool | None = None,
        timeout: float | None = None,
    ) -> Decision:
        """See :meth:`ratekeeper.Client.check`."""
        return await self.acquire(resource, 0, key, fail_open=fail_open, timeout=timeout)

    async def acquire_all(
        self,
        items: Sequence[Item],
        fail_open: bool | None = None,
        timeout: float | None = None,
    ) -> AllDecision:
        """See :meth:`ratekeeper.Client.acquire_all`."""
        result: AllDecision = await self._run(self._core.acquire_all(items, fail_open, timeout))
        return result

    async def refund(
        self,
        resource: str,
        permits: int,
        key: str | None = None,
        timeout: float | None = None,
    ) -> Decision:
        """See :meth:`ratekeeper.Client.refund`."""
        result: Decision = await self._run(self._core.refund(resource, permits, key, timeout))
        return result

    async def release(
        self,
        resource: str,
        lease_id: str,
        key: str | None = None,
        timeout: float | None = None,
    ) -> Release:
        """See :meth:`ratekeeper.Client.release`."""
        result: Release = await self._run(self._core.release(resource, lease_id, key, timeout))
        return result

    @contextlib.asynccontextmanager
    async def lease(
        self,
        resource: str,
        permits: int = 1,
        key: str | None = None,
        fail_open: bool | None = None,
        timeout: float | None = None,
        wait: float | None = None,
    ) -> AsyncIterator[Decision]:
        """See :meth:`ratekeeper.Client.lease` (``async with``)."""
        decision = await self.acquire(resource, permits, key, fail_open, timeout, wait)
        if not decision.allowed:
            raise RateLimited(decision)
        try:
            yield decision
        except BaseException:
            if decision.lease_id is not None:
                with contextlib.suppress(RatekeeperError):
                    await self.release(resource, decision.lease_id, key, timeout)
            raise
        if decision.lease_id is not None:
            await self.release(resource, decision.lease_id, key, timeout)

    # --- the I/O --------------------------------------------------------------------------

    async def _run(self, flow: Flow) -> Any:
        try:
            action = next(flow)
            while True:
                outcome: Outcome
                if isinstance(action, Sleep):
                    await self._sleep(action.seconds)
                    outcome = None
                else:
                    outcome = await self._send(action)
                action = flow.send(outcome)
        except StopIteration as stop:
            return stop.value

    async def _send(self, send: Send) -> Outcome:
        response: httpx.Response | None = None
        try:
            # httpx's timeouts bound each phase; this bounds the whole request.
            with anyio.move_on_after(send.timeout):
                response = await self._http.post(
                    self.url + send.path,
                    content=json.dumps(send.body).encode(),
                    headers=self._headers,
                    timeout=httpx.Timeout(send.timeout),
                )
        except httpx.TransportError as exc:
            return failure_from(exc)
        if response is None:
            return Failure(connect=False, message=f"timed out after {send.timeout:g} s")
        return Reply(response.status_code, response.headers, response.content)
