"""The values the client returns."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = ["AllDecision", "Decision", "Release"]


@dataclass(frozen=True)
class Decision:
    """The answer to one acquire (or check, or refund).

    Attributes:
        allowed: whether the permits were granted.
        remaining: permits left after this decision (``None`` when unknown, as in a
            degraded decision).
        limit: the policy's ``max_permits`` for this caller (``None`` when unknown).
        retry_after_ms: on a denial, when the permits will be there; 0 on a grant.
        reset_after_ms: when the bucket will be full again (``None`` when unknown).
        degraded: the decision was not made against the shared state: the server could not
            be reached (``allowed`` is then the call's ``fail_open``), or the server could
            not reach its store and the policy fails open.
        cached: the denial was answered from the local denial cache, without a request.
        policy_version: the version of the policy that decided.
        enforced: ``False`` when the policy is disabled (granted without counting).
        shadow_denied: the policy is in shadow mode and would have denied this request.
        lease_id: the lease of a granted ``concurrency`` permit (give it back with
            ``release``).
        headers: the ``RateLimit``, ``RateLimit-Policy`` and ``Retry-After`` headers of the
            answer, as the server sent them (absent ones are left out).
    """

    allowed: bool
    remaining: int | None = None
    limit: int | None = None
    retry_after_ms: int = 0
    reset_after_ms: int | None = None
    degraded: bool = False
    cached: bool = False
    policy_version: int | None = None
    enforced: bool = True
    shadow_denied: bool = False
    lease_id: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict, hash=False, compare=False)


@dataclass(frozen=True)
class AllDecision:
    """The answer to ``acquire_all``: granted only when every item is.

    ``results`` holds one :class:`Decision` per item, in order. ``headers`` are those of
    the whole answer (the most restrictive item's).
    """

    allowed: bool
    results: tuple[Decision, ...]
    headers: Mapping[str, str] = field(default_factory=dict, hash=False, compare=False)

    @property
    def degraded(self) -> bool:
        """Whether any item's decision is degraded."""
        return any(r.degraded for r in self.results)


@dataclass(frozen=True)
class Release:
    """The answer to ``release``."""

    released: bool
    permits: int
    remaining: int
