#!/usr/bin/env python3
"""The conformance scenarios played by a minimal client written here, with Python's
standard library alone (urllib). It exists to check the scenarios against a real server:
every expectation about what the server answers is verified by it, and the client-side
behaviours (denial cache, fail_open on an unreachable server, wait) are implemented only
as far as the scenarios need. It is no client library.

    RK_CONFORMANCE_FIXTURE=<dir>/ref.json clients/conformance/reference_runner.py [STEM...]

Prints one line per scenario and, last, `ref: tests: N passed, N failed`; exits 1 when a
scenario failed. Without RK_CONFORMANCE_FIXTURE every scenario is skipped.
"""

import json
import os
import pathlib
import random
import socket
import sys
import time
import urllib.error
import urllib.request

ROOT = pathlib.Path(__file__).resolve().parents[2]
USER_AGENT = "ratekeeper-conformance-reference/0"
ERRORS = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    409: "Conflict",
    422: "Invalid",
    503: "Unavailable",
}
# Booleans a reply leaves out when they have their usual value.
DEFAULTS = {"enforced": True, "degraded": False, "shadow_denied": False, "cached": False}


class RatekeeperError(Exception):
    def __init__(self, kind, status=None, type_uri=None, detail=None, errors=None, field=None):
        super().__init__(f"{kind} {status} {detail}")
        self.kind = kind
        self.status = status
        self.type_uri = type_uri
        self.detail = detail
        self.errors = errors or []
        self.field = field

    def first_field(self):
        if self.errors:
            return self.errors[0].get("field")
        return self.field


class Transport(Exception):
    """The request did not get an answer; `unsent` when it surely never reached the server."""

    def __init__(self, cause, unsent):
        super().__init__(str(cause))
        self.unsent = unsent


