#!/usr/bin/env bash
# Where the server's CPU goes per acquire, counted by valgrind's callgrind in instructions
# (repeatable whatever else the machine is doing, unlike seconds): the release server on
# SQLite and a private Redis, a never-reached policy of the scenario, wrk with 8
# connections for DURATION seconds after a warm-up, the counters zeroed before and dumped
# after, so the figure is the requests' alone. Then the same for the parse-only handler
# `h` (examples/bare_acquire.rs, POST /noop) as the reference, and the functions that
# take most of the server's instructions (inclusive).
#
#   cargo build --release --bins --examples && bash bench/callgrind.sh hot
#   SCENARIO: hot (one global policy), keyed (a per_key policy, 100,000 keys), many
#   (10,000 global policies), denied (a policy that denies every request)
#   DURATION=20 BIN=/path/to/another/ratekeeper bash bench/callgrind.sh many
#
# Writes callgrind.out.* files into OUT (default: a temporary directory, removed at the
# end) for callgrind_annotate. Uses free loopback ports; needs valgrind, redis-server,
# wrk, curl and python3.
set -euo pipefail
cd "$(dirname "$0")/.."
SCENARIO=${1:-hot}
BIN=${BIN:-target/release/ratekeeper}
BARE=${BARE:-target/release/examples/bare_acquire}
DURATION=${DURATION:-15}
PREFIX=cg
source bench/private_server.sh
kill "$SERVER_PID" && wait "$SERVER_PID" 2>/dev/null || true
SERVER_PID=""
OUT=${OUT:-$TMP}
mkdir -p "$OUT"

policy() {
    curl -fsS -X POST "$API/api/v1/policies" "${auth[@]}" -H 'content-type: application/json' \
        -d "$1" >/dev/null
}
# Starts "$2..." under callgrind as "$1" and waits until it answers (any HTTP status).
under_callgrind() {
    valgrind --tool=callgrind --callgrind-out-file="$OUT/callgrind.out.$1" "${@:2}" \
        >"$TMP/$1.log" 2>&1 &
    SERVER_PID=$!
    for _ in $(seq 1 600); do
        curl -s -o /dev/null "$API/healthz" && break
        sleep 0.2
    done
}
# Instructions between a zeroing and a dump, divided by the requests wrk answered:
# measure LABEL SCRIPT URL [SCRIPT ARGUMENTS...]. Prints the figure, then the dump's path.
measure() {
    local label=$1 script=$2 url=$3
    shift 3
    local load=(-t1 -c8 -H "Authorization: Bearer $KEY" -s "$script")
    wrk "${load[@]}" -d3s "$url" -- "$@" >/dev/null
    callgrind_control -z "$SERVER_PID" >/dev/null
    wrk "${load[@]}" -d"${DURATION}s" "$url" -- "$@" >"$TMP/wrk.txt"
    callgrind_control -d "$label" "$SERVER_PID" >/dev/null
    local requests dump
    requests=$(awk '/requests in/ {print $1}' "$TMP/wrk.txt")
    dump=$(ls -t "$OUT"/callgrind.out.* | head -1)
    python3 - "$label" "$requests" "$dump" <<'PY'
import sys
label, requests, dump = sys.argv[1], int(sys.argv[2]), sys.argv[3]
total = next(int(l.split()[1]) for l in open(dump) if l.startswith(("summary:", "totals:")))
print(f"{label}: {requests} requests, {total / requests:,.0f} instructions per request")
PY
    echo "$dump"
}

# The server, with the scenario's policies.
under_callgrind server "$BIN" serve
case $SCENARIO in
hot)
    policy '{"name":"hot","owner_app":"bench","rate":1000000,"max_permits":1000000000}'
    LOAD=(bench/acquire_one.lua hot 1)
    ;;
denied)
    policy '{"name":"none","owner_app":"bench","rate":0.001,"max_permits":1}'
    LOAD=(bench/acquire_one.lua none 1)
    ;;
keyed)
    policy '{"name":"users","owner_app":"bench","rate":1000000,"max_permits":1000000000,"scope":"per_key"}'
    LOAD=(bench/acquire_keyed.lua users 100000 u 0)
    ;;
many)
    for i in $(seq 0 999); do
        policy "{\"name\":\"p$i\",\"owner_app\":\"bench\",\"rate\":1000000,\"max_permits\":1000000000}"
    done
    LOAD=(bench/acquire_many.lua 1000 p)
    ;;
*)
    echo "unknown scenario $SCENARIO (hot, denied, keyed, many)" >&2
    exit 2
    ;;
esac
dump=$(measure "$SCENARIO" "${LOAD[0]}" "$API/v1/acquire" "${LOAD[@]:1}")
echo "$dump" | head -1
# (head closes the pipe early: not a failure.)
callgrind_annotate --inclusive=yes "$(echo "$dump" | tail -1)" 2>/dev/null | sed -n '/Ir/,$p' |
    head -45 || true
kill "$SERVER_PID" && wait "$SERVER_PID" 2>/dev/null || true

# The reference: the parse-only handler, under the same load.
under_callgrind bare "$BARE" "127.0.0.1:$HTTP_PORT" "$RATEKEEPER_REDIS_URL" 'cg:{p}' bench
dump=$(measure h bench/acquire_one.lua "$API/noop" hot 1)
echo "$dump" | head -1
kill "$SERVER_PID" && wait "$SERVER_PID" 2>/dev/null || true
SERVER_PID=""
