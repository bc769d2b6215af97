#!/usr/bin/env bash
# What clients see while Redis behind Sentinel fails over: a master, a replica and three
# sentinels (quorum 2, down-after-milliseconds DOWN_AFTER_MS), the release server on
# SQLite with two policies (failure_mode closed and open), and CLIENTS clients acquiring
# from each in a loop. After a quiet second the master is killed (KILL=1, as a crash) or
# asked to hand over (`SENTINEL FAILOVER`, KILL=0); the run goes on for SECONDS in all.
# It prints, per 100 ms from the fault on, the answers by status of each policy, and the
# window: from the fault to the first acquire decided by the new master, and the last one
# that was not. A third policy, `counted` (fails closed, 10,000,000 permits that refill one
# in 1,000 s), measures what the failover lost: the grants clients were answered, against
# what its bucket on the new master says was taken; the difference is what the writes the
# old master took and never sent to its replica had taken (a bucket then grants it again).
#
#   cargo build --release && bash bench/failover.sh
#   KILL=0 DOWN_AFTER_MS=1000 SECONDS_TOTAL=20 bash bench/failover.sh
#
# Uses free loopback ports and a temporary directory; needs redis-server, redis-cli, curl
# and python3.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-target/release/ratekeeper}
KILL=${KILL:-1}
DOWN_AFTER_MS=${DOWN_AFTER_MS:-1000}
SECONDS_TOTAL=${SECONDS_TOTAL:-20}
CLIENTS=${CLIENTS:-4}
DIR=$(mktemp -d)
SERVER_PID=
PIDS=()
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
cleanup() {
    [[ -n $SERVER_PID ]] && kill "$SERVER_PID" 2>/dev/null && wait "$SERVER_PID" 2>/dev/null
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    rm -rf "$DIR"
}
trap cleanup EXIT

MASTER=$(free_port)
REPLICA=$(free_port)
SENTINELS=("$(free_port)" "$(free_port)" "$(free_port)")
start() { redis-server "$@" --daemonize no >>"$DIR/redis.log" 2>&1 & PIDS+=($!); }
start --port "$MASTER" --bind 127.0.0.1 --save "" --appendonly no --dir "$DIR"
start --port "$REPLICA" --bind 127.0.0.1 --save "" --appendonly no --dir "$DIR" \
    --replicaof 127.0.0.1 "$MASTER"
for port in "${SENTINELS[@]}"; do
    cat >"$DIR/sentinel-$port.conf" <<EOF
port $port
bind 127.0.0.1
sentinel monitor bench 127.0.0.1 $MASTER 2
sentinel down-after-milliseconds bench $DOWN_AFTER_MS
sentinel failover-timeout bench 2000
EOF
    start "$DIR/sentinel-$port.conf" --sentinel
done
MASTER_PID=${PIDS[0]}
# Ready when the replica is in sync and each sentinel knows the replica and both others.
for _ in $(seq 600); do
    ready=1
    redis-cli -p "$MASTER" info replication 2>/dev/null | grep -q state=online || ready=0
    for port in "${SENTINELS[@]}"; do
        [[ $(redis-cli -p "$port" sentinel sentinels bench 2>/dev/null | grep -c '^name$') == 2 ]] || ready=0
    done
    [[ $ready == 1 ]] && break
    sleep 0.1
done
[[ $ready == 1 ]] || { echo "the sentinels did not get ready" >&2; exit 1; }

HTTP_PORT=$(free_port)
API="http://127.0.0.1:$HTTP_PORT"
export RATEKEEPER_DATABASE_URL="sqlite://$DIR/db.sqlite" RATEKEEPER_LISTEN="127.0.0.1:$HTTP_PORT" \
    RATEKEEPER_REDIS_URL="redis+sentinel://127.0.0.1:${SENTINELS[0]},127.0.0.1:${SENTINELS[1]},127.0.0.1:${SENTINELS[2]}/bench" \
    RATEKEEPER_REDIS_PREFIX=failover RUST_LOG=warn
"$BIN" migrate >/dev/null
echo 'a-password-long-enough' | "$BIN" user create bench --admin >/dev/null
TOKEN=$("$BIN" token create bench | tail -1)
"$BIN" serve >"$DIR/server.log" 2>&1 &
SERVER_PID=$!
for _ in $(seq 100); do curl -sf "$API/healthz" >/dev/null && break; sleep 0.1; done
AUTH="Authorization: Bearer $TOKEN"
post() { curl -sf -X POST -H "$AUTH" -H 'content-type: application/json' "$API$1" -d "$2"; }
post /api/v1/apps '{"slug":"bench","name":"Bench"}' >/dev/null
KEY=$(post /api/v1/apps/bench/keys '{"label":"failover"}' |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["key"])')
for mode in closed open; do
    post /api/v1/policies "{\"name\":\"$mode\",\"owner_app\":\"bench\",\"rate\":1000000,\"max_permits\":1000000000,\"failure_mode\":\"$mode\"}" >/dev/null
