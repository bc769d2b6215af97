"""The local denial cache.

After a denial of ``permits`` on (resource, key) with a retry time, asking again for at
least as many permits before that time cannot be granted: the client answers it locally.
"""

from __future__ import annotations

import math
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

from .models import Decision

_CacheKey = tuple[str, str | None]

_T_PARAM = re.compile(r";t=\d+")


@dataclass(frozen=True)
class _Entry:
    permits: int
    until: float  # monotonic seconds
    decision: Decision


class DenialCache:
    """A bounded map of (resource, key) to the latest denial, safe across threads.

    ``max_entries`` 0 switches it off. When full, expired entries go first, then the
    oldest ones.
    """

    def __init__(
        self, max_entries: int = 10_000, clock: Callable[[], float] = time.monotonic
    ) -> None:
        if max_entries < 0:
            raise ValueError("max_entries must be >= 0")
        self.max_entries = max_entries
        self._clock = clock
        self._entries: OrderedDict[_CacheKey, _Entry] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    @property
    def enabled(self) -> bool:
        return self.max_entries > 0

    def lookup(self, resource: str, key: str | None, permits: int) -> Decision | None:
        """The local denial for this call, or ``None`` when it must go to the server."""
        if not self.enabled:
            return None
        now = self._clock()
        with self._lock:
            entry = self._entries.get((resource, key))
            if entry is None:
                return None
            if now >= entry.until:
                del self._entries[(resource, key)]
                return None
            if permits < entry.permits:
                return None
        left_ms = max(1, math.ceil((entry.until - now) * 1000))
        return _local_denial(entry.decision, left_ms)

    def record(self, resource: str, key: str | None, permits: int, decision: Decision) -> None:
        """Learn from a decision the server made: remember a denial, forget on a grant."""
        if not self.enabled:
            return
        if decision.degraded or decision.cached:
            return
        if decision.allowed:
            self.forget(resource, key)
            return
        if decision.retry_after_ms <= 0:
            return
        now = self._clock()
        entry = _Entry(permits, now + decision.retry_after_ms / 1000.0, decision)
        with self._lock:
            self._entries.pop((resource, key), None)
            if len(self._entries) >= self.max_entries:
                self._evict(now)
            self._entries[(resource, key)] = entry

    def forget(self, resource: str, key: str | None) -> None:
        if not self.enabled:
            return
        with self._lock:
            self._entries.pop((resource, key), None)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def _evict(self, now: float) -> None:
        expired = [k for k, e in self._entries.items() if now >= e.until]
        for k in expired:
            del self._entries[k]
        while len(self._entries) >= self.max_entries:
            self._entries.popitem(last=False)


def _local_denial(original: Decision, left_ms: int) -> Decision:
    reset = original.reset_after_ms
    if reset is not None:
        # The bucket's reset time moved on by as much as the retry time did.
        reset = max(left_ms, reset - (original.retry_after_ms - left_ms))
    return replace(
        original,
        allowed=False,
        remaining=0,
        retry_after_ms=left_ms,
        reset_after_ms=reset,
        cached=True,
        lease_id=None,
        headers=_aged_headers(original.headers, left_ms),
    )


def _aged_headers(headers: Mapping[str, str], left_ms: int) -> dict[str, str]:
    seconds = max(1, math.ceil(left_ms / 1000))
    out: dict[str, str] = {}
    for name, value in headers.items():
        if name.lower() == "retry-after":
            out[name] = str(seconds)
        elif name.lower() == "ratelimit":
            out[name] = _T_PARAM.sub(f";t={seconds}", value)
        else:
            out[name] = value
    if not any(n.lower() == "retry-after" for n in out):
        out["Retry-After"] = str(seconds)
    return out
