"""Webhooks end to end, checked by an implementation no one here wrote: the Standard
Webhooks specification's own Python library (PyPI `standardwebhooks`) verifies every
request a receiver of this test gets from three ratekeeper instances on one database and
one Redis (scripts/webhooks.sh starts them and passes their addresses).

- One signed `policy.denying` per episode, however many instances saw its denials.
- A receiver that answers 500 twice gets the same event a third time, and the delivery
  log shows the three attempts.
"""

import json
import os
import signal
import subprocess
import threading
import time
import unittest
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from standardwebhooks.webhooks import Webhook, WebhookVerificationError

INSTANCES = os.environ["RK_INSTANCES"].split(",")
TOKEN = os.environ["RK_TOKEN"]
DATABASE = os.environ["RK_DATABASE"]
# Generous: an event waits for a flush (2 s), a look (2 s) and retries (2 s, then 4 s).
WAIT_S = 120


class Receiver:
    """Receivers by path: each verifies with its webhook's secret and answers 500 to its
    first `fail_first` requests."""

    def __init__(self):
        self.lock = threading.Lock()
        self.arrived = threading.Condition(self.lock)
        self.paths = {}  # path -> {"secret", "fail_first", "got": [...]}
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("content-length", 0)))
                headers = {k.lower(): v for k, v in self.headers.items()}
                with receiver.lock:
                    path = receiver.paths.get(self.path)
                    if path is None:
                        status = 404
                    else:
                        try:
                            payload = Webhook(path["secret"]).verify(body, headers)
                            verified = True
                        except WebhookVerificationError as e:
                            payload, verified = str(e), False
                        status = 500 if path["fail_first"] > 0 else 200
                        path["fail_first"] -= 1
                        path["got"].append(
                            {"headers": headers, "body": body, "payload": payload,
                             "verified": verified, "answered": status})
                        receiver.arrived.notify_all()
                self.send_response(status)
                self.end_headers()
                self.wfile.write(b"down for a moment" if status == 500 else b"ok")

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def url(self, path):
        return f"http://127.0.0.1:{self.server.server_address[1]}{path}"

    def expect(self, path, secret, fail_first=0):
        with self.lock:
            self.paths[path] = {"secret": secret, "fail_first": fail_first, "got": []}

    def wait_for(self, path, count):
        deadline = time.monotonic() + WAIT_S
        with self.lock:
            while len(self.paths[path]["got"]) < count:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"{path}: {self.paths[path]['got']}")
                self.arrived.wait(left)
            return list(self.paths[path]["got"])

    def got(self, path):
        with self.lock:
            return list(self.paths[path]["got"])


