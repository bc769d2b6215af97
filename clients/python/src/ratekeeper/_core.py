"""What the sync and async clients share: requests, answers, retries, waits and cache.

Each operation is a generator that yields what it needs done (send a request, sleep) and
is sent the outcome; :mod:`ratekeeper.client` and :mod:`ratekeeper.aio` drive the same
generators with httpx's sync and async clients, so both behave alike by construction.
"""

from __future__ import annotations

import json
import math
import random
import time
from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import httpx

from ._cache import DenialCache
from ._version import __version__
from .errors import (
    RatekeeperError,
    TransportError,
    UnexpectedResponse,
    error_class,
)
from .models import AllDecision, Decision, Release

USER_AGENT = f"ratekeeper-python/{__version__}"
DEFAULT_TIMEOUT = 1.0
MAX_RETRIES = 2
BACKOFF_BASE = 0.05
# What a wait adds to a retry time (seconds): never zero, so a wait never spins.
WAIT_JITTER_MIN = 0.002
WAIT_JITTER_MAX = 0.020
RAW_HEADERS = ("RateLimit", "RateLimit-Policy", "Retry-After")

Item = Mapping[str, Any]


@dataclass(frozen=True)
class Send:
    """Send one HTTP request; the driver answers a :class:`Reply` or a :class:`Failure`."""

    path: str
    body: dict[str, Any]
    timeout: float


@dataclass(frozen=True)
class Sleep:
    seconds: float


@dataclass(frozen=True)
class Reply:
    status: int
    headers: Mapping[str, str]
    body: bytes


@dataclass(frozen=True)
class Failure:
    """The request failed in transit. ``connect``: it surely never reached the server."""

    connect: bool
    message: str


Action = Send | Sleep
Outcome = Reply | Failure | None
Flow = Generator[Action, Outcome, Any]


def failure_from(exc: Exception) -> Failure:
    """The :class:`Failure` an httpx exception stands for."""
    # A connect timeout is not retried: the call's time is spent anyway.
    connect = isinstance(exc, httpx.ConnectError)
    return Failure(connect=connect, message=f"{type(exc).__name__}: {exc}".rstrip(": "))


def request_headers(api_key: str) -> dict[str, str]:
    return {
        "Authorization": f"Bearer {api_key}",
        "User-Agent": USER_AGENT,
        "Content-Type": "application/json",
        "Accept": "application/json",
    }


def normalize_base_url(url: str) -> str:
    url = url.strip()
    if not url.startswith(("http://", "https://")):
        raise ValueError(f"the server URL must start with http:// or https://, not {url!r}")
    return url.rstrip("/")


def check_timeout(value: float | None, default: float) -> float:
    timeout = default if value is None else float(value)
    if not timeout > 0:
        raise ValueError("timeout must be > 0 seconds")
    return timeout


