#!/usr/bin/env bash
# The server's memory at scale (the RSS target in bench/README.md): BENCH_POLICIES policies
# (default 100,000) written straight into the SQLite store of a running server, which a
# full reconcile pass then loads; one per_key policy over BENCH_KEYS distinct keys (default
# 1,000,000); acquires over all the policies; a full pass after one edit. For each phase it
# prints the resident memory at its end (VmRSS) and the peak during it (VmHWM, reset at the
# phase's start through /proc/<pid>/clear_refs).
# A benchmark: it prints numbers and asserts nothing. Needs a release build, redis-server,
# redis-cli, wrk, curl, sqlite3 (python3's module) and python3.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
BIN="${BENCH_BIN:-$ROOT/target/release/ratekeeper}"
N="${BENCH_POLICIES:-100000}"
KEYS="${BENCH_KEYS:-1000000}"
DURATION="${BENCH_DURATION:-30s}"
PREFIX=mbench
[[ -x $BIN ]] || cargo build --release -p ratekeeper --bin ratekeeper
export RATEKEEPER_SYNC_INTERVAL_MS=1000
source bench/private_server.sh

status() { awk -v f="$1:" '$1 == f {printf "%.1f", $2 / 1024}' "/proc/$SERVER_PID/status"; }
phase_start() { echo 5 >"/proc/$SERVER_PID/clear_refs"; }
phase_end() { printf '%-44s RSS %7s MB   peak %7s MB\n' "$1" "$(status VmRSS)" "$(status VmHWM)"; }
passes() {
    curl -fsS "$API/metrics" | awk '$1 == "ratekeeper_sync_passes_total{result=\"ok\"}" {print $2}'
}
# Waits until two more reconcile passes have ended: the second began after the call.
two_passes() {
    local start
    start=$(passes)
    until (($(passes) >= start + 2)); do sleep 0.2; done
}
acquire_status() {
    curl -s -o /dev/null -w '%{http_code}' -X POST "$API/v1/acquire" \
        -H "Authorization: Bearer $KEY" -d "{\"resource\":\"$1\",\"permits\":1}"
}

phase_end "started, no policies"

phase_start
python3 - "$TMP/bench.db" "$N" <<'PY'
import json, sqlite3, sys, time
db = sqlite3.connect(sys.argv[1]); n = int(sys.argv[2]); now = int(time.time() * 1000)
(app,) = db.execute("SELECT id FROM apps WHERE slug = 'bench'").fetchone()
db.executemany(
    "INSERT INTO policies (id, name, app_id, algorithm, rate, max_permits, allowed_apps, "
    "failure_mode, enabled, description, version, created_ms, updated_ms) "
    "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
    [(f"m{i:015x}", f"p{i}", app, "token_bucket", 1000000.0, 1000000000,
      json.dumps(["bench"]), "closed", 1, "", 1, now, now) for i in range(n)])
db.commit()
PY
until [[ $(acquire_status "p$((N - 1))") == 200 ]]; do sleep 0.5; done
two_passes
phase_end "$N policies loaded by a full pass"

curl -fsS -X POST "$API/api/v1/policies" "${auth[@]}" -H 'content-type: application/json' \
    -d '{"name":"users","owner_app":"bench","scope":"per_key","rate":0.01,"max_permits":1000000000}' >/dev/null
phase_start
start=0,0
walked=0
while ((walked < KEYS)); do
    wrk -t2 -c64 -d"$DURATION" -H "Authorization: Bearer $KEY" -s bench/acquire_keyed.lua \
        "$API/v1/acquire" -- users "$KEYS" u "$start" >"$TMP/keyed.txt"
    walked=$((walked + $(awk '/^walk / {sub("walked=", "", $4); s += $4} END {print s}' "$TMP/keyed.txt")))
    start=$(awk '/^walk / {sub("next=", "", $5); printf "%s%s", sep, $5; sep = ","}' "$TMP/keyed.txt")
done
phase_end "per_key over $walked keys"

phase_start
wrk -t2 -c64 -d"$DURATION" -H "Authorization: Bearer $KEY" -s bench/acquire_many.lua \
    "$API/v1/acquire" -- "$N" p >"$TMP/many.txt"
phase_end "acquires over the $N policies ($(awk '/Requests\/sec/ {printf "%d/s", $2}' "$TMP/many.txt"))"
phase_start
sleep 6
phase_end "6 s later"

phase_start
curl -fsS -X PATCH "$API/api/v1/policies/p0" "${auth[@]}" -H 'content-type: application/json' \
    -d '{"rate":999999}' >/dev/null
two_passes
phase_end "a full pass after one edit"