def call(base, method, path, body=None, token=TOKEN):
    request = urllib.request.Request(
        base + path, method=method,
        data=None if body is None else json.dumps(body).encode(),
        headers={"authorization": f"Bearer {token}", "content-type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            text = response.read()
            return response.status, json.loads(text) if text else None
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


def sql(query):
    """One value of a query on the instances' database (psql, as scripts/test.sh uses)."""
    out = subprocess.run(["psql", "-X", "-q", "-t", "-A", DATABASE, "-c", query],
                         check=True, capture_output=True, text=True)
    return out.stdout.strip()


def stop_instances():
    """SIGTERM to every instance, and wait until each has stopped gracefully."""
    pids = [int(p) for p in os.environ["RK_PIDS"].split(",")]
    for pid in pids:
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + WAIT_S
    for pid in pids:
        while os.path.exists(f"/proc/{pid}") and "zombie" not in state_of(pid):
            if time.monotonic() > deadline:
                raise AssertionError(f"instance {pid} did not stop")
            time.sleep(0.1)


def state_of(pid):
    try:
        with open(f"/proc/{pid}/status") as status:
            return next((line for line in status if line.startswith("State:")), "")
    except FileNotFoundError:
        return "zombie"


class WebhookDelivery(unittest.TestCase):
    """The tests run in the order of their names: the last one stops the instances."""

    @classmethod
    def setUpClass(cls):
        cls.receiver = Receiver()
        cls.api = INSTANCES[0]
        status, _ = call(cls.api, "POST", "/api/v1/apps", {"slug": "shop", "name": "Shop"})
        assert status == 201, status
        status, body = call(cls.api, "POST", "/api/v1/apps/shop/keys", {"label": "hooks"})
        assert status == 201, status
        cls.key = body["key"]

    def make_hook(self, path, events, fail_first=0):
        status, hook = call(self.api, "POST", "/api/v1/apps/shop/webhooks",
                            {"url": self.receiver.url(path), "events": events,
                             "quiet_period_s": 3600})
        self.assertEqual(status, 201, hook)
        self.receiver.expect(path, hook["secret"], fail_first)
        return hook

    def deny_everywhere(self, policy, rounds):
        """Acquires of `policy` on every instance at once, `rounds` each: all but the
        first few are denied."""
        def acquire(base):
            codes = []
            for _ in range(rounds):
                status, _ = call(base, "POST", "/v1/acquire",
                                 {"resource": policy, "permits": 1}, token=self.key)
                codes.append(status)
            return codes
        with ThreadPoolExecutor(len(INSTANCES)) as pool:
            codes = [c for cs in pool.map(acquire, INSTANCES) for c in cs]
        self.assertIn(429, codes)
        self.assertTrue(set(codes) <= {200, 429}, codes)
        return codes

    def test_2_one_signed_denying_event_per_episode_across_three_instances(self):
        hook = self.make_hook("/denying", ["policy.denying"])
        status, _ = call(self.api, "POST", "/api/v1/policies",
                         {"name": "checkout", "owner_app": "shop", "rate": 0.001,
                          "max_permits": 3})
        self.assertEqual(status, 201)
        # Every instance denies, in several flushes of each.
        for _ in range(3):
            self.deny_everywhere("checkout", 20)
        got = self.receiver.wait_for("/denying", 1)[0]
        self.assertTrue(got["verified"], got)
        self.assertEqual(got["payload"]["type"], "policy.denying")
        data = got["payload"]["data"]
        self.assertEqual((data["application"], data["policy"]), ("shop", "checkout"))
        self.assertIn("since", data)
        self.assertTrue(data["link"].endswith("/policies/checkout"), data)
        self.assertGreater(data["last_minute"]["denied"] + data["previous_minute"]["denied"], 0)
        # A body altered on the way is refused by the same library.
        with self.assertRaises(WebhookVerificationError):
            Webhook(self.receiver.paths["/denying"]["secret"]).verify(
                got["body"] + b" ", got["headers"])
        # The episode goes on: later denials on every instance start nothing new. Once
        # every instance has stopped (each finishes the look it is in), nothing more can
        # be written: the outbox holds the one event, and the receiver got it once.
        self.deny_everywhere("checkout", 20)
        stop_instances()
        rows = sql(f"SELECT count(*) FROM webhook_deliveries WHERE webhook_id = '{hook['id']}'")
        self.assertEqual(rows, "1")
        self.assertEqual(len(self.receiver.got("/denying")), 1)

    def test_1_a_receiver_that_answers_500_twice_gets_the_event_a_third_time(self):
        hook = self.make_hook("/flaky", ["policy.denying"], fail_first=2)
        status, _ = call(self.api, "POST", "/api/v1/policies",
                         {"name": "search", "owner_app": "shop", "rate": 0.001,
                          "max_permits": 1})
        self.assertEqual(status, 201)
        self.deny_everywhere("search", 5)
        got = self.receiver.wait_for("/flaky", 3)
        self.assertEqual([g["answered"] for g in got], [500, 500, 200])
        self.assertTrue(all(g["verified"] for g in got), got)
        ids = {g["headers"]["webhook-id"] for g in got}
        self.assertEqual(len(ids), 1, ids)
        self.assertEqual(got[2]["payload"]["data"]["policy"], "search")

        # The log (from any instance) shows each attempt.
        deadline = time.monotonic() + WAIT_S
        while True:
            status, hooks = call(INSTANCES[2], "GET", "/api/v1/apps/shop/webhooks")
            self.assertEqual(status, 200)
            mine = next(h for h in hooks if h["id"] == hook["id"])
            delivery = mine["deliveries"][0]
            if delivery["state"] == "delivered" or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        self.assertEqual(len(mine["deliveries"]), 1, mine)
        self.assertEqual(delivery["id"], ids.pop())
        self.assertEqual([a["status"] for a in delivery["attempts"]], [500, 500, 200])
        self.assertEqual(delivery["attempts"][0]["excerpt"], "down for a moment")
        self.assertEqual(delivery["state"], "delivered")


if __name__ == "__main__":
    unittest.main(verbosity=2)