class Client:
    def __init__(self, url, api_key, timeout_ms=5000, fail_open=False, denial_cache=True):
        self.url = url.rstrip("/")
        self.api_key = api_key
        self.timeout_ms = timeout_ms
        self.fail_open = fail_open
        self.denial_cache = denial_cache
        self.denials = {}  # (resource, key) -> (permits, until (monotonic s), limit)

    # ------------------------------------------------------------------ transport
    def _post_once(self, path, body, timeout_s):
        request = urllib.request.Request(
            self.url + path,
            data=json.dumps(body).encode(),
            method="POST",
            headers={
                "Authorization": f"Bearer {self.api_key}",
                "Content-Type": "application/json",
                "User-Agent": USER_AGENT,
            },
        )
        try:
            with urllib.request.urlopen(request, timeout=timeout_s) as reply:
                return reply.status, dict(reply.headers.items()), reply.read()
        except urllib.error.HTTPError as error:
            return error.code, dict(error.headers.items()), error.read()
        except urllib.error.URLError as error:
            reason = error.reason
            unsent = isinstance(reason, (ConnectionRefusedError, socket.gaierror))
            raise Transport(reason, unsent) from error
        except (TimeoutError, ConnectionError, OSError) as error:
            raise Transport(error, isinstance(error, ConnectionRefusedError)) from error

    def _post(self, path, body, timeout_ms):
        budget = (timeout_ms or self.timeout_ms) / 1000
        deadline = time.monotonic() + budget
        attempt = 0
        while True:
            left = deadline - time.monotonic()
            try:
                return self._post_once(path, body, max(left, 0.001))
            except Transport as failure:
                pause = 0.05 * 2**attempt * random.uniform(0.5, 1.5)
                if not failure.unsent or attempt >= 2 or time.monotonic() + pause >= deadline:
                    raise
                time.sleep(pause)
                attempt += 1

    @staticmethod
    def _raise_problem(status, body):
        try:
            problem = json.loads(body)
        except ValueError:
            problem = {}
        raise RatekeeperError(
            ERRORS.get(status, "UnexpectedResponse"),
            status,
            problem.get("type"),
            problem.get("detail"),
            problem.get("errors"),
            problem.get("field"),
        )

    @staticmethod
    def _decision(reply, headers):
        decision = dict(DEFAULTS)
        decision.update(reply)
        decision["headers"] = headers
        return decision

    # ------------------------------------------------------------------ the calls
    def acquire(self, resource, permits=None, key=None, fail_open=None, timeout_ms=None, wait_ms=None):
        started = time.monotonic()
        while True:
            decision = self._acquire_once(resource, permits, key, fail_open, timeout_ms)
            if decision["allowed"] or wait_ms is None or decision.get("degraded"):
                return decision
            left_ms = wait_ms - (time.monotonic() - started) * 1000
            retry = decision.get("retry_after_ms") or 0
            if retry <= 0 or retry > left_ms:
                return decision
            time.sleep((retry + random.uniform(1, 10)) / 1000)

    def _acquire_once(self, resource, permits, key, fail_open, timeout_ms):
        wanted = 1 if permits is None else permits
        entry = self.denials.get((resource, key)) if self.denial_cache else None
        if entry is not None:
            denied_permits, until, limit = entry
            now = time.monotonic()
            if now >= until:
                del self.denials[(resource, key)]
            elif wanted >= denied_permits:
                decision = dict(DEFAULTS)
                decision.update(
                    allowed=False,
                    remaining=0,
                    limit=limit,
                    retry_after_ms=max(1, int((until - now) * 1000)),
                    cached=True,
                    headers={},
                )
                return decision
        body = {"resource": resource}
        if permits is not None:
            body["permits"] = permits
        if key is not None:
            body["key"] = key
        try:
            status, headers, raw = self._post("/v1/acquire", body, timeout_ms)
        except Transport:
            return self._degraded(fail_open)
        if status not in (200, 429):
            self._raise_problem(status, raw)
        decision = self._decision(json.loads(raw), headers)
        self._remember(resource, key, wanted, decision)
        return decision

    def _remember(self, resource, key, permits, decision):
        if not self.denial_cache:
            return
        if decision["allowed"]:
            self.denials.pop((resource, key), None)
        elif not decision["degraded"] and (decision.get("retry_after_ms") or 0) > 0:
            until = time.monotonic() + decision["retry_after_ms"] / 1000
            self.denials[(resource, key)] = (permits, until, decision.get("limit"))

    def _degraded(self, fail_open):
        decision = dict(DEFAULTS)
        decision.update(
            allowed=self.fail_open if fail_open is None else fail_open,
            degraded=True,
            headers={},
        )
        return decision

    def check(self, resource, key=None, **options):
        return self.acquire(resource, permits=0, key=key, **options)

    def acquire_all(self, items, fail_open=None, timeout_ms=None):
        try:
            status, headers, raw = self._post("/v1/acquire", {"all": items}, timeout_ms)
        except Transport:
            results = [self._degraded(fail_open) for _ in items]
            return {"allowed": all(r["allowed"] for r in results), "results": results, "headers": {}}
        if status not in (200, 429):
            self._raise_problem(status, raw)
        reply = json.loads(raw)
        results = [self._decision(r, {}) for r in reply["results"]]
        for item, result in zip(items, results):
            if not result["allowed"]:
                self._remember(item["resource"], item.get("key"), item.get("permits", 1), result)
        return {"allowed": reply["allowed"], "results": results, "headers": headers}

    def refund(self, resource, permits, key=None, timeout_ms=None):
        body = {"resource": resource, "permits": permits}
        if key is not None:
            body["key"] = key
        return self._plain("/v1/refund", body, resource, key, timeout_ms)

    def release(self, resource, lease_id, key=None, timeout_ms=None):
        body = {"resource": resource, "lease_id": lease_id}
        if key is not None:
            body["key"] = key
        return self._plain("/v1/release", body, resource, key, timeout_ms)

    def _plain(self, path, body, resource, key, timeout_ms):
        try:
            status, headers, raw = self._post(path, body, timeout_ms)
        except Transport as failure:
            raise RatekeeperError("TransportError", detail=str(failure)) from failure
        if status != 200:
            self._raise_problem(status, raw)
        self.denials.pop((resource, key), None)
        return self._decision(json.loads(raw), headers)


# ---------------------------------------------------------------------- the scenarios
def check_value(label, want, got, problems):
    if isinstance(want, dict):
        if not isinstance(got, (int, float)) or isinstance(got, bool):
            problems.append(f"{label}: want {want}, got {got!r}")
            return
        if "min" in want and got < want["min"]:
            problems.append(f"{label}: want at least {want['min']}, got {got}")
        if "max" in want and got > want["max"]:
            problems.append(f"{label}: want at most {want['max']}, got {got}")
    elif want != got or type(want) is not type(got) and not (
        isinstance(want, (int, float)) and isinstance(got, (int, float))
        and not isinstance(want, bool) and not isinstance(got, bool)
    ):
        problems.append(f"{label}: want {want!r}, got {got!r}")


def check_decision(label, expect, got, problems):
    for field, want in expect.items():
        if field in ("error", "error_field"):
            continue
        if field == "results":
            results = got.get("results")
            if not isinstance(results, list) or len(results) != len(want):
                problems.append(f"{label}.results: want {len(want)} results, got {results!r}")
                continue
            for i, (item_expect, item) in enumerate(zip(want, results)):
                check_decision(f"{label}.results[{i}]", item_expect, item, problems)
        elif field == "headers":
            headers = {k.lower(): v for k, v in got.get("headers", {}).items()}
            for name, value in want.items():
                have = headers.get(name.lower())
                if value == "present":
                    if have is None:
                        problems.append(f"{label}: header {name} absent")
                elif have != value:
                    problems.append(f"{label}: header {name}: want {value!r}, got {have!r}")
        elif field == "has_lease_id":
            check_value(f"{label}.has_lease_id", want, bool(got.get("lease_id")), problems)
        else:
            check_value(f"{label}.{field}", want, got.get(field, DEFAULTS.get(field)), problems)


