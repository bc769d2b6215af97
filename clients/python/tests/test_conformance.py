"""The shared conformance scenarios (clients/conformance/scenarios), played by this library.

One test per scenario file, named by its stem. Skipped unless ``RK_CONFORMANCE_FIXTURE``
names the fixture a conformance server wrote (``{"url", "prefix", "keys": {"caller",
"stranger"}, "unreachable_url"}``); ``RK_CONFORMANCE_SCENARIOS`` overrides where the
scenarios are. Each scenario gets fresh clients, so denial caches do not leak.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

import ratekeeper
from ratekeeper import AllDecision, Decision, RatekeeperError, RateLimited, Release

REPO_ROOT = Path(__file__).resolve().parents[3]
SCENARIOS = Path(
    os.environ.get("RK_CONFORMANCE_SCENARIOS", REPO_ROOT / "clients" / "conformance" / "scenarios")
)
FIXTURE = os.environ.get("RK_CONFORMANCE_FIXTURE")
BAD_KEY = "rk_live_madeupmadeupmadeupmadeupmadeup0"
# The timeout of calls whose step names none: generous, the machine may be busy.
DEFAULT_TIMEOUT = 5.0

ERROR_NAMES = {
    ratekeeper.BadRequest: "BadRequest",
    ratekeeper.Unauthorized: "Unauthorized",
    ratekeeper.Forbidden: "Forbidden",
    ratekeeper.NotFound: "NotFound",
    ratekeeper.Conflict: "Conflict",
    ratekeeper.Invalid: "Invalid",
    ratekeeper.Unavailable: "Unavailable",
    ratekeeper.TransportError: "TransportError",
}

PATHS = sorted(SCENARIOS.glob("*.json")) if SCENARIOS.is_dir() else []


def error_name(error: RatekeeperError) -> str:
    for cls, name in ERROR_NAMES.items():
        if type(error) is cls:
            return name
    return type(error).__name__


Outcome = Decision | AllDecision | Release | RatekeeperError


class Scenario:
    def __init__(self, path: Path, fixture: dict[str, Any]) -> None:
        self.data = json.loads(path.read_text())
        self.prefix: str = fixture["prefix"]
        keys = {
            "caller": fixture["keys"]["caller"],
            "stranger": fixture["keys"]["stranger"],
            "bad_key": BAD_KEY,
        }
        urls = {"real": fixture["url"], "unreachable": fixture["unreachable_url"]}
        self.clients = {
            (role, server): ratekeeper.Client(url, key, timeout=DEFAULT_TIMEOUT)
            for role, key in keys.items()
            for server, url in urls.items()
        }
        self.outcomes: list[Outcome] = []
        self.problems: list[str] = []

    def close(self) -> None:
        for client in self.clients.values():
            client.close()

    def run(self) -> list[str]:
        for index, step in enumerate(self.data["steps"]):
            expect: dict[str, Any] = step.get("expect", {})
            label = f"step {index} ({step['op']} {step.get('resource', '')})"
            started = time.monotonic()
            try:
                got = self.step(step)
            except RatekeeperError as error:
                self.outcomes.append(error)
                if "error" not in expect:
                    self.problems.append(f"{label}: unexpected {error!r}")
                    continue
                self.value(f"{label}.error", expect["error"], error_name(error))
                if "error_field" in expect:
                    self.value(f"{label}.error_field", expect["error_field"], error.field)
                continue
            elapsed_ms = (time.monotonic() - started) * 1000
            self.outcomes.append(got)
            if "error" in expect:
                self.problems.append(f"{label}: want {expect['error']}, got {got!r}")
                continue
            self.expect(label, expect, got)
            allowed = getattr(got, "allowed", True)
            if "wait_ms" in step and not allowed and elapsed_ms > step["wait_ms"]:
                self.problems.append(
                    f"{label}: a denied wait of {step['wait_ms']} ms took {elapsed_ms:.0f} ms"
                )
        return self.problems

    def step(self, step: dict[str, Any]) -> Decision | AllDecision | Release:
        client = self.clients[(step.get("as", "caller"), step.get("server", "real"))]
        resource = f"{self.prefix}.{step['resource']}" if "resource" in step else ""
        key = step.get("key")
        timeout = step["timeout_ms"] / 1000 if "timeout_ms" in step else None
        wait = step["wait_ms"] / 1000 if "wait_ms" in step else None
        fail_open = step.get("fail_open")
        op = step["op"]
        if op == "acquire":
            return client.acquire(
                resource, step.get("permits", 1), key, fail_open, timeout=timeout, wait=wait
            )
        if op == "check":
            return client.check(resource, key, fail_open=fail_open, timeout=timeout)
        if op == "acquire_all":
            items = [
                {**item, "resource": f"{self.prefix}.{item['resource']}"} for item in step["items"]
            ]
            return client.acquire_all(items, fail_open=fail_open, timeout=timeout)
        if op == "refund":
            return client.refund(resource, step.get("permits", 1), key, timeout=timeout)
        if op == "release":
            source = self.outcomes[step["lease_id_from"]]
            lease_id = getattr(source, "lease_id", None)
            if not lease_id:
                raise AssertionError(f"step {step['lease_id_from']} has no lease_id")
            return client.release(resource, lease_id, key, timeout=timeout)
        if op == "lease":
            try:
                with client.lease(
                    resource, step.get("permits", 1), key, fail_open, timeout=timeout, wait=wait
                ) as decision:
                    return decision
            except RateLimited as denied:
                return denied.decision
        raise AssertionError(f"unknown op {op!r}")

    def expect(self, label: str, expect: dict[str, Any], got: Any) -> None:
        for field, want in expect.items():
            if field in ("error", "error_field"):
                continue
            if field == "results":
                results = getattr(got, "results", None)
                if results is None or len(results) != len(want):
                    self.problems.append(f"{label}.results: want {len(want)}, got {results!r}")
                    continue
                for i, (item_expect, item) in enumerate(zip(want, results, strict=True)):
                    self.expect(f"{label}.results[{i}]", item_expect, item)
            elif field == "headers":
                headers = {k.lower(): v for k, v in getattr(got, "headers", {}).items()}
                for name, value in want.items():
                    have = headers.get(name.lower())
                    if value == "present":
                        if have is None:
                            self.problems.append(f"{label}: header {name} absent")
                    elif have != value:
                        self.problems.append(
                            f"{label}: header {name}: want {value!r}, got {have!r}"
                        )
            elif field == "has_lease_id":
                self.value(f"{label}.has_lease_id", want, bool(getattr(got, "lease_id", None)))
            elif not hasattr(got, field):
                self.problems.append(f"{label}: {type(got).__name__} has no {field}")
            else:
                self.value(f"{label}.{field}", want, getattr(got, field))

    def value(self, label: str, want: Any, got: Any) -> None:
        if isinstance(want, dict):
            if not isinstance(got, (int, float)) or isinstance(got, bool):
                self.problems.append(f"{label}: want {want}, got {got!r}")
                return
            if "min" in want and got < want["min"]:
                self.problems.append(f"{label}: want at least {want['min']}, got {got}")
            if "max" in want and got > want["max"]:
                self.problems.append(f"{label}: want at most {want['max']}, got {got}")
            return
        same_kind = isinstance(want, bool) == isinstance(got, bool)
        if want != got or not same_kind:
            self.problems.append(f"{label}: want {want!r}, got {got!r}")


@pytest.mark.parametrize("path", PATHS, ids=[p.stem for p in PATHS])
def test_scenario(path: Path) -> None:
    if not FIXTURE:
        pytest.skip("RK_CONFORMANCE_FIXTURE is not set")
    fixture = json.loads(Path(FIXTURE).read_text())
    scenario = Scenario(path, fixture)
    try:
        problems = scenario.run()
    finally:
        scenario.close()
    assert not problems, "\n".join([scenario.data.get("description", ""), *problems])


@pytest.mark.skipif(not FIXTURE, reason="RK_CONFORMANCE_FIXTURE is not set")
def test_scenarios_are_there() -> None:
    assert PATHS, f"no scenario (*.json) in {SCENARIOS}"
