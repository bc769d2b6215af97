"""The soak's policies, one per algorithm and scope, and what each allows over a span.

Every bucket gets more requests than it may grant (the smallest share of the load, a
per_app bucket's, is 1/72 of it: 8 a second at 600 acquires a second), so each one is
worked at its limit and a grant beyond its bound shows. The bounds are the README's guarantees ("Algorithms")."""

import math

APPS = ("soak-a", "soak-b")
KEYS = ("k0", "k1", "k2", "k3")
SCOPES = ("global", "per_app", "per_key")

# algorithm -> the fields of its policies
ALGORITHMS = {
    "token_bucket": {"rate": 5, "max_permits": 10},
    "gcra": {"rate": 5, "max_permits": 10},
    "fixed_window": {"max_permits": 20, "window_ms": 5000},
    "sliding_window": {"max_permits": 20, "window_ms": 5000},
    "sliding_log": {"max_permits": 10, "window_ms": 5000},
    "concurrency": {"max_permits": 4, "lease_ttl_ms": 2000},
}


def policies():
    """(name, algorithm, scope, failure mode) of every loaded policy; failure modes
    alternate so that each algorithm and scope has policies of both."""
    out = []
    for a, algorithm in enumerate(ALGORITHMS):
        for s, scope in enumerate(SCOPES):
            mode = "closed" if (a + s) % 2 == 0 else "open"
            out.append((f"{algorithm}.{scope}", algorithm, scope, mode))
    return out


def policy_body(name, algorithm, scope, mode):
    return {"name": name, "owner_app": APPS[0], "algorithm": algorithm, "scope": scope,
            "failure_mode": mode, "allowed_apps": list(APPS), **ALGORITHMS[algorithm]}


def targets():
    """Every (policy, app, key) the load sends, and the bucket each draws from."""
    out = []
    for name, algorithm, scope, mode in policies():
        for app in APPS:
            keys = KEYS if scope == "per_key" else (None,)
            for key in keys:
                bucket = (name, app if scope == "per_app" else "", key or "")
                out.append({"policy": name, "algorithm": algorithm, "mode": mode,
                            "app": app, "key": key, "bucket": bucket})
    return out


def allowed(algorithm, start, end):
    """The most grants the algorithm allows to be decided within [start, end) (seconds on
    Redis' clock), whatever its state at start."""
    fields = ALGORITHMS[algorithm]
    most = fields["max_permits"]
    span = max(0.0, end - start)
    if algorithm in ("token_bucket", "gcra"):
        return most + fields["rate"] * span
    if algorithm in ("fixed_window", "sliding_window"):
        window = fields["window_ms"] / 1000
        # The aligned windows [start, end) touches (end itself is not in the span).
        return most * max(1, math.ceil(end / window) - math.floor(start / window))
    if algorithm == "sliding_log":
        return most * (1 + math.floor(span / (fields["window_ms"] / 1000)))
    if algorithm == "concurrency":
        return most * (1 + math.floor(span / (fields["lease_ttl_ms"] / 1000)))
    raise ValueError(algorithm)
