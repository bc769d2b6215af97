#!/usr/bin/env python3
"""bench/console.py: what the console's application page costs with many policies.

Builds the release binary (BENCH_SKIP_BUILD=1 skips it), starts a private Redis and a
private ratekeeper on loopback (free ports, a temporary SQLite database), creates an
application with BENCH_POLICIES (200) policies with traffic (BENCH_TRAFFIC acquires each,
4: one policy in ten denies, one in ten is in shadow mode and would deny) and a hot policy
for acquires, signs in to the console as an admin, and measures:

  a) the application page: bytes (identity, gzip, br), render time (median and p90 of
     BENCH_SAMPLES sequential GETs, client side, loopback) and CPU per page (server and
     Redis, from /proc), sorted by name and by attention (the default); then the same
     pages back to back for BENCH_DURATION over one connection with wrk (p50, p99: the
     server's time, without Python's parsing);
  b) a live refresh: bytes with and without `seen`, and the Redis commands one refresh
     runs (INFO commandstats around BENCH_SAMPLES refreshes, minus the same span idle);
  c) wrk: granted acquires on the hot policy alone (BENCH_CONNECTIONS connections);
  d) wrk: the same while a second wrk loads the application page (BENCH_CONSOLE_CONNECTIONS
     connections, with a browser's Accept-Encoding): pages/s and acquire p50/p99 side by
     side.

A benchmark, not a test: it asserts nothing about time. Prints a table and writes it to
bench/results/console-<timestamp>.txt. Needs python3, redis-server, redis-cli and wrk.
Knobs (environment): BENCH_POLICIES, BENCH_DURATION (10s), BENCH_CONNECTIONS (32),
BENCH_CONSOLE_CONNECTIONS (8), BENCH_SAMPLES (50), BENCH_TRAFFIC (4), BENCH_BIN,
BENCH_SKIP_BUILD.
"""

import http.cookiejar
import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
POLICIES = int(os.environ.get("BENCH_POLICIES", "200"))
DURATION = os.environ.get("BENCH_DURATION", "10s")
CONNECTIONS = int(os.environ.get("BENCH_CONNECTIONS", "32"))
CONSOLE_CONNECTIONS = int(os.environ.get("BENCH_CONSOLE_CONNECTIONS", "8"))
SAMPLES = int(os.environ.get("BENCH_SAMPLES", "50"))
TRAFFIC_PER_POLICY = int(os.environ.get("BENCH_TRAFFIC", "4"))
BIN = os.environ.get("BENCH_BIN", os.path.join(ROOT, "target/release/ratekeeper"))
ADMIN, PASSWORD = "bench", "bench-password-123"


def log(message):
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(check, what, seconds=30):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if check():
                return
        except (OSError, subprocess.CalledProcessError):
            pass
        time.sleep(0.1)
    sys.exit(f"bench: {what} did not come up within {seconds} s")


