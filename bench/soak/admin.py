"""What the soak changes through the admin API while the load runs, and whether every
change an instance acknowledged is stored: edits of policies, policy files applied, API
keys rotated."""

import collections
import datetime
import json
import os
import random
import threading
import time

from limits import APPS, policies, policy_body
from world import call

EDITED = [f"edit.{i}" for i in range(5)]
FILED = [f"file.{i}" for i in range(5)]
EDITS_APP, FILES_APP = "soak-edits", "soak-files"


class Admin:
    def __init__(self, instances, keys_file, started):
        self.started = started
        self.instances = instances
        self.token = instances.token
        self.keys_file = keys_file
        self.lock = threading.Lock()
        self.counter = 0
        # policy -> [(number, acknowledged)], in the order sent (one sender at a time)
        self.attempts = collections.defaultdict(list)
        self.answers = collections.Counter()  # (minute, action, status) -> n
        self.odd = []  # (time, instance, action, status, excerpt)
        self.keys = {}
        self.key_ids = {}
        self.down = set()  # instances killed now: not asked
        self.rng = random.Random(7)

    def setup(self):
        api = self.instances.api(0)
        for slug in (*APPS, EDITS_APP, FILES_APP):
            self.must(api, "POST", "/api/v1/apps", {"slug": slug, "name": slug})
        for slug in APPS:
            key = self.must(api, "POST", f"/api/v1/apps/{slug}/keys", {"label": "soak"})
            self.keys[slug], self.key_ids[slug] = key["key"], key["id"]
        self.write_keys()
        for name, algorithm, scope, mode in policies():
            self.must(api, "POST", "/api/v1/policies", policy_body(name, algorithm, scope, mode))
        for name in EDITED:
            self.must(api, "POST", "/api/v1/policies", {
                "name": name, "owner_app": EDITS_APP, "rate": 10, "max_permits": 10,
                "description": "edit 0"})
            self.attempts[name].append((0, True))
        self.apply_file()

    def must(self, api, method, path, body):
        status, reply = call(api, method, path, self.token, body)
        if status not in (200, 201):
            raise RuntimeError(f"{method} {path}: {status} {reply}")
        return reply

    def write_keys(self):
        temporary = self.keys_file + ".new"
        with open(temporary, "w") as f:
            json.dump(self.keys, f)
        os.replace(temporary, self.keys_file)

    def instance(self):
        live = [i for i in range(len(self.instances.ports)) if i not in self.down]
        return self.rng.choice(live)

    def send(self, action, method, path, body, content_type="application/json"):
        i = self.instance()
        status, reply = call(self.instances.api(i), method, path, self.token,
                             body, content_type)
        now = time.time()
        with self.lock:
            self.answers[(int((now - self.started) // 60), action, status)] += 1
            if status not in (200, 201):
                self.odd.append((now, i, action, status, str(reply)[:200]))
        return status, reply

    def edit(self):
        with self.lock:
            self.counter += 1
            number = self.counter
        name = self.rng.choice(EDITED)
        status, _ = self.send("edit", "PATCH", f"/api/v1/policies/{name}",
                              {"description": f"edit {number}"})
        with self.lock:
            self.attempts[name].append((number, status == 200))

    def edit_burst(self, count):
        for _ in range(count):
            self.edit()
        return f"{count} edits"

    def apply_file(self):
        with self.lock:
            self.counter += 1
            number = self.counter
        document = {"app": FILES_APP, "policies": [
            {"name": name, "rate": 5, "max_permits": 5, "description": f"apply {number}"}
            for name in FILED]}
        status, reply = self.send("apply", "POST", "/api/v1/apply",
                                  json.dumps(document).encode())
        with self.lock:
            for name in FILED:
                self.attempts[name].append((number, status == 200))
        return f"apply {number}: {status}"

    def rotate_key(self):
        app = self.rng.choice(APPS)
        grace = (datetime.datetime.now(datetime.timezone.utc) +
                 datetime.timedelta(seconds=15)).strftime("%Y-%m-%dT%H:%M:%SZ")
        status, reply = self.send("rotate", "POST",
                                  f"/api/v1/apps/{app}/keys/{self.key_ids[app]}/rotate",
                                  {"old_key_expires_at": grace})
        if status == 201:
            self.keys[app], self.key_ids[app] = reply["key"], reply["id"]
            self.write_keys()
        return f"{app}: {status}"

    def lost_edits(self):
        """Policies whose stored description is older than the last one acknowledged (or
        none ever sent): [(policy, stored, last acknowledged)]; None when no instance
        could read them."""
        stored = {}
        for slug in (EDITS_APP, FILES_APP):
            status, reply = call(self.instances.api(self.instance()), "GET",
                                 f"/api/v1/policies?app={slug}", self.token)
            if status != 200:
                return None
            for policy in reply:
                stored[policy["name"]] = policy.get("description", "")
        lost = []
        with self.lock:
            for name, attempts in self.attempts.items():
                acknowledged = [n for n, ok in attempts if ok]
                last = acknowledged[-1] if acknowledged else None
                text = stored.get(name)
                number = int(text.split()[-1]) if text and text.split()[-1].isdigit() else None
                sent_after = [n for n, _ in attempts if last is None or n >= last]
                if number is None or number not in sent_after:
                    lost.append((name, text, last))
        return lost
