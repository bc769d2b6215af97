#!/usr/bin/env bash
# What clients and operators see through Redis outages, measured (not a test: it prints
# and asserts nothing):
#  1. answers per second through a Redis restart under load, while Redis goes away and
#     comes back empty (no persistence);
#  2. /metrics and the server's memory before and after BENCH_NAMES (10,000) acquires of
#     made-up resource names while Redis is down (they must stay flat).
#
#   bash bench/outages.sh      # needs target/release/ratekeeper (cargo build --release)
#
# A private Redis on a free loopback port and ratekeeper (release build, SQLite in a temp
# dir) with two policies of 1,000,000/s: `closed.p` (fails closed) and `open.p` (fails
# open). Four client threads acquire them in turn for BENCH_SECONDS (12) seconds; after
# BENCH_RESTART_AT (4) seconds Redis is killed (SIGKILL) and BENCH_DOWN_MS (1000) ms later
# started again, empty, on the same port. Per second: decided grants, degraded grants
# (fail open), 503 (fail closed), and anything else (which should be nothing).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN=${BENCH_BIN:-$ROOT/target/release/ratekeeper}
SECONDS_TOTAL=${BENCH_SECONDS:-12}
NAMES=${BENCH_NAMES:-10000}
RESTART_AT=${BENCH_RESTART_AT:-4}
DOWN_MS=${BENCH_DOWN_MS:-1000}
[[ -x $BIN ]] || { echo "no $BIN: cargo build --release first" >&2; exit 1; }
for cmd in redis-server redis-cli python3 curl; do
    command -v "$cmd" >/dev/null || { echo "$cmd is required" >&2; exit 1; }
done

PREFIX=restart
# shellcheck source=bench/private_server.sh
. "$ROOT/bench/private_server.sh"
for mode in closed open; do
    curl -fsS -X POST "$API/api/v1/policies" "${auth[@]}" -d "{\"name\":\"$mode.p\",\"owner_app\":\"bench\",\"rate\":1000000,\"max_permits\":1000000000,\"failure_mode\":\"$mode\"}" >/dev/null
done
sleep 1 # the key reaches the snapshot (a change notice); this is set-up, not measured

(
    sleep "$RESTART_AT"
    kill -9 "$REDIS_PID"
    python3 -c "import time; time.sleep($DOWN_MS / 1000)"
    start_redis
) &
RESTARTER=$!

python3 - "$API" "$KEY" "$SECONDS_TOTAL" <<'PY'
import collections, http.client, json, sys, threading, time
api, key, total = sys.argv[1], sys.argv[2], float(sys.argv[3])
host, port = api.split("//")[1].split(":")
counts = collections.defaultdict(collections.Counter)
lock = threading.Lock()
start = time.time()

def client(policy):
    conn = http.client.HTTPConnection(host, int(port), timeout=5)
    body = json.dumps({"resource": policy, "permits": 1})
    headers = {"Authorization": "Bearer " + key, "Content-Type": "application/json"}
    while time.time() - start < total:
        try:
            conn.request("POST", "/v1/acquire", body, headers)
            r = conn.getresponse()
            data = r.read()
            if r.status == 200 and b'"degraded":true' in data:
                kind = "degraded"
            elif r.status == 200:
                kind = "decided"
            else:
                kind = str(r.status)
        except Exception:
            conn = http.client.HTTPConnection(host, int(port), timeout=5)
            kind = "conn-error"
        second = int(time.time() - start)
        with lock:
            counts[second][(policy, kind)] += 1

threads = [threading.Thread(target=client, args=(p,)) for p in ["closed.p", "open.p"] * 2]
for t in threads: t.start()
for t in threads: t.join()
kinds = ["decided", "degraded", "503"]
print(f"{'second':>6}  {'closed.p decided':>16} {'closed.p 503':>12}  {'open.p decided':>14} {'open.p degraded':>15}  {'anything else':>13}")
for s in sorted(counts):
    c = counts[s]
    other = sum(v for (p, k), v in c.items() if (p, k) not in
                {("closed.p", "decided"), ("closed.p", "503"), ("open.p", "decided"), ("open.p", "degraded")})
    print(f"{s:>6}  {c[('closed.p','decided')]:>16} {c[('closed.p','503')]:>12}  {c[('open.p','decided')]:>14} {c[('open.p','degraded')]:>15}  {other:>13}")
PY
wait "$RESTARTER"

echo
echo "made-up resource names while Redis is down ($NAMES acquires):"
kill "$(<"$TMP/redis.pid")"
python3 - "$API" "$KEY" "$NAMES" "$SERVER_PID" <<'PY'
import concurrent.futures, http.client, json, secrets, sys
api, key, n, pid = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
host, port = api.split("//")[1].split(":")

def rss_kb():
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])

def metrics():
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    conn.request("GET", "/metrics")
    return conn.getresponse().read()

def acquire(names):
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    statuses = {}
    for name in names:
        conn.request("POST", "/v1/acquire", json.dumps({"resource": name}),
                     {"Authorization": "Bearer " + key, "Content-Type": "application/json"})
        r = conn.getresponse()
        r.read()
        statuses[r.status] = statuses.get(r.status, 0) + 1
    return statuses

before, rss_before = metrics(), rss_kb()
names = [f"made.up.{secrets.token_hex(6)}" for _ in range(n)]
chunks = [names[i::4] for i in range(4)]
with concurrent.futures.ThreadPoolExecutor(4) as pool:
    statuses = {}
    for part in pool.map(acquire, chunks):
        for status, count in part.items():
            statuses[status] = statuses.get(status, 0) + count
after, rss_after = metrics(), rss_kb()
series = lambda text: sum(1 for l in text.decode().splitlines() if l.startswith("ratekeeper_decisions_total"))
print(f"  answers: {statuses}")
print(f"  /metrics: {len(before)} bytes before, {len(after)} after; decision series {series(before)} -> {series(after)}")
print(f"  server RSS: {rss_before} kB before, {rss_after} kB after")
PY
