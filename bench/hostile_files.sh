#!/usr/bin/env bash
# Policy files that would make a server work hard, measured (not a test: it prints and
# asserts nothing):
#  1. the acquire API's latency (wrk, one connection per client, BENCH_SECONDS each) with
#     nothing else going on, then while BENCH_FILES (8) files of each hostile kind are
#     posted to POST /api/v1/apply?dry_run=true again and again: nested 60,000 deep
#     (120 KB), an alias bomb (anchors repeating each other, 10^8 values from 400 bytes),
#     100,001 policies (3 MB, one over the cap), and one over the size cap (16 MiB + 1);
#  2. how long a file of 100,000 policies (5.6 MB) takes to plan over the API and with
#     the CLI against the database directly, and how long the API takes to apply it.
#
#   bash bench/hostile_files.sh      # needs target/release/ratekeeper (cargo build --release)
#
# A private Redis on a free loopback port and ratekeeper (release build, SQLite in a temp
# dir) with one policy of 1,000,000/s.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN=${BENCH_BIN:-$ROOT/target/release/ratekeeper}
SECONDS_EACH=${BENCH_SECONDS:-10}
FILES=${BENCH_FILES:-8}
CONNECTIONS=${BENCH_CONNECTIONS:-8}
[[ -x $BIN ]] || { echo "no $BIN: cargo build --release first" >&2; exit 1; }
for cmd in redis-server redis-cli python3 curl wrk; do
    command -v "$cmd" >/dev/null || { echo "$cmd is required" >&2; exit 1; }
done

PREFIX=hostile
# shellcheck source=bench/private_server.sh
. "$ROOT/bench/private_server.sh"
curl -fsS -X POST "$API/api/v1/policies" "${auth[@]}" \
    -d '{"name":"hot","owner_app":"bench","rate":1000000,"max_permits":1000000000}' >/dev/null
sleep 1 # the key reaches the snapshot (a change notice); this is set-up, not measured

python3 - "$TMP" <<'PY'
import sys
tmp = sys.argv[1]
open(f"{tmp}/deep.yaml", "w").write("app: bench\npolicies: " + "[" * 60000 + "]" * 60000 + "\n")
bomb = "app: bench\nx0: &a0 [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]\n"
for level in range(1, 8):
    bomb += f"x{level}: &a{level} [" + ", ".join([f"*a{level - 1}"] * 10) + "]\n"
open(f"{tmp}/bomb.yaml", "w").write(bomb + "policies: []\n")
open(f"{tmp}/many.yaml", "w").write("app: bench\npolicies:\n" + "  - {name: a, max_permits: 1}\n" * 100001)
open(f"{tmp}/huge.yaml", "w").write("#" * (16 * 1024 * 1024 + 1))
lines = ["app: bench", "policies:"]
for i in range(100000):
    lines.append(f"  - name: bulk.{i}\n    rate: 10/s\n    max_permits: 20")
open(f"{tmp}/p100k.yaml", "w").write("\n".join(lines) + "\n")
PY

p99() { awk '$1 == "99%" {print $2}' "$1"; }
p50() { awk '$1 == "50%" {print $2}' "$1"; }
rps() { awk '/Requests\/sec/ {print $2}' "$1"; }
acquire_load() {
    wrk -t1 -c"$CONNECTIONS" -d"${SECONDS_EACH}s" --latency -H "Authorization: Bearer $KEY" \
        -s "$ROOT/bench/acquire_one.lua" "$API/v1/acquire" -- hot 1 >"$1"
}

acquire_load "$TMP/quiet.txt"

# Each poster sends its file again and again until told to stop; it counts the answers
# by status.
post_loop() {
    local file=$1 out=$2
    while [[ ! -e $TMP/stop ]]; do
        curl -s -o /dev/null -w '%{http_code}\n' -X POST "$API/api/v1/apply?dry_run=true" \
            "${auth[@]}" -H 'content-type: application/yaml' --data-binary "@$file" >>"$out" || true
    done
}
for kind in deep bomb many huge; do
    for n in $(seq 1 "$FILES"); do
        post_loop "$TMP/$kind.yaml" "$TMP/answers.$kind.$n" &
    done
done
sleep 1
acquire_load "$TMP/hostile.txt"
touch "$TMP/stop"
wait $(jobs -p | grep -v "^$SERVER_PID$") 2>/dev/null || true

echo "acquire API, $CONNECTIONS connections, ${SECONDS_EACH}s each:"
printf '  %-40s %10s req/s  p50 %8s  p99 %8s\n' "quiet" "$(rps "$TMP/quiet.txt")" \
    "$(p50 "$TMP/quiet.txt")" "$(p99 "$TMP/quiet.txt")"
printf '  %-40s %10s req/s  p50 %8s  p99 %8s\n' "$FILES files of each kind posted meanwhile" \
    "$(rps "$TMP/hostile.txt")" "$(p50 "$TMP/hostile.txt")" "$(p99 "$TMP/hostile.txt")"
echo "answers to the hostile files (status: count):"
for kind in deep bomb many huge; do
    printf '  %-5s %s\n' "$kind" "$(cat "$TMP"/answers."$kind".* | sort | uniq -c | awk '{printf "%s: %s  ", $2, $1}')"
done
echo "server: $(ps -o rss= -p "$SERVER_PID" | awk '{printf "%.0f MB RSS", $1/1024}') after the run"

echo "a file of 100,000 policies (5.6 MB):"
curl -s -o "$TMP/plan.json" -w '  API plan (dry run)        %{time_total} s, HTTP %{http_code}\n' \
    -X POST "$API/api/v1/apply?dry_run=true" "${auth[@]}" -H 'content-type: application/yaml' \
    --data-binary "@$TMP/p100k.yaml"
TIMEFORMAT='  CLI plan (database)       %R s'
time "$BIN" policies plan "$TMP/p100k.yaml" >/dev/null
PLAN_ID=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["plan_id"])' "$TMP/plan.json")
curl -s -o /dev/null -w '  API apply (by plan_id)    %{time_total} s, HTTP %{http_code}\n' \
    -X POST "$API/api/v1/apply?plan_id=$PLAN_ID" "${auth[@]}" -H 'content-type: application/yaml' \
    --data-binary "@$TMP/p100k.yaml"
curl -s -o /dev/null -w '  API plan again (unchanged) %{time_total} s, HTTP %{http_code}\n' \
    -X POST "$API/api/v1/apply?dry_run=true" "${auth[@]}" -H 'content-type: application/yaml' \
    --data-binary "@$TMP/p100k.yaml"
echo "server: $(ps -o rss= -p "$SERVER_PID" | awk '{printf "%.0f MB RSS", $1/1024}') at the end"