class Server:
    """A private Redis and ratekeeper, stopped on exit."""

    def __init__(self):
        self.tmp = tempfile.mkdtemp(prefix="ratekeeper-console-bench.")
        self.redis_port, self.http_port = free_port(), free_port()
        self.base = f"http://127.0.0.1:{self.http_port}"
        self.env = dict(
            os.environ,
            RATEKEEPER_DATABASE_URL=f"sqlite://{self.tmp}/bench.db",
            RATEKEEPER_REDIS_URL=f"redis://127.0.0.1:{self.redis_port}",
            RATEKEEPER_LISTEN=f"127.0.0.1:{self.http_port}",
            RATEKEEPER_REDIS_PREFIX="bench",
        )
        self.procs = []

    def start(self):
        self.procs.append(subprocess.Popen(
            ["redis-server", "--port", str(self.redis_port), "--bind", "127.0.0.1",
             "--save", "", "--appendonly", "no"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        wait_for(lambda: self.redis("PING") == "PONG", "redis-server")
        subprocess.run([BIN, "migrate"], env=self.env, check=True, capture_output=True)
        subprocess.run([BIN, "user", "create", ADMIN, "--admin"], env=self.env, check=True,
                       input=PASSWORD + "\n", text=True, capture_output=True)
        out = subprocess.run([BIN, "token", "create", ADMIN], env=self.env, check=True,
                             text=True, capture_output=True).stdout
        self.token = [line for line in out.splitlines() if line.strip()][-1].strip()
        log_file = open(os.path.join(self.tmp, "server.log"), "w")
        self.procs.append(subprocess.Popen([BIN, "serve"], env=self.env, stdout=log_file,
                                           stderr=subprocess.STDOUT))
        wait_for(lambda: urllib.request.urlopen(self.base + "/readyz").status == 200,
                 "ratekeeper")

    def stop(self):
        for proc in reversed(self.procs):
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def cpu_seconds(self):
        """CPU time (user + system) so far of Redis and of ratekeeper, in that order."""
        def of(proc):
            fields = open(f"/proc/{proc.pid}/stat").read().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        return [of(proc) for proc in self.procs]

    def redis(self, *args):
        return subprocess.run(["redis-cli", "-p", str(self.redis_port), *args],
                              capture_output=True, text=True, check=True).stdout.strip()

    def api(self, method, path, body=None):
        request = urllib.request.Request(
            self.base + path, method=method,
            data=json.dumps(body).encode() if body is not None else None,
            headers={"Authorization": f"Bearer {self.token}",
                     "Content-Type": "application/json"})
        with urllib.request.urlopen(request) as r:
            return json.loads(r.read() or b"null")

    def acquire(self, key, policy):
        """One acquire; a 429 is an answer too."""
        request = urllib.request.Request(
            self.base + "/v1/acquire", method="POST",
            data=json.dumps({"resource": policy, "permits": 1}).encode(),
            headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request) as r:
                r.read()
        except urllib.error.HTTPError as e:
            if e.code != 429:
                raise

    def command_calls(self):
        """Calls per command since Redis started (INFO commandstats)."""
        calls = {}
        for line in self.redis("INFO", "commandstats").splitlines():
            m = re.match(r"cmdstat_([^:]+):calls=(\d+)", line)
            if m:
                calls[m.group(1)] = int(m.group(2))
        return calls


class Browser:
    """A signed-in console session (cookies), as a browser holds it."""

    def __init__(self, base):
        self.base = base
        self.jar = http.cookiejar.CookieJar()
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.jar))

    def sign_in(self):
        page = self.opener.open(self.base + "/login").read().decode()
        csrf = re.search(r'name="csrf" value="([^"]+)"', page).group(1)
        form = urllib.parse.urlencode(
            {"username": ADMIN, "password": PASSWORD, "csrf": csrf}).encode()
        self.opener.open(self.base + "/login", data=form).read()

    def cookie_header(self):
        return "; ".join(f"{c.name}={c.value}" for c in self.jar)

    def get(self, path, encoding="identity"):
        request = urllib.request.Request(self.base + path,
                                         headers={"Accept-Encoding": encoding})
        started = time.perf_counter()
        with self.opener.open(request) as r:
            body = r.read()
        return body, time.perf_counter() - started


def wrk(args):
    out = subprocess.run(["wrk", "--latency", *args], capture_output=True, text=True,
                         check=True).stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))

    def latency(pct):
        m = re.search(rf"\s{pct}%\s+([\d.]+)(us|ms|s)\b", out)
        value, unit = float(m.group(1)), m.group(2)
        return value / 1000 if unit == "us" else value * 1000 if unit == "s" else value

    non_2xx = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", out)
    return {"rps": rps, "p50": latency(50), "p99": latency(99),
            "non2xx": int(non_2xx.group(1)) if non_2xx else 0}


def main():
    for tool in ["redis-server", "redis-cli", "wrk"]:
        if not shutil.which(tool):
            sys.exit(f"bench: {tool} is needed (apt-get install redis-server wrk)")
    if os.environ.get("BENCH_SKIP_BUILD") != "1":
        log("cargo build --release")
        subprocess.run(["cargo", "build", "--release", "--quiet"], cwd=ROOT, check=True)
    server = Server()
    try:
        server.start()
        run(server)
    finally:
        server.stop()