def run_step(index, step, prefix, clients, outcomes):
    role = step.get("as", "caller")
    server = step.get("server", "real")
    client = clients[(role, server)]
    options = {k: step[k] for k in ("fail_open", "timeout_ms", "wait_ms") if k in step}
    resource = f"{prefix}.{step['resource']}" if "resource" in step else None
    key = step.get("key")
    op = step["op"]
    if op == "acquire":
        return client.acquire(resource, permits=step.get("permits"), key=key, **options)
    if op == "check":
        return client.check(resource, key=key, **options)
    if op == "acquire_all":
        items = []
        for item in step["items"]:
            mapped = {"resource": f"{prefix}.{item['resource']}"}
            mapped.update({k: item[k] for k in ("key", "permits") if k in item})
            items.append(mapped)
        options.pop("wait_ms", None)
        return client.acquire_all(items, **options)
    if op == "refund":
        return client.refund(resource, step.get("permits", 1), key=key, timeout_ms=step.get("timeout_ms"))
    if op == "release":
        source = outcomes[step["lease_id_from"]]
        lease_id = source.get("lease_id") if isinstance(source, dict) else None
        if not lease_id:
            raise AssertionError(f"step {step['lease_id_from']} has no lease_id to release")
        return client.release(resource, lease_id, key=key, timeout_ms=step.get("timeout_ms"))
    if op == "lease":
        # A scope that acquires a concurrency permit and gives it back when it ends: here
        # it ends at once. A denial is reported as the denied Decision.
        decision = client.acquire(resource, key=key, **options)
        if decision["allowed"] and decision.get("lease_id"):
            client.release(resource, decision["lease_id"], key=key)
        return decision
    raise AssertionError(f"unknown op {op!r}")


def run_scenario(path, fixture):
    scenario = json.loads(path.read_text())
    prefix = fixture["prefix"]
    keys = {
        "caller": fixture["keys"]["caller"],
        "stranger": fixture["keys"]["stranger"],
        "bad_key": "rk_live_madeupmadeupmadeupmadeupmadeup0",
    }
    urls = {"real": fixture["url"], "unreachable": fixture["unreachable_url"]}
    clients = {(role, server): Client(url, key) for role, key in keys.items() for server, url in urls.items()}
    outcomes, problems = [], []
    for index, step in enumerate(scenario["steps"]):
        expect = step.get("expect", {})
        label = f"step {index} ({step['op']} {step.get('resource', '')})"
        started = time.monotonic()
        try:
            got = run_step(index, step, prefix, clients, outcomes)
        except RatekeeperError as error:
            outcomes.append(error)
            if "error" not in expect:
                problems.append(f"{label}: unexpected {error.kind} {error.status}: {error.detail}")
                continue
            check_value(f"{label}.error", expect["error"], error.kind, problems)
            if "error_field" in expect:
                check_value(f"{label}.error_field", expect["error_field"], error.first_field(), problems)
            continue
        elapsed_ms = (time.monotonic() - started) * 1000
        outcomes.append(got)
        if "error" in expect:
            problems.append(f"{label}: want {expect['error']}, got {json.dumps(got, default=str)}")
            continue
        check_decision(label, expect, got, problems)
        # A wait that cannot succeed within its bound returns at once.
        if "wait_ms" in step and not got.get("allowed") and elapsed_ms > step["wait_ms"]:
            problems.append(f"{label}: a wait of {step['wait_ms']} ms took {elapsed_ms:.0f} ms")
    return problems


def main():
    scenarios = pathlib.Path(os.environ.get("RK_CONFORMANCE_SCENARIOS", ROOT / "clients/conformance/scenarios"))
    paths = sorted(scenarios.glob("*.json"))
    if len(sys.argv) > 1:
        paths = [p for p in paths if p.stem in sys.argv[1:]]
    fixture_path = os.environ.get("RK_CONFORMANCE_FIXTURE")
    passed = failed = skipped = 0
    if not fixture_path:
        for path in paths:
            print(f"SKIP {path.stem} (RK_CONFORMANCE_FIXTURE is not set)")
            skipped += 1
    else:
        fixture = json.loads(pathlib.Path(fixture_path).read_text())
        for path in paths:
            try:
                problems = run_scenario(path, fixture)
            except Exception as error:  # a broken scenario or runner: that scenario fails
                problems = [f"{type(error).__name__}: {error}"]
            if problems:
                failed += 1
                print(f"FAIL {path.stem}")
                for problem in problems:
                    print(f"     {problem}")
            else:
                passed += 1
                print(f"ok   {path.stem}")
    print(f"ref: tests: {passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
