#!/usr/bin/env python3
"""Makes what the conformance scenarios need on a running ratekeeper server, through its
admin API, and writes one fixture file per library prefix.

    setup_fixtures.py --url URL --token TOKEN --scenarios DIR --out DIR \
        --unreachable-url URL PREFIX...

For each PREFIX: the apps `<prefix>-caller` and `<prefix>-stranger` with one API key each,
and every scenario's policies as `<prefix>.<name>`, owned by `<prefix>-caller`, with the
roles of `allowed_apps` ("caller", "stranger") mapped to those apps. Then
`<out>/<prefix>.json`: {"url", "prefix", "keys": {"caller", "stranger"}, "unreachable_url"}.
Python's standard library only.
"""

import argparse
import json
import pathlib
import re
import sys
import urllib.error
import urllib.request

PREFIX_RE = re.compile(r"^[a-z0-9][a-z0-9]{0,15}$")
ROLES = ("caller", "stranger")


def fail(message):
    print(f"conformance: {message}", file=sys.stderr)
    sys.exit(1)


class Admin:
    def __init__(self, url, token):
        self.url = url.rstrip("/")
        self.token = token

    def post(self, path, body):
        request = urllib.request.Request(
            self.url + path,
            data=json.dumps(body).encode(),
            method="POST",
            headers={
                "Authorization": f"Bearer {self.token}",
                "Content-Type": "application/json",
            },
        )
        try:
            with urllib.request.urlopen(request, timeout=10) as reply:
                return json.loads(reply.read() or b"null")
        except urllib.error.HTTPError as error:
            detail = error.read().decode(errors="replace")
            fail(f"POST {path} {json.dumps(body)}: HTTP {error.code}: {detail}")
        except OSError as error:
            fail(f"POST {path}: {error}")


def load_policies(scenarios):
    """Every scenario's policies, checked: names unique across all scenarios."""
    files = sorted(pathlib.Path(scenarios).glob("*.json"))
    if not files:
        fail(f"no scenario (*.json) in {scenarios}")
    policies, seen = [], {}
    for path in files:
        try:
            scenario = json.loads(path.read_text())
        except ValueError as error:
            fail(f"{path}: not JSON: {error}")
        for policy in scenario.get("policies", []):
            name = policy.get("name")
            if not isinstance(name, str) or not name:
                fail(f"{path}: a policy without a name")
            if name in seen:
                fail(f"{path}: policy {name!r} is also in {seen[name]}")
            seen[name] = path.name
            policies.append(policy)
    return policies


def policy_body(policy, prefix):
    body = dict(policy)
    body["name"] = f"{prefix}.{policy['name']}"
    body["owner_app"] = f"{prefix}-caller"
    if "allowed_apps" in body:
        apps = []
        for role in body["allowed_apps"]:
            if role not in ROLES:
                fail(f"policy {policy['name']}: allowed_apps role {role!r} is not one of {ROLES}")
            apps.append(f"{prefix}-{role}")
        body["allowed_apps"] = apps
    for override in body.get("overrides", []):
        # On a per_app policy an override matches an app: a role, mapped as above.
        if body.get("scope") == "per_app" and override.get("match") in ROLES:
            override["match"] = f"{prefix}-{override['match']}"
    return body


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--token", required=True)
    parser.add_argument("--scenarios", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--unreachable-url", required=True)
    parser.add_argument("prefixes", nargs="+")
    args = parser.parse_args()

    policies = load_policies(args.scenarios)
    admin = Admin(args.url, args.token)
    for prefix in args.prefixes:
        if not PREFIX_RE.match(prefix):
            fail(f"prefix {prefix!r}: 1 to 16 of a-z and 0-9")
        keys = {}
        for role in ROLES:
            slug = f"{prefix}-{role}"
            admin.post("/api/v1/apps", {"slug": slug, "name": f"Conformance {prefix} {role}"})
            keys[role] = admin.post(f"/api/v1/apps/{slug}/keys", {"label": "conformance"})["key"]
        for policy in policies:
            admin.post("/api/v1/policies", policy_body(policy, prefix))
        fixture = {
            "url": args.url,
            "prefix": prefix,
            "keys": keys,
            "unreachable_url": args.unreachable_url,
        }
        out = pathlib.Path(args.out) / f"{prefix}.json"
        out.write_text(json.dumps(fixture, indent=2) + "\n")
        print(f"conformance: {prefix}: 2 apps, {len(policies)} policies, fixture {out}")


if __name__ == "__main__":
    main()