def run(server):
    log(f"an application with {POLICIES} policies, a key and a hot policy")
    server.api("POST", "/api/v1/apps", {"slug": "bench", "name": "Bench", "description": ""})
    key = server.api("POST", "/api/v1/apps/bench/keys", {"label": "bench"})["key"]
    server.api("POST", "/api/v1/policies", {"name": "hot", "owner_app": "bench",
                                             "rate": 1000000, "max_permits": 1000000000})
    # With traffic, as a lead would see it: every policy acquired a few times, one in ten
    # denying (capacity 2) and one in ten in shadow mode and would deny.
    for i in range(POLICIES):
        policy = {"name": f"p{i:03}", "owner_app": "bench", "rate": 0.01, "max_permits": 100}
        if i % 10 == 0:
            policy["max_permits"] = 2
        elif i % 10 == 5:
            policy.update(max_permits=2, mode="shadow")
        server.api("POST", "/api/v1/policies", policy)
    for i in range(POLICIES):
        for _ in range(TRAFFIC_PER_POLICY):
            server.acquire(key, f"p{i:03}")
    browser = Browser(server.base)
    browser.sign_in()
    # The instance flushes its counts every 2 s: wait until the page shows the denials.
    wait_for(lambda: b"Denying" in browser.get("/apps/bench")[0],
             "the seeded traffic on the application page")

    page = "/apps/bench"
    sizes = {enc: len(browser.get(page, enc)[0]) for enc in ["identity", "gzip", "br"]}
    # Each order's render time, and the CPU the server and Redis spent per page on it:
    # sorted by name, only the rows on screen are read; by attention (the default), all.
    renders = {}
    for label, path in [("by name", page + "?sort=name"), ("needs attention", page)]:
        cpu_before = server.cpu_seconds()
        took = sorted(browser.get(path)[1] * 1000 for _ in range(SAMPLES))
        cpu_after = server.cpu_seconds()
        renders[label] = (took, [(a - b) * 1000 / SAMPLES for a, b in zip(cpu_after, cpu_before)])
    # The same pages back to back over one connection (wrk: no client-side parsing): the
    # server's time per page, loopback included.
    one_connection = {
        label: wrk(["-t1", "-c1", f"-d{DURATION}", "-H", f"Cookie: {browser.cookie_header()}",
                    server.base + path])
        for label, path in [("by name", page + "?sort=name"), ("needs attention", page)]
    }
    times = renders["needs attention"][0]
    body = browser.get(page)[0]
    page_rows = len(re.findall(rb"<tr data-policy=", body))
    elements = len(re.findall(rb"<[a-zA-Z]", body))

    live = "/apps/bench/live"
    full, _ = browser.get(live)
    digests = json.loads(full).get("digests", [])  # an older server sends none
    # As the page's script asks: the digests and the names of the rows on screen (an
    # older server ignores the names and reads the page again).
    on_screen = [n.decode() for n in re.findall(rb'<tr data-policy="([^"]+)"', body)]
    seen_path = (
        f"{live}?seen={'.'.join(digests)}&rows={urllib.parse.quote(','.join(on_screen))}"
    )
    unchanged, _ = browser.get(seen_path)

    # Redis commands of one refresh: the same span idle, then SAMPLES refreshes.
    def refreshes(count):
        for _ in range(count):
            browser.get(seen_path)

    idle_before = server.command_calls()
    started = time.perf_counter()
    refreshes(SAMPLES)
    span = time.perf_counter() - started
    busy = server.command_calls()
    time.sleep(span)
    idle_after = server.command_calls()
    per_refresh = {}
    for cmd in set(busy) | set(idle_after):
        during = busy.get(cmd, 0) - idle_before.get(cmd, 0)
        idle = idle_after.get(cmd, 0) - busy.get(cmd, 0)
        n = (during - idle) / SAMPLES
        if n >= 0.05:
            per_refresh[cmd] = round(n, 1)
    log("wrk: acquires alone, then with the application page loaded alongside")
    acquire_args = ["-t1", f"-c{CONNECTIONS}", f"-d{DURATION}", "-H",
                    f"Authorization: Bearer {key}", "-s",
                    os.path.join(ROOT, "bench/acquire_one.lua"),
                    server.base + "/v1/acquire", "--", "hot", "1"]
    alone = wrk(acquire_args)
    console_args = ["-t1", f"-c{CONSOLE_CONNECTIONS}", f"-d{DURATION}", "-H",
                    f"Cookie: {browser.cookie_header()}", "-H",
                    "Accept-Encoding: gzip, deflate, br", server.base + page]
    console_proc = subprocess.Popen(["wrk", "--latency", *console_args],
                                    stdout=subprocess.PIPE, text=True)
    together = wrk(acquire_args)
    console_out = console_proc.communicate()[0]
    pages = float(re.search(r"Requests/sec:\s+([\d.]+)", console_out).group(1))
    console_alone = wrk(console_args)

    lines = [
        f"console bench: an application page of {POLICIES} policies ({page_rows} rows on screen)",
        f"  page bytes: identity {sizes['identity']:,}, gzip {sizes['gzip']:,}, br {sizes['br']:,};"
        f" {elements:,} elements",
        *[
            f"  page render, {label} (client side, sequential): median"
            f" {statistics.median(took):.1f} ms, p90 {took[int(len(took) * 0.9) - 1]:.1f} ms;"
            f" CPU per page: server {cpu[1]:.1f} ms, Redis {cpu[0]:.1f} ms"
            for label, (took, cpu) in renders.items()
        ],
        *[
            f"  page on the server, {label} (wrk, 1 connection): p50 {w['p50']:.1f} ms,"
            f" p99 {w['p99']:.1f} ms, {w['rps']:,.0f} pages/s"
            + (f" ({w['non2xx']} not 2xx)" if w["non2xx"] else "")
            for label, w in one_connection.items()
        ],
        f"  live refresh bytes: without seen {len(full):,}, nothing changed {len(unchanged):,}",
        f"  Redis commands per refresh: {json.dumps(dict(sorted(per_refresh.items())))}",
        f"  acquires alone ({CONNECTIONS} conns): {alone['rps']:,.0f}/s,"
        f" p50 {alone['p50']:.2f} ms, p99 {alone['p99']:.2f} ms",
        f"  application page alone ({CONSOLE_CONNECTIONS} conns): {console_alone['rps']:,.0f} pages/s,"
        f" p99 {console_alone['p99']:.1f} ms",
        f"  together: {pages:,.0f} pages/s while acquires {together['rps']:,.0f}/s,"
        f" p50 {together['p50']:.2f} ms, p99 {together['p99']:.2f} ms",
    ]
    report = "\n".join(lines)
    print(report)
    os.makedirs(os.path.join(ROOT, "bench/results"), exist_ok=True)
    path = os.path.join(ROOT, f"bench/results/console-{time.strftime('%Y%m%dT%H%M%S')}.txt")
    with open(path, "w") as f:
        f.write(report + "\n")
    log(f"written to {path}")


if __name__ == "__main__":
    main()
