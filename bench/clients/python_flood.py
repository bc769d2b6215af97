#!/usr/bin/env python3
"""A denied flood through the Python client, to show its local denial cache.

N threads share one client and call acquire in a loop for D seconds, spread over K keys
of a per-key policy with a tiny rate and a capacity of 1 (so nearly every call is
denied). Every HTTP request the client sends is counted (an httpx event hook), so the
output shows how many calls reached the server and, per key, the most server requests
seen within any one retry window (the longest retry_after_ms the server gave): with the
cache, a handful per key per window (a grant as the bucket refills, its denial, and the
calls other threads had in flight before that denial came back), where without it
(--no-cache) every call is a request. A run of 4 threads, 3 keys, 4 s at 0.5/s:
367,512 calls, 24 server requests, at most 5 per key per 2 s window; with --no-cache,
3,703 calls, all of them requests, up to 674 per key per window.

    # a policy such as
    #   {"name": "flood", "owner_app": "shop", "scope": "per_key", "rate": 0.5, "max_permits": 1}
    bench/clients/python_flood.py --url http://127.0.0.1:8080 --key "$KEY" \\
        --resource flood --threads 8 --duration 5 --keys 4

Prints one JSON object. Uses the package installed in the environment, else the one in
clients/python/src.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

try:
    import ratekeeper
except ImportError:  # run from a checkout: use its clients/python
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "clients" / "python" / "src"))
    import ratekeeper

import httpx


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default=os.environ.get("RATEKEEPER_URL", "http://127.0.0.1:8080"))
    parser.add_argument("--key", default=os.environ.get("RATEKEEPER_API_KEY"), help="API key")
    parser.add_argument("--resource", required=True, help="a per_key policy, tiny rate, capacity 1")
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--duration", type=float, default=5.0, help="seconds")
    parser.add_argument("--keys", type=int, default=4)
    parser.add_argument("--timeout", type=float, default=2.0, help="seconds per call")
    parser.add_argument("--no-cache", action="store_true", help="switch the denial cache off")
    args = parser.parse_args()
    if not args.key:
        parser.error("--key (or RATEKEEPER_API_KEY) is required")
    return args


def max_in_window(times: list[float], window: float) -> int:
    """The most timestamps within any half-open span of ``window`` seconds."""
    times = sorted(times)
    best = start = 0
    for end, t in enumerate(times):
        while t - times[start] >= window:
            start += 1
        best = max(best, end - start + 1)
    return best


def main() -> None:
    args = parse_args()
    lock = threading.Lock()
    sent: dict[str, list[float]] = defaultdict(list)  # key -> times of server requests

    def on_request(request: httpx.Request) -> None:
        body = json.loads(request.content or b"{}")
        with lock:
            sent[str(body.get("key"))].append(time.monotonic())

    http = httpx.Client(
        event_hooks={"request": [on_request]},
        limits=httpx.Limits(max_connections=args.threads, max_keepalive_connections=args.threads),
    )
    client = ratekeeper.Client(
        args.url,
        args.key,
        timeout=args.timeout,
        denial_cache=not args.no_cache,
        http_client=http,
    )
    totals: dict[str, int] = defaultdict(int)
    longest_retry_ms = 0
    errors: dict[str, int] = defaultdict(int)
    stop_at = time.monotonic() + args.duration

    def flood(worker: int) -> None:
        nonlocal longest_retry_ms
        mine: dict[str, int] = defaultdict(int)
        retry = 0
        i = worker
        while time.monotonic() < stop_at:
            key = f"flood-{i % args.keys}"
            i += 1
            try:
                decision = client.acquire(args.resource, key=key)
            except ratekeeper.RatekeeperError as error:
                with lock:
                    errors[type(error).__name__] += 1
                time.sleep(0.05)
                continue
            mine["calls"] += 1
            if decision.degraded:
                mine["degraded"] += 1
            elif decision.allowed:
                mine["grants"] += 1
            else:
                mine["denials"] += 1
                if decision.cached:
                    mine["cached_denials"] += 1
                else:
                    retry = max(retry, decision.retry_after_ms)
        with lock:
            for name, count in mine.items():
                totals[name] += count
            longest_retry_ms = max(longest_retry_ms, retry)

    started = time.monotonic()
    threads = [threading.Thread(target=flood, args=(n,)) for n in range(args.threads)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.monotonic() - started
    client.close()
    http.close()

    window = longest_retry_ms / 1000
    per_key = {
        key: {
            "server_requests": len(times),
            "max_per_retry_window": max_in_window(times, window) if window > 0 else None,
        }
        for key, times in sorted(sent.items())
    }
    report: dict[str, Any] = {
        "threads": args.threads,
        "duration_s": round(elapsed, 3),
        "keys": args.keys,
        "denial_cache": not args.no_cache,
        "calls": totals["calls"],
        "server_requests": sum(len(t) for t in sent.values()),
        "grants": totals["grants"],
        "denials": totals["denials"],
        "cached_denials": totals["cached_denials"],
        "degraded": totals["degraded"],
        "errors": dict(errors),
        "retry_after_window_ms": longest_retry_ms,
        "max_server_requests_per_key_per_window": max(
            (k["max_per_retry_window"] or 0 for k in per_key.values()), default=0
        ),
        "per_key": per_key,
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