class Core:
    """The state and flows a client is made of (everything but the I/O)."""

    def __init__(
        self,
        *,
        timeout: float,
        fail_open: bool,
        denial_cache_size: int,
        rng: random.Random | None = None,
    ) -> None:
        self.timeout = check_timeout(timeout, DEFAULT_TIMEOUT)
        self.fail_open = bool(fail_open)
        self.cache = DenialCache(denial_cache_size)
        self._rng = rng or random.Random()

    # --- one request, with retries on connection failures only -----------------------

    def request(self, path: str, body: dict[str, Any], timeout: float) -> Flow:
        """Send ``body``; retry at most twice when it could not connect, within ``timeout``.

        Returns the :class:`Reply`, or the last :class:`Failure`.
        """
        deadline = time.monotonic() + timeout
        attempt = 0
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return Failure(connect=False, message=f"timed out after {timeout:g} s")
            outcome = yield Send(path, body, left)
            if isinstance(outcome, Reply):
                return outcome
            assert isinstance(outcome, Failure)
            if not outcome.connect or attempt >= MAX_RETRIES:
                return outcome
            pause = BACKOFF_BASE * (2**attempt) * self._rng.uniform(0.5, 1.5)
            if time.monotonic() + pause >= deadline:
                return outcome
            attempt += 1
            yield Sleep(pause)

    # --- acquire ------------------------------------------------------------------------

    def acquire(
        self,
        resource: str,
        permits: int,
        key: str | None,
        fail_open: bool | None,
        timeout: float | None,
        wait: float | None,
    ) -> Flow:
        _check_resource(resource)
        _check_permits(permits)
        timeout_s = check_timeout(timeout, self.timeout)
        fail_open_now = self.fail_open if fail_open is None else bool(fail_open)
        wait_until = None if not wait or wait <= 0 else time.monotonic() + float(wait)
        body: dict[str, Any] = {"resource": resource, "permits": permits}
        if key is not None:
            body["key"] = key
        slept = False
        while True:
            # After sleeping out a retry time, ask the server (not the cache) again.
            decision = None if slept else self.cache.lookup(resource, key, permits)
            if decision is None:
                outcome = yield from self.request("/v1/acquire", body, timeout_s)
                if isinstance(outcome, Failure):
                    return degraded(fail_open_now)
                decision = parse_acquire(outcome)
                self.cache.record(resource, key, permits, decision)
            if decision.allowed or decision.degraded or wait_until is None:
                return decision
            pause = self.wait_pause(decision, wait_until)
            if pause is None:
                return decision
            yield Sleep(pause)
            slept = True

    def wait_pause(self, decision: Decision, wait_until: float) -> float | None:
        """How long to sleep before asking again, or ``None`` to answer the denial now."""
        left = wait_until - time.monotonic()
        retry = decision.retry_after_ms / 1000.0
        if retry > left:
            return None
        pause = retry + self._rng.uniform(WAIT_JITTER_MIN, WAIT_JITTER_MAX)
        return min(pause, max(left, WAIT_JITTER_MIN))

    def acquire_all(
        self,
        items: Sequence[Item],
        fail_open: bool | None,
        timeout: float | None,
    ) -> Flow:
        parsed = [_item(i, it) for i, it in enumerate(items)]
        timeout_s = check_timeout(timeout, self.timeout)
        fail_open_now = self.fail_open if fail_open is None else bool(fail_open)
        body = {"all": [_item_body(r, k, p) for r, k, p in parsed]}
        outcome = yield from self.request("/v1/acquire", body, timeout_s)
        if isinstance(outcome, Failure):
            one = degraded(fail_open_now)
            return AllDecision(allowed=fail_open_now, results=tuple(one for _ in parsed))
        answer = parse_acquire_all(outcome)
        for (resource, key, permits), decision in zip(parsed, answer.results, strict=False):
            self.cache.record(resource, key, permits, decision)
        return answer

    def refund(self, resource: str, permits: int, key: str | None, timeout: float | None) -> Flow:
        _check_resource(resource)
        _check_permits(permits)
        timeout_s = check_timeout(timeout, self.timeout)
        body: dict[str, Any] = {"resource": resource, "permits": permits}
        if key is not None:
            body["key"] = key
        self.cache.forget(resource, key)
        outcome = yield from self.request("/v1/refund", body, timeout_s)
        if isinstance(outcome, Failure):
            raise TransportError(outcome.message)
        self.cache.forget(resource, key)
        if outcome.status != 200:
            raise problem_error(outcome)
        return parse_decision_body(_json_object(outcome), _raw_headers(outcome.headers))

    def release(self, resource: str, lease_id: str, key: str | None, timeout: float | None) -> Flow:
        _check_resource(resource)
        if not isinstance(lease_id, str):
            raise TypeError("lease_id must be a string")
        timeout_s = check_timeout(timeout, self.timeout)
        body: dict[str, Any] = {"resource": resource, "lease_id": lease_id}
        if key is not None:
            body["key"] = key
        self.cache.forget(resource, key)
        outcome = yield from self.request("/v1/release", body, timeout_s)
        if isinstance(outcome, Failure):
            raise TransportError(outcome.message)
        self.cache.forget(resource, key)
        if outcome.status != 200:
            raise problem_error(outcome)
        data = _json_object(outcome)
        try:
            return Release(
                released=bool(data["released"]),
                permits=int(data["permits"]),
                remaining=int(data["remaining"]),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise _unexpected(outcome, f"not a release reply: {exc}") from None


# --- answers ------------------------------------------------------------------------------


def degraded(allowed: bool) -> Decision:
    """The decision of a call that could not reach the server."""
    return Decision(allowed=allowed, degraded=True)


def parse_acquire(reply: Reply) -> Decision:
    if reply.status not in (200, 429):
        raise problem_error(reply)
    return parse_decision_body(_json_object(reply), _raw_headers(reply.headers))


def parse_acquire_all(reply: Reply) -> AllDecision:
    if reply.status not in (200, 429):
        raise problem_error(reply)
    data = _json_object(reply)
    results = data.get("results")
    if not isinstance(results, list):
        raise _unexpected(reply, "an acquire_all reply without results")
    decisions = []
    for result in results:
        if not isinstance(result, dict):
            raise _unexpected(reply, "an acquire_all result that is not an object")
        decisions.append(parse_decision_body(result, {}))
    return AllDecision(
        allowed=bool(data.get("allowed")),
        results=tuple(decisions),
        headers=_raw_headers(reply.headers),
    )


def parse_decision_body(data: Mapping[str, Any], headers: Mapping[str, str]) -> Decision:
    allowed = data.get("allowed")
    if not isinstance(allowed, bool):
        raise UnexpectedResponse("a decision without allowed", status=None)
    return Decision(
        allowed=allowed,
        remaining=_opt_int(data.get("remaining")),
        limit=_opt_int(data.get("limit")),
        retry_after_ms=_opt_int(data.get("retry_after_ms")) or 0,
        reset_after_ms=_opt_int(data.get("reset_after_ms")),
        degraded=data.get("degraded") is True,
        cached=False,
        policy_version=_opt_int(data.get("policy_version")),
        enforced=data.get("enforced") is not False,
        shadow_denied=data.get("shadow_denied") is True,
        lease_id=data.get("lease_id") if isinstance(data.get("lease_id"), str) else None,
        headers=dict(headers),
    )


def problem_error(reply: Reply) -> RatekeeperError:
    """The error a non-decision answer stands for (from its problem+json body if any)."""
    cls = error_class(reply.status)
    data: Mapping[str, Any] = {}
    try:
        parsed = json.loads(reply.body) if reply.body else None
        if isinstance(parsed, dict):
            data = parsed
    except ValueError:
        pass
    detail = data.get("detail")
    if not isinstance(detail, str) or not detail:
        text = reply.body[:200].decode("utf-8", "replace").strip()
        detail = text or f"HTTP {reply.status}"
    errors = data.get("errors")
    error_list = [e for e in errors if isinstance(e, dict)] if isinstance(errors, list) else []
    field = data.get("field")
    if not error_list and isinstance(field, str):
        error_list = [{"field": field}]
    kind = data.get("type")
    title = data.get("title")
    return cls(
        detail,
        status=reply.status,
        type=kind if isinstance(kind, str) else "about:blank",
        title=title if isinstance(title, str) else "",
        errors=error_list,
    )


def _unexpected(reply: Reply, detail: str) -> UnexpectedResponse:
    return UnexpectedResponse(detail, status=reply.status)


def _json_object(reply: Reply) -> dict[str, Any]:
    try:
        data = json.loads(reply.body)
    except ValueError:
        raise _unexpected(reply, "the answer is not JSON") from None
    if not isinstance(data, dict):
        raise _unexpected(reply, "the answer is not a JSON object")
    return data


def _raw_headers(headers: Mapping[str, str]) -> dict[str, str]:
    lower = {k.lower(): v for k, v in headers.items()}
    return {name: lower[name.lower()] for name in RAW_HEADERS if name.lower() in lower}


def _opt_int(value: Any) -> int | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and math.isfinite(value):
        return int(value)
    return None


# Values are the server's to judge (it answers 400/422 naming the field); the client only
# refuses what cannot be sent as the API's JSON types.


def _check_resource(resource: str) -> None:
    if not isinstance(resource, str):
        raise TypeError("resource must be a string")


def _check_permits(permits: int) -> None:
    if isinstance(permits, bool) or not isinstance(permits, int):
        raise TypeError("permits must be an int")


def _item(index: int, item: Item) -> tuple[str, str | None, int]:
    if not isinstance(item, Mapping):
        raise TypeError(f"items[{index}] must be a mapping with resource, key?, permits?")
    unknown = set(item) - {"resource", "key", "permits"}
    if unknown:
        raise ValueError(f"items[{index}]: unknown field(s) {sorted(unknown)}")
    resource = item.get("resource")
    if not isinstance(resource, str):
        raise TypeError(f"items[{index}].resource must be a string")
    permits = item.get("permits", 1)
    _check_permits(permits)
    key = item.get("key")
    if key is not None and not isinstance(key, str):
        raise TypeError(f"items[{index}].key must be a string")
    return resource, key, permits


def _item_body(resource: str, key: str | None, permits: int) -> dict[str, Any]:
    body: dict[str, Any] = {"resource": resource, "permits": permits}
    if key is not None:
        body["key"] = key
    return body
