"""The synchronous client."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import httpx

from ._core import (
    DEFAULT_TIMEOUT,
    Core,
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

__all__ = ["Client"]


class Client:
    """A client of a ratekeeper server, for threads and plain code (safe to share).

    Args:
        url: the server's base URL, such as ``http://127.0.0.1:8080``.
        api_key: the application's API key (never shown by ``repr``).
        timeout: the default time a call may take, in seconds (retries included).
        fail_open: what a call that cannot reach the server answers by default:
            ``allowed=fail_open`` with ``degraded=True``.
        denial_cache_size: how many denials to remember locally (0 switches it off).
        denial_cache: ``False`` switches the local denial cache off.
        http_client: an ``httpx.Client`` of your own (its transport, proxies, TLS
            settings, event hooks); the client does not close it.
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
        http_client: httpx.Client | None = None,
    ) -> None:
        self.url = normalize_base_url(url)
        self._core = Core(
            timeout=timeout,
            fail_open=fail_open,
            denial_cache_size=denial_cache_size if denial_cache else 0,
        )
        self._headers = request_headers(api_key)
        self._own_http = http_client is None
        self._http = http_client if http_client is not None else httpx.Client()
        self._sleep: Callable[[float], None] = time.sleep

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
            f"Client(url={self.url!r}, timeout={self.timeout!r}, fail_open={self.fail_open!r}, "
            f"denial_cache_size={self._core.cache.max_entries!r})"
        )

    def close(self) -> None:
        if self._own_http:
            self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- the API --------------------------------------------------------------------------

    def acquire(
        self,
        resource: str,
        permits: int = 1,
        key: str | None = None,
        fail_open: bool | None = None,
        timeout: float | None = None,
        wait: float | None = None,
    ) -> Decision:
        """Ask for ``permits`` of ``resource`` (for ``key`` on a per-key policy).

        A grant and a denial are both a :class:`Decision`; a transport failure is a degraded
        one. With ``wait`` (seconds), a denial whose retry time fits in what is left of
        ``wait`` sleeps that long and asks again.
        """
        result: Decision = self._run(
            self._core.acquire(resource, permits, key, fail_open, timeout, wait)
        )
        return result

    def check(
        self,
        resource: str,
        key: str | None = None,
        fail_open: bool | None = None,
        timeout: float | None = None,
    ) -> Decision:
        """Whether one permit would be granted now, taking nothing (``permits=0``)."""
        return self.acquire(resource, 0, key, fail_open=fail_open, timeout=timeout)

    def acquire_all(
        self,
        items: Sequence[Item],
        fail_open: bool | None = None,
        timeout: float | None = None,
    ) -> AllDecision:
        """Acquire every item or none: ``[{"resource": ..., "key"?: ..., "permits"?: ...}]``."""
        result: AllDecision = self._run(self._core.acquire_all(items, fail_open, timeout))
        return result

    def refund(
        self,
        resource: str,
        permits: int,
        key: str | None = None,
        timeout: float | None = None,
    ) -> Decision:
        """Give back ``permits`` a grant took but the work did not use."""
        result: Decision = self._run(self._core.refund(resource, permits, key, timeout))
        return result

    def release(
        self,
        resource: str,
        lease_id: str,
        key: str | None = None,
        timeout: float | None = None,
    ) -> Release:
        """Give back a ``concurrency`` lease."""
        result: Release = self._run(self._core.release(resource, lease_id, key, timeout))
        return result

    @contextlib.contextmanager
    def lease(
        self,
        resource: str,
        permits: int = 1,
        key: str | None = None,
        fail_open: bool | None = None,
        timeout: float | None = None,
        wait: float | None = None,
    ) -> Iterator[Decision]:
        """Hold permits for the ``with`` block; raise :class:`RateLimited` when denied.

        On a ``concurrency`` policy the lease is released when the block ends (an error of
        that release is raised only when the block itself did not raise).
        """
        decision = self.acquire(resource, permits, key, fail_open, timeout, wait)
        if not decision.allowed:
            raise RateLimited(decision)
        try:
            yield decision
        except BaseException:
            if decision.lease_id is not None:
                with contextlib.suppress(RatekeeperError):
                    self.release(resource, decision.lease_id, key, timeout)
            raise
        if decision.lease_id is not None:
            self.release(resource, decision.lease_id, key, timeout)

    # --- the I/O --------------------------------------------------------------------------

    def _run(self, flow: Flow) -> Any:
        try:
            action = next(flow)
            while True:
                outcome: Outcome
                if isinstance(action, Sleep):
                    self._sleep(action.seconds)
                    outcome = None
                else:
                    outcome = self._send(action)
                action = flow.send(outcome)
        except StopIteration as stop:
            return stop.value

    def _send(self, send: Send) -> Outcome:
        try:
            response = self._http.post(
                self.url + send.path,
                content=json.dumps(send.body).encode(),
                headers=self._headers,
                timeout=httpx.Timeout(send.timeout),
            )
        except httpx.TransportError as exc:
            return failure_from(exc)
        return Reply(response.status_code, response.headers, response.content)
