#!/usr/bin/env bash
# The capacity model's check on a Redis Cluster (README "Capacity"): a local cluster of 3
# masters, the release server on SQLite, and for each scenario wrk -t2 -c64 for DURATION
# seconds after a warm-up; then each master's CPU (/proc) over the measured run, its share
# of the cluster's, and the cluster's Redis µs per decision, beside the FCALLs each master
# ran (a batch is one call per hash slot on a cluster).
#
#   cargo build --release && bash bench/cluster_split.sh
#   BIN=/path/to/another/ratekeeper POLICIES=10000 KEYS=100000 DURATION=8 bash bench/cluster_split.sh
#
# Scenarios: many (POLICIES global token buckets, a random one per request) and keyed (a
# per_key token bucket over KEYS callers, walked in order). Uses free loopback ports and a
# temporary directory; needs redis-server, redis-cli, wrk, curl and python3.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-target/release/ratekeeper}
POLICIES=${POLICIES:-10000}
KEYS=${KEYS:-100000}
DURATION=${DURATION:-8}
DIR=$(mktemp -d)
SERVER_PID=
NODES=()
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
# A cluster node also listens on its port + 10000 (the cluster bus): a free port below
# 55536 whose bus port is free too (the kernel's pick alone may be above, and the node
# then fails to start).
free_node_port() {
    python3 -c '
import random, socket
while True:
    port = random.randrange(20000, 55536)
    try:
        for p in (port, port + 10000):
            socket.socket().bind(("127.0.0.1", p))
    except OSError:
        continue
    print(port)
    break'
}
cleanup() {
    [[ -n $SERVER_PID ]] && kill "$SERVER_PID" 2>/dev/null && wait "$SERVER_PID" 2>/dev/null
    for port in "${NODES[@]}"; do redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true; done
    rm -rf "$DIR"
}
trap cleanup EXIT

for _ in 1 2 3; do
    port=$(free_node_port)
    NODES+=("$port")
    redis-server --port "$port" --bind 127.0.0.1 --cluster-enabled yes \
        --cluster-config-file "$DIR/nodes-$port.conf" --save "" --appendonly no \
        --dir "$DIR" --daemonize yes --logfile "$DIR/redis-$port.log" \
        --pidfile "$DIR/redis-$port.pid"
done
for port in "${NODES[@]}"; do
    for _ in $(seq 100); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.05; done
done
redis-cli --cluster create "${NODES[@]/#/127.0.0.1:}" --cluster-replicas 0 --cluster-yes \
    >/dev/null
for port in "${NODES[@]}"; do
    for _ in $(seq 300); do
        redis-cli -p "$port" cluster info | grep -q cluster_state:ok && break
        sleep 0.05
    done
done

HTTP_PORT=$(free_port)
API="http://127.0.0.1:$HTTP_PORT"
URLS=$(printf 'redis://127.0.0.1:%s,' "${NODES[@]}")
export RATEKEEPER_DATABASE_URL="sqlite://$DIR/db.sqlite" RATEKEEPER_REDIS_URL=${URLS%,} \
    RATEKEEPER_LISTEN="127.0.0.1:$HTTP_PORT" RATEKEEPER_REDIS_PREFIX=csplit RUST_LOG=warn
"$BIN" migrate >/dev/null
echo 'a-password-long-enough' | "$BIN" user create split --admin >/dev/null
TOKEN=$("$BIN" token create split | tail -1)
"$BIN" serve >"$DIR/server.log" 2>&1 &
SERVER_PID=$!
for _ in $(seq 100); do curl -sf "$API/healthz" >/dev/null && break; sleep 0.1; done
AUTH="Authorization: Bearer $TOKEN"
curl -sf -X POST -H "$AUTH" -H 'content-type: application/json' "$API/api/v1/apps" \
    -d '{"slug":"bench","name":"Bench"}' >/dev/null
KEY=$(curl -sf -X POST -H "$AUTH" -H 'content-type: application/json' \
    "$API/api/v1/apps/bench/keys" -d '{"label":"split"}' |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["key"])')
python3 - "$TOKEN" "$POLICIES" "$API" <<'PY'
import concurrent.futures, json, sys, urllib.request
token, count, api = sys.argv[1], int(sys.argv[2]), sys.argv[3]
def create(body):
    request = urllib.request.Request(api + "/api/v1/policies", data=json.dumps(body).encode(),
        headers={"Authorization": "Bearer " + token, "Content-Type": "application/json"})
    urllib.request.urlopen(request).read()
never = {"owner_app": "bench", "rate": 1000000, "max_permits": 1000000000,
         "allowed_apps": ["bench"]}
create({"name": "users", "scope": "per_key", **never})
with concurrent.futures.ThreadPoolExecutor(8) as pool:
    list(pool.map(create, ({"name": f"p{i}", **never} for i in range(count))))
PY

cpu_ticks() { awk '{print $14 + $15}' "/proc/$(<"$DIR/redis-$1.pid")/stat"; }
fcalls() {
    redis-cli -p "$1" info commandstats | awk -F'[=,]' '/^cmdstat_fcall:/ {print $2}'
}
# measure LABEL WRK-ARGUMENTS...: warm-up, then the measured run and each master's figures.
measure() {
    local label=$1
    shift
    wrk -t2 -c64 -d7s -H "Authorization: Bearer $KEY" "$@" >/dev/null
    local before=() port
    for port in "${NODES[@]}"; do
        redis-cli -p "$port" config resetstat >/dev/null
        before+=("$(cpu_ticks "$port")")
    done
    wrk -t2 -c64 -d"${DURATION}s" -H "Authorization: Bearer $KEY" "$@" >"$DIR/wrk.txt"
    local rows=() i=0
    for port in "${NODES[@]}"; do
        rows+=("$port $(($(cpu_ticks "$port") - before[i])) $(fcalls "$port")")
        i=$((i + 1))
    done
    python3 - "$label" "$(awk '/requests in/ {print $1}' "$DIR/wrk.txt")" \
        "$(getconf CLK_TCK)" "${rows[@]}" <<'PY'
import sys
label, requests, tick = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rows = [row.split() for row in sys.argv[4:]]
total = sum(int(r[1]) for r in rows) or 1
print(f"{label}: {requests} decisions, Redis {total / tick * 1e6 / requests:.2f} us per decision over the cluster")
for port, ticks, fcalls in rows:
    ticks = int(ticks)
    print(f"  master :{port}: {100 * ticks / total:5.1f}% of the cluster's CPU, "
          f"{ticks / tick * 1e6 / requests:.2f} us per decision, "
          f"{int(fcalls or 0) / requests:.2f} FCALLs per decision")
PY
}

measure "many ($POLICIES policies)" -s bench/acquire_many.lua "$API/v1/acquire" -- "$POLICIES" p
measure "keyed ($KEYS keys)" -s bench/acquire_keyed.lua "$API/v1/acquire" -- users "$KEYS" u 0,0
