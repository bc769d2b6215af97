#!/usr/bin/env bash
# Reconcile cost at scale (the budget in bench/README.md): with BENCH_POLICIES policies (default
# 100,000) inserted straight into a SQLite store, how long a full pass and a quiet (light)
# pass take, how many Redis writes a quiet pass makes, and Redis memory per policy.
# A benchmark: it prints numbers and asserts nothing. Needs a release build
# (cargo build --release), redis-server, redis-cli, curl and python3.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="${BENCH_BIN:-$ROOT/target/release/ratekeeper}"
N="${BENCH_POLICIES:-100000}"
WATCH="${BENCH_WATCH_SECONDS:-21}"
[[ -x $BIN ]] || (cd "$ROOT" && cargo build --release)

tmp="$(mktemp -d)"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
rport="$(free_port)"
hport="$(free_port)"
server=""
cleanup() {
    [[ -n $server ]] && kill "$server" 2>/dev/null && wait "$server" 2>/dev/null
    redis-cli -p "$rport" shutdown nosave >/dev/null 2>&1 || true
    rm -rf "$tmp"
}
trap cleanup EXIT

redis-server --port "$rport" --bind 127.0.0.1 --save "" --appendonly no --daemonize yes \
    --pidfile "$tmp/redis.pid" --logfile "$tmp/redis.log"
for _ in $(seq 1 50); do redis-cli -p "$rport" ping >/dev/null 2>&1 && break; sleep 0.1; done

export RATEKEEPER_DATABASE_URL="sqlite://$tmp/reconcile.db"
export RATEKEEPER_REDIS_URL="redis://127.0.0.1:$rport"
export RATEKEEPER_LISTEN="127.0.0.1:$hport"
export RATEKEEPER_SYNC_INTERVAL_MS=5000
export RUST_LOG=warn
"$BIN" migrate 2>/dev/null

python3 - "$tmp/reconcile.db" "$N" <<'PY'
import json, sqlite3, sys, time
db = sqlite3.connect(sys.argv[1]); n = int(sys.argv[2]); now = int(time.time() * 1000)
db.execute("INSERT INTO apps (id, slug, name, description, created_ms) "
           "VALUES ('app0000000000000', 'bench', 'Bench', '', ?)", (now,))
db.executemany(
    "INSERT INTO policies (id, name, app_id, algorithm, rate, max_permits, allowed_apps, "
    "failure_mode, enabled, description, version, created_ms, updated_ms) "
    "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
    [(f"{i:016x}", f"p{i}", "app0000000000000", "token_bucket", 1000.0, 1000,
      json.dumps(["bench"]), "closed", 1, "", 1, now, now) for i in range(n)])
db.commit()
PY
mem_before="$(redis-cli -p "$rport" info memory | awk -F: '/^used_memory:/ {print $2+0}')"

start="$(date +%s.%N)"
"$BIN" serve >"$tmp/server.log" 2>&1 &
server=$!
# The first pass runs before the server listens.
for _ in $(seq 1 600); do curl -fsS "http://127.0.0.1:$hport/healthz" >/dev/null 2>&1 && break; sleep 0.1; done
up="$(date +%s.%N)"
metrics() { curl -fsS "http://127.0.0.1:$hport/metrics"; }
value() { metrics | awk -v m="$1" '$1 == m {print $2}'; }
# Wait until a pass has left the marker (every policy mirrored).
for _ in $(seq 1 120); do [[ -n $(redis-cli -p "$rport" get ratekeeper:sync) ]] && break; sleep 0.5; done
mem_after="$(redis-cli -p "$rport" info memory | awk -F: '/^used_memory:/ {print $2+0}')"
keys="$(redis-cli -p "$rport" dbsize)"

sum0="$(value ratekeeper_sync_pass_seconds_sum)"
count0="$(value ratekeeper_sync_pass_seconds_count)"
writes0="$(redis-cli -p "$rport" info commandstats | awk -F'[=,:]' '/^cmdstat_hset:/ {print $3}')"
sleep "$WATCH"
sum1="$(value ratekeeper_sync_pass_seconds_sum)"
count1="$(value ratekeeper_sync_pass_seconds_count)"
writes1="$(redis-cli -p "$rport" info commandstats | awk -F'[=,:]' '/^cmdstat_hset:/ {print $3}')"

python3 - <<PY
n = $N
print(f"reconcile benchmark, {n} policies (SQLite, private Redis), $(date -u '+%F %T') UTC, git $(git -C "$ROOT" rev-parse --short HEAD)")
print(f"  start to serving (first full pass, every policy written): {$up - $start:.1f} s")
print(f"  Redis keys: $keys; memory per policy (config only): {($mem_after - $mem_before) / n:.0f} bytes")
passes = $count1 - $count0
if passes:
    print(f"  quiet passes watched: {passes}, mean duration {($sum1 - $sum0) / passes * 1000:.0f} ms")
print(f"  HSET calls during them: {${writes1:-0} - ${writes0:-0}}")
PY