done
post /api/v1/policies '{"name":"counted","owner_app":"bench","rate":0.001,"max_permits":10000000,"failure_mode":"closed"}' >/dev/null

python3 - "$API" "$KEY" "$CLIENTS" "$SECONDS_TOTAL" "$KILL" "$MASTER_PID" "${SENTINELS[0]}" <<'PY'
import collections, http.client, json, os, signal, subprocess, sys, threading, time
api, key, clients, total, kill, master_pid, sentinel = sys.argv[1:]
host, port = api.removeprefix("http://").split(":")
clients, total = int(clients), float(total)
answers = []  # (time, policy, status, decided)
lock = threading.Lock()
stop = time.monotonic() + total
def client(policy):
    conn = http.client.HTTPConnection(host, int(port), timeout=5)
    body = json.dumps({"resource": policy})
    headers = {"Authorization": "Bearer " + key, "Content-Type": "application/json"}
    while time.monotonic() < stop:
        try:
            conn.request("POST", "/v1/acquire", body, headers)
            r = conn.getresponse()
            data = r.read()
            status = r.status
            decided = status == 200 and b'"degraded"' not in data
        except Exception:
            conn = http.client.HTTPConnection(host, int(port), timeout=5)
            status, decided = 0, False
        with lock:
            answers.append((time.monotonic(), policy, status, decided))
threads = [threading.Thread(target=client, args=(p,)) for p in ("closed", "open", "counted")
           for _ in range(clients)]
for t in threads: t.start()
time.sleep(1)
at = time.monotonic()
if kill == "1":
    os.kill(int(master_pid), signal.SIGKILL)
else:
    subprocess.run(["redis-cli", "-p", sentinel, "sentinel", "failover", "bench"], check=True,
                   stdout=subprocess.DEVNULL)
for t in threads: t.join()
after = [a for a in answers if a[0] >= at]
undecided = [a for a in after if not a[3]]
print(f"fault: {'master killed (kill -9)' if kill == '1' else 'SENTINEL FAILOVER'}; "
      f"{len(answers)} answers in all, {len(after)} after the fault")
if undecided:
    last_bad = max(a[0] for a in undecided) - at
    first_ok = min((a[0] for a in after if a[3] and a[0] - at > last_bad), default=None)
    print(f"window: acquires not decided by Redis from {min(a[0] for a in undecided) - at:.2f} s "
          f"to {last_bad:.2f} s after the fault; decided again from "
          f"{(first_ok - at) if first_ok else float('nan'):.2f} s")
else:
    print("window: every acquire after the fault was decided by Redis")
buckets = collections.defaultdict(collections.Counter)
for t, policy, status, decided in after:
    label = f"{status}" + ("" if decided or status != 200 else " degraded")
    buckets[int((t - at) * 10)][(policy, label)] += 1
granted = sum(1 for a in answers if a[1] == "counted" and a[3])
conn = http.client.HTTPConnection(host, int(port), timeout=5)
conn.request("POST", "/v1/acquire", json.dumps({"resource": "counted", "permits": 0}),
             {"Authorization": "Bearer " + key, "Content-Type": "application/json"})
check = json.loads(conn.getresponse().read())
if "remaining" in check:
    taken = 10_000_000 - check["remaining"]
    print(f"lost: counted answered {granted} grants; its bucket on the new master holds "
          f"{taken} taken (refill under 1 permit in the run): {granted - taken} granted beyond it")
else:
    print(f"lost: not measured, no master answered at the end: {check}")
print("per 100 ms after the fault (policy status: count):")
for b in sorted(buckets):
    row = ", ".join(f"{p} {s}: {n}" for (p, s), n in sorted(buckets[b].items()))
    print(f"  {b / 10:5.1f} s  {row}")
PY
echo "the sentinels name now: $(redis-cli -p "${SENTINELS[0]}" sentinel get-master-addr-by-name bench | tr '\n' ' ')(master was $MASTER, replica $REPLICA)"
echo "server warnings:"
grep -c WARN "$DIR/server.log" || true
grep WARN "$DIR/server.log" | cut -c1-300 | sort | uniq -c | sort -rn | head -8 || true
echo "sentinel events:"
grep -E 'sdown|odown|failover|switch-master|elected|no-good' "$DIR/redis.log" | cut -c1-160 | head -20 || true
