#!/usr/bin/env bash
# bench/acquire.sh: measure ratekeeper's acquire path against its own ceilings, in one run.
#
# Builds the release binary, starts a private Redis and a private ratekeeper on loopback
# (free ports, temporary SQLite database), creates an admin, a token, an application, an
# API key and 10,000 + 4 policies through the CLI and the admin JSON API, then runs, in
# rounds (BENCH_ROUNDS, 3: every scenario of round 1, then of round 2, ...):
#   a) wrk: granted acquires on one hot policy
#   f) wrk: granted acquires on one per_key policy over 100,000 keys (a bucket each;
#      bench/acquire_keyed.lua), walked in order, each round going on where the last
#      stopped, so the distinct keys seen are counted; right after a) for a fair comparison
#   g) wrk: the same over 1,000 keys (the top-callers sets' memory at both sizes)
#   b) wrk: granted acquires spread over 10,000 policies (bench/acquire_many.lua)
#   c) wrk: GET /healthz of the same server, the no-op HTTP ceiling
#   d) wrk: a denied flood on a policy of 1 permit per second (nearly all 429)
#   h) wrk: POST /noop of examples/bare_acquire.rs, built beside the server: the same body
#      parsed by the same HTTP stack, and a fixed reply (the no-op ceiling of this request)
#   i) wrk: POST /v1/acquire of the same example: parse, one EVALSHA of the same token
#      bucket script, reply (the bare one-script-per-request handler)
# and once, after the rounds:
#   e) redis-benchmark: EVALSHA of lua/token_bucket.lua (with the lua/lib/ files it loads)
#      straight against Redis
# In round 1 only: the Redis memory around f and b, of the keyed buckets (MEMORY USAGE of
# a sample) and of the top callers' sets; the server's VmRSS and VmHWM after each
# scenario (also at start-up, once the policies are in Redis, and at the end). Then
# examples/top_keys_memory.rs (one worker's sketch for 1,000 to 1,000,000 distinct
# callers), examples/script_cost.rs once the server is stopped (Redis' own time in the
# acquire scripts per call and per acquire, by batch shape and size, on the same Redis),
# and a table of the rounds' medians (req/s, latency, and the CPU time per request of the
# process serving each scenario and of Redis) with the ratios of the budget in
# bench/README.md, also written to bench/results/<timestamp>.txt with wrk's raw output of
# every round. It is a benchmark, not a test: it asserts nothing about time and exits
# non-zero only when the setup fails.
#
# Knobs (environment): BENCH_DURATION (10s), BENCH_ROUNDS (3), BENCH_SKIP_BUILD (0),
# BENCH_WARMUP (2s, 0 to skip; once, before round 1), BENCH_CONNECTIONS (64),
# BENCH_THREADS (2), BENCH_POLICIES (10000), BENCH_CREATE_PARALLEL (8),
# BENCH_REDIS_REQUESTS (200000), BENCH_BIN (target/release/ratekeeper), BENCH_KEEP_TMP (0;
# 1 keeps the temporary directory), BENCH_POLICY (the JSON fields of the granted
# scenarios' policies; see HUGE_POLICY), BENCH_KEYS (100000: the keys of scenario f),
# BENCH_KEYED_POLICY (see KEYED_POLICY), BENCH_BARE_BIN (target/release/examples/bare_acquire),
# BENCH_COST_BIN (target/release/examples/script_cost).
set -euo pipefail
export LC_ALL=C # '.' decimals in awk, one sort order for sort and comm
# The script's own stdout and stderr, for cleanup: a trap runs inside the redirections of
# the command it interrupted (a wrk run writing to its output file), and cleanup's
# messages belong where the caller sees them.
exec {OUT_FD}>&1 {ERR_FD}>&2

SCRIPT_DIR=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd -- "$SCRIPT_DIR/.." && pwd)

DURATION=${BENCH_DURATION:-10s}
ROUNDS=${BENCH_ROUNDS:-3}
WARMUP=${BENCH_WARMUP:-2s}
SKIP_BUILD=${BENCH_SKIP_BUILD:-0}
CONNECTIONS=${BENCH_CONNECTIONS:-64}
THREADS=${BENCH_THREADS:-2}
POLICIES=${BENCH_POLICIES:-10000}
CREATE_PARALLEL=${BENCH_CREATE_PARALLEL:-8}
RB_REQUESTS=${BENCH_REDIS_REQUESTS:-200000}
KEYS=${BENCH_KEYS:-100000}
FEW_KEYS=1000
BIN=${BENCH_BIN:-$ROOT/target/release/ratekeeper}
BARE_BIN=${BENCH_BARE_BIN:-$ROOT/target/release/examples/bare_acquire}
COST_BIN=${BENCH_COST_BIN:-$ROOT/target/release/examples/script_cost}
KEEP_TMP=${BENCH_KEEP_TMP:-0}

PREFIX=bench                  # RATEKEEPER_REDIS_PREFIX of the server under test
APP=bench
ADMIN=bench
ADMIN_PASSWORD=bench-password-123
# The granted scenarios' policies: a limit never reached. BENCH_POLICY replaces it, to
# measure another algorithm, e.g. '"algorithm":"fixed_window","window_ms":1000,
# "max_permits":1000000000' or '"algorithm":"gcra","rate":1000000,"max_permits":1000000000'.
HUGE_POLICY=${BENCH_POLICY:-'"rate":1000000,"max_permits":1000000000'}
# The keyed scenarios' policy: never denied either, but refilling slowly, so that each
# key's bucket outlives the run (its TTL is its time to full) and its memory is measured.
KEYED_POLICY=${BENCH_KEYED_POLICY:-'"rate":0.01,"max_permits":1000000000'}
# redis-benchmark's bucket lives outside the server's prefix: the server's reconcile
# deletes every `bench:{...}` key that has no policy in SQL, and would delete this one.
RB_KEY='rbench:{rb}'
BARE_KEY='rbare:{hot}'
SHARED_REDIS_PORT=6379        # never touched

log() { printf '[bench %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }
die() {
    log "ERROR: $*"
    exit 1
}

# ---------------------------------------------------------------------------------------
# Arguments and environment

[[ $# -eq 0 ]] || die "no arguments; use the BENCH_* environment variables (see the header)"
[[ $DURATION =~ ^[1-9][0-9]*[smh]?$ ]] || die "BENCH_DURATION must look like 10s, 1m or 30 (got '$DURATION')"
[[ $WARMUP =~ ^[0-9]+[smh]?$ ]] || die "BENCH_WARMUP must look like 2s or 0 (got '$WARMUP')"
for knob in ROUNDS CONNECTIONS THREADS POLICIES CREATE_PARALLEL RB_REQUESTS KEYS; do
    [[ ${!knob} =~ ^[1-9][0-9]*$ ]] || die "BENCH_$knob must be a positive integer (got '${!knob}')"
done
((CONNECTIONS >= THREADS)) || die "BENCH_CONNECTIONS must be at least BENCH_THREADS"
((KEYS >= THREADS && FEW_KEYS >= THREADS)) || die "BENCH_KEYS must be at least BENCH_THREADS (each thread walks its own keys)"
((BASH_VERSINFO[0] >= 4)) || die "bash 4 or newer needed"

# Seconds of a wrk duration (10s, 2m, 1h, 30).
duration_s() {
    local d=$1
    case $d in
    *h) echo $((${d%h} * 3600)) ;;
    *m) echo $((${d%m} * 60)) ;;
    *s) echo "${d%s}" ;;
    *) echo "$d" ;;
    esac
}

now_s() {
    if [[ -n ${EPOCHREALTIME:-} ]]; then
        echo "${EPOCHREALTIME/,/.}"
    else
        date +%s.%N
    fi
}
seconds_since() { awk -v a="$1" -v b="$(now_s)" 'BEGIN { printf "%.1f", b - a }'; }

# ---------------------------------------------------------------------------------------
# Cleanup: only what this script started, by pid

TMP=$(mktemp -d "${TMPDIR:-/tmp}/ratekeeper-bench.XXXXXX")
SERVER_PID=
BARE_PID=
CHILD_PID=
REDIS_PID=
REDIS_PORT=

stop_server() {
    [[ -n $SERVER_PID ]] || return 0
    if kill -0 "$SERVER_PID" 2>/dev/null; then
        kill -TERM "$SERVER_PID" 2>/dev/null || true
        local i
        for ((i = 0; i < 50; i++)); do
            kill -0 "$SERVER_PID" 2>/dev/null || break
            sleep 0.2
        done
        if kill -0 "$SERVER_PID" 2>/dev/null; then
            log "ratekeeper did not stop within 10 s of SIGTERM; sending SIGKILL"
            kill -KILL "$SERVER_PID" 2>/dev/null || true
        fi
    fi
    wait "$SERVER_PID" 2>/dev/null || true
    SERVER_PID=
}

stop_bare() {
    [[ -n $BARE_PID ]] || return 0
    kill -TERM "$BARE_PID" 2>/dev/null || true
    wait "$BARE_PID" 2>/dev/null || true
    BARE_PID=
}

stop_redis() {
    [[ -n $REDIS_PID ]] || return 0
    timeout 5 redis-cli -h 127.0.0.1 -p "$REDIS_PORT" SHUTDOWN NOSAVE >/dev/null 2>&1 || true
    local i
    for ((i = 0; i < 50; i++)); do
        kill -0 "$REDIS_PID" 2>/dev/null || break
        sleep 0.1
    done
    # Only the process this script started: check its name, in case the pid was reused.
    if kill -0 "$REDIS_PID" 2>/dev/null &&
        [[ $(cat "/proc/$REDIS_PID/comm" 2>/dev/null || true) == redis-server* ]]; then
        kill -KILL "$REDIS_PID" 2>/dev/null || true
    fi
    REDIS_PID=
}

# interruptible CMD...: runs CMD in the background and waits for it. Bash runs a trap only
# once the foreground command is done; `wait` returns at once on a signal, so Ctrl-C or
# SIGTERM stops a 10 s wrk run (cleanup sends CMD a SIGTERM) instead of waiting it out.
interruptible() {
    "$@" &
    CHILD_PID=$!
    local status=0
    wait "$CHILD_PID" || status=$?
    CHILD_PID=
    return "$status"
}

stop_child() {
    [[ -n $CHILD_PID ]] || return 0
    kill -TERM "$CHILD_PID" 2>/dev/null || true
    local i
    for ((i = 0; i < 50; i++)); do
        kill -0 "$CHILD_PID" 2>/dev/null || break
        sleep 0.1
    done
    kill -KILL "$CHILD_PID" 2>/dev/null || true
    wait "$CHILD_PID" 2>/dev/null || true
    CHILD_PID=
}

cleanup() {
    local rc=$?
    set +e
    trap - EXIT INT TERM
    exec 1>&"$OUT_FD" 2>&"$ERR_FD"
    stop_child
    stop_server
    stop_bare
    stop_redis
    if ((rc != 0)); then
        if [[ -s $TMP/server.log ]]; then
            log "last lines of the ratekeeper log ($TMP/server.log):"
            tail -n 40 "$TMP/server.log" >&2
        fi
        if [[ -n $(find "$TMP" -name '*.log' -print -quit 2>/dev/null) ]]; then
            log "failed (exit $rc); temporary files kept in $TMP"
        else
            rm -rf -- "$TMP"
        fi
    elif [[ $KEEP_TMP == 1 ]]; then
        log "temporary files kept in $TMP"
    else
        rm -rf -- "$TMP"
    fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# ---------------------------------------------------------------------------------------
# Tools

SUDO=()
if [[ $(id -u) -ne 0 ]] && command -v sudo >/dev/null 2>&1; then
    SUDO=(sudo -n)
fi
APT_UPDATED=0

# ensure_tool COMMAND PACKAGE: apt-get install PACKAGE when COMMAND is missing; apt-get
# update only when the install fails, then try once more.
ensure_tool() {
    local cmd=$1 pkg=$2
    command -v "$cmd" >/dev/null 2>&1 && return 0
    command -v apt-get >/dev/null 2>&1 || die "$cmd is missing and apt-get is not available; install $pkg"
    log "installing $pkg (for $cmd)"
    if ! timeout 600 "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y "$pkg" \
        >>"$TMP/apt.log" 2>&1; then
        if ((APT_UPDATED == 0)); then
            log "apt-get install $pkg failed; running apt-get update first"
            timeout 600 "${SUDO[@]}" apt-get update >>"$TMP/apt.log" 2>&1 ||
                die "apt-get update failed (see $TMP/apt.log)"
            APT_UPDATED=1
        fi
        timeout 600 "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y "$pkg" \
            >>"$TMP/apt.log" 2>&1 || die "apt-get install $pkg failed (see $TMP/apt.log)"
    fi
    command -v "$cmd" >/dev/null 2>&1 || die "$cmd still missing after installing $pkg"
}

for cmd in curl python3 awk timeout mktemp; do
    command -v "$cmd" >/dev/null 2>&1 || die "$cmd is required"
done
ensure_tool wrk wrk
ensure_tool redis-server redis-server
ensure_tool redis-cli redis-tools
ensure_tool redis-benchmark redis-tools

for lua in crates/limiter/lua/token_bucket.lua crates/limiter/lua/lib/token_bucket.lua; do
    [[ -f $ROOT/$lua ]] || die "missing $ROOT/$lua"
done
for script in acquire_one.lua acquire_many.lua acquire_keyed.lua; do
    [[ -f $SCRIPT_DIR/$script ]] || die "missing bench/$script"
done

# ---------------------------------------------------------------------------------------
# Build

if [[ $SKIP_BUILD == 1 ]]; then
    log "BENCH_SKIP_BUILD=1: using the existing $BIN"
else
    command -v cargo >/dev/null 2>&1 || die "cargo not found (or set BENCH_SKIP_BUILD=1)"
    log "cargo build --release (a clean build takes minutes on 2 cores)"
    (cd -- "$ROOT" && cargo build --release --bin ratekeeper --example top_keys_memory \
        --example bare_acquire --example script_cost) ||
        die "cargo build --release failed"
fi
[[ -x $BIN ]] || die "no executable $BIN (build it, or point BENCH_BIN at one)"

# ---------------------------------------------------------------------------------------
# Ports (loopback only)

port_is_free() {
    python3 - "$1" <<'PY'
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
# As redis-server and actix do: a port in TIME_WAIT is free, a listening one is not.
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
try:
    s.bind(("127.0.0.1", int(sys.argv[1])))
except OSError:
    sys.exit(1)
finally:
    s.close()
PY
}

find_free_port() {
    local p
    for ((p = $1; p < $1 + 500; p++)); do
        ((p == SHARED_REDIS_PORT)) && continue
        if port_is_free "$p"; then
            echo "$p"
            return 0
        fi
    done
    return 1
}

# ---------------------------------------------------------------------------------------
# Private Redis

REDIS_PORT=$(find_free_port 6390) || die "no free port for Redis from 6390"
((REDIS_PORT != SHARED_REDIS_PORT)) || die "refusing to use the shared Redis port"
rcli() { timeout 60 redis-cli -h 127.0.0.1 -p "$REDIS_PORT" "$@"; }

log "starting a private Redis on 127.0.0.1:$REDIS_PORT"
redis-server --bind 127.0.0.1 --port "$REDIS_PORT" --save "" --appendonly no \
    --daemonize yes --pidfile "$TMP/redis.pid" --dir "$TMP" --logfile "$TMP/redis.log" ||
    die "redis-server did not start (see $TMP/redis.log)"
for ((i = 0; i < 100; i++)); do
    [[ -s $TMP/redis.pid ]] && [[ $(rcli PING 2>/dev/null || true) == PONG ]] && break
    sleep 0.1
done
[[ -s $TMP/redis.pid ]] || die "Redis wrote no pid file within 10 s (see $TMP/redis.log)"
REDIS_PID=$(<"$TMP/redis.pid")
[[ $(rcli PING 2>/dev/null || true) == PONG ]] || die "Redis does not answer PING (see $TMP/redis.log)"
# Make sure the Redis on that port is the one just started (not one that won a race).
REDIS_SEEN_PID=$(rcli INFO server | tr -d '\r' | awk -F: '$1 == "process_id" { print $2 }')
[[ $REDIS_SEEN_PID == "$REDIS_PID" ]] ||
    die "the Redis on port $REDIS_PORT is not the one this script started (pid $REDIS_SEEN_PID, not $REDIS_PID)"

redis_used_memory() {
    rcli INFO memory | tr -d '\r' | awk -F: '$1 == "used_memory" { print $2 }'
}
count_keyed_buckets() {
    rcli --scan --pattern "$PREFIX:k:*" | grep -c . || true
}
# keyed_memory_usage N: the mean MEMORY USAGE of N keyed buckets (the first SCAN finds).
keyed_memory_usage() {
    rcli --scan --pattern "$PREFIX:k:*" | head -n "$1" >"$TMP/keyed.sample" || true
    [[ -s $TMP/keyed.sample ]] || { echo n/a; return 0; }
    while IFS= read -r key; do printf 'MEMORY USAGE %s\n' "$key"; done <"$TMP/keyed.sample" |
        rcli | awk '$1 ~ /^[0-9]+$/ { sum += $1; n++ } END { if (n) printf "%.0f %d", sum / n, n; else print "n/a" }'
}
# top_sets POLICY: "<sets> <largest ZCARD> <total MEMORY USAGE>" of its top callers' sets.
top_sets() {
    local sets=0 largest=0 bytes=0 key card usage
    while IFS= read -r key; do
        [[ -n $key ]] || continue
        card=$(rcli ZCARD "$key") usage=$(rcli MEMORY USAGE "$key")
        sets=$((sets + 1)) bytes=$((bytes + usage))
        ((card > largest)) && largest=$card
    done < <(rcli --scan --pattern "$PREFIX:top:{$1}:*")
    echo "$sets $largest $bytes"
}
count_policy_keys() {
    # Keys of p0..pN-1 only (pattern p[0-9]*), not hot or tight.
    rcli --scan --pattern "$PREFIX:{p[0-9]*}" | grep -c . || true
}

# ---------------------------------------------------------------------------------------
# ratekeeper: CLI set-up, then the server

HTTP_PORT=$(find_free_port 18080) || die "no free port for ratekeeper from 18080"
BASE="http://127.0.0.1:$HTTP_PORT"

: >"$TMP/bench.db" # an empty file is a valid new SQLite database
export RATEKEEPER_DATABASE_URL="sqlite://$TMP/bench.db"
export RATEKEEPER_REDIS_URL="redis://127.0.0.1:$REDIS_PORT"
export RATEKEEPER_LISTEN="127.0.0.1:$HTTP_PORT"
export RATEKEEPER_REDIS_PREFIX=$PREFIX
export RUST_LOG=warn

log "ratekeeper migrate, then the admin '$ADMIN' and a personal access token"
timeout 300 "$BIN" migrate >"$TMP/migrate.log" 2>&1 ||
    die "ratekeeper migrate failed: $(tail -n 20 "$TMP/migrate.log")"
printf '%s\n' "$ADMIN_PASSWORD" | timeout 120 "$BIN" user create "$ADMIN" --admin \
    >"$TMP/user-create.log" 2>&1 ||
    die "ratekeeper user create failed: $(tail -n 20 "$TMP/user-create.log")"
TOKEN_OUT=$(timeout 120 "$BIN" token create "$ADMIN" 2>"$TMP/token-create.log") ||
    die "ratekeeper token create failed: $(tail -n 20 "$TMP/token-create.log")"
# The token is alone on its line; take the last non-empty line in case anything else
# reached stdout.
TOKEN=$(printf '%s\n' "$TOKEN_OUT" | awk 'NF { last = $0 } END { print last }' | tr -d '[:space:]')
[[ -n $TOKEN ]] || die "ratekeeper token create printed no token"

log "starting ratekeeper on $BASE"
"$BIN" serve >"$TMP/server.log" 2>&1 &
SERVER_PID=$!

server_alive() { kill -0 "$SERVER_PID" 2>/dev/null; }
# die_server MESSAGE: the server is gone; reap it (not in a subshell: only this shell can
# wait for it) and fail with its exit status.
die_server() {
    local status=0 how
    wait "$SERVER_PID" 2>/dev/null || status=$?
    SERVER_PID=
    if ((status > 128)); then
        how="killed by signal $((status - 128))"
    else
        how="exit status $status"
    fi
    die "$1 ($how)"
}

start=$(now_s)
deadline=$((SECONDS + 30))
until [[ $(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "$BASE/healthz" || true) == 200 ]]; do
    server_alive || die_server "ratekeeper exited during start-up"
    ((SECONDS < deadline)) || die "GET /healthz did not answer 200 within 30 s"
    sleep 0.2
done
log "ratekeeper is up after $(seconds_since "$start") s"

# The server's memory: VmRSS (resident now) and VmHWM (the peak so far) of its process,
# in kB as /proc gives them, at a few points of the run, for the report.
MEM_POINTS=() MEM_RSS=() MEM_HWM=()
record_server_memory() { # LABEL
    local rss=n/a hwm=n/a status=/proc/$SERVER_PID/status
    if [[ -r $status ]]; then
        read -r rss hwm < <(awk '$1 == "VmRSS:" { r = $2 } $1 == "VmHWM:" { h = $2 }
            END { print (r == "" ? "n/a" : r), (h == "" ? "n/a" : h) }' "$status" 2>/dev/null) || true
    fi
    MEM_POINTS+=("$1") MEM_RSS+=("${rss:-n/a}") MEM_HWM+=("${hwm:-n/a}")
}
record_server_memory "start-up done"

# ---------------------------------------------------------------------------------------
# Admin JSON API

# api METHOD PATH [JSON]: sets API_CODE; the reply body is in $TMP/api.out.
api() {
    local method=$1 path=$2 body=${3:-}
    local args=(-sS --max-time 30 -o "$TMP/api.out" -w '%{http_code}' -X "$method"
        -H "Authorization: Bearer $TOKEN" -H 'Accept: application/json')
    if [[ -n $body ]]; then
        args+=(-H 'Content-Type: application/json' --data-binary "$body")
    fi
    API_CODE=$(curl "${args[@]}" "$BASE$path" 2>>"$TMP/curl.log") || API_CODE=000
}
# api_expect CODE METHOD PATH [JSON]: another 2xx than CODE only warns.
api_expect() {
    local want=$1
    shift
    api "$@"
    [[ $API_CODE == "$want" ]] && return 0
    if [[ $API_CODE == 2?? ]]; then
        log "WARNING: $1 $2 answered $API_CODE, the design says $want"
        return 0
    fi
    die "$1 $2 answered $API_CODE, wanted $want: $(head -c 600 "$TMP/api.out" 2>/dev/null || true)"
}
json_field() { # FILE FIELD
    python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2"
}

log "creating the application, its API key and the policies hot and tight"
api_expect 201 POST /api/v1/apps "{\"slug\":\"$APP\",\"name\":\"Bench\",\"description\":\"\"}"
api_expect 201 POST "/api/v1/apps/$APP/keys" '{"label":"bench"}'
KEY=$(json_field "$TMP/api.out" key) || die "no \"key\" in the key reply: $(head -c 600 "$TMP/api.out")"
[[ -n $KEY ]] || die "empty API key in the key reply"
api_expect 201 POST /api/v1/policies "{\"name\":\"hot\",\"owner_app\":\"$APP\",$HUGE_POLICY}"
api_expect 201 POST /api/v1/policies "{\"name\":\"tight\",\"owner_app\":\"$APP\",\"rate\":1,\"max_permits\":1}"
for keyed in users few; do
    api_expect 201 POST /api/v1/policies \
        "{\"name\":\"$keyed\",\"owner_app\":\"$APP\",\"scope\":\"per_key\",$KEYED_POLICY}"
done

sleep 1 # let the pushes of hot and tight land before the memory baseline
MEM_BEFORE=$(redis_used_memory)

# Policies p0..pN-1. One curl process runs every POST with --parallel (bounded, keep-alive)
# from a generated config file, which also keeps the token out of the process list; an
# older curl without --parallel falls back to xargs -P. Any that fail are retried once,
# one at a time, before giving up.
write_curl_config() { # NAMES_FILE -> config on stdout
    local name first=1
    while IFS= read -r name; do
        ((first)) || printf 'next\n'
        first=0
        printf 'url = "%s/api/v1/policies"\n' "$BASE"
        printf 'request = "POST"\n'
        printf 'header = "Authorization: Bearer %s"\n' "$TOKEN"
        printf 'header = "Content-Type: application/json"\n'
        printf 'data-binary = "{\\"name\\":\\"%s\\",\\"owner_app\\":\\"%s\\",%s}"\n' \
            "$name" "$APP" "${HUGE_POLICY//\"/\\\"}"
        printf 'output = "/dev/null"\n'
        printf 'write-out = "%%{http_code} %s\\n"\n' "$name"
        printf 'max-time = 60\n'
    done <"$1"
}

create_policies() { # NAMES_FILE PARALLEL CODES_FILE
    local names=$1 parallel=$2 codes=$3
    : >"$codes"
    if curl --help all 2>/dev/null | grep -q -- '--parallel-max'; then
        write_curl_config "$names" >"$TMP/policies.curlrc"
        interruptible curl -sS --parallel --parallel-max "$parallel" \
            -K "$TMP/policies.curlrc" >>"$codes" 2>>"$TMP/curl.log" || true
    else
        # shellcheck disable=SC2016 # $0 and $1 expand in the inner shell
        # -a, not <: a background command's stdin is /dev/null.
        interruptible xargs -a "$names" -P "$parallel" -n 1 sh -c 'curl -sS --max-time 60 -o /dev/null \
            -w "%{http_code} $1\n" -X POST -H "Authorization: Bearer $BENCH_TOKEN" \
            -H "Content-Type: application/json" \
            --data-binary "{\"name\":\"$1\",\"owner_app\":\"$BENCH_APP\",$BENCH_HUGE}" \
            "$0/api/v1/policies" || true' "$BASE" >>"$codes" 2>>"$TMP/curl.log"
    fi
}
export BENCH_TOKEN=$TOKEN BENCH_APP=$APP BENCH_HUGE=$HUGE_POLICY

for ((i = 0; i < POLICIES; i++)); do echo "p$i"; done >"$TMP/policies.names"
log "creating $POLICIES policies over HTTP ($CREATE_PARALLEL in parallel)"
start=$(now_s)
create_policies "$TMP/policies.names" "$CREATE_PARALLEL" "$TMP/policies.codes"
awk '$1 ~ /^2/ { print $2 }' "$TMP/policies.codes" | sort >"$TMP/policies.ok"
sort "$TMP/policies.names" | comm -23 - "$TMP/policies.ok" >"$TMP/policies.retry"
FIRST_FAILURES=$(grep -c . "$TMP/policies.retry" || true)
FIRST_FAILURE_CODES=
if ((FIRST_FAILURES > 0)); then
    FIRST_FAILURE_CODES=$(awk '$1 !~ /^2/ { print $1 }' "$TMP/policies.codes" | sort | uniq -c |
        awk '{ printf "%s%s x%s", sep, $2, $1; sep = ", " }')
    log "$FIRST_FAILURES creation(s) failed (codes: ${FIRST_FAILURE_CODES:-none recorded}); retrying them one at a time"
    server_alive || die_server "ratekeeper died while the policies were created"
    create_policies "$TMP/policies.retry" 1 "$TMP/policies.codes2"
    awk '$1 ~ /^2/ { print $2 }' "$TMP/policies.codes2" | sort >"$TMP/policies.ok2"
    still=$(comm -23 "$TMP/policies.retry" "$TMP/policies.ok2" | grep -c . || true)
    if ((still > 0)); then
        name=$(comm -23 "$TMP/policies.retry" "$TMP/policies.ok2" | head -n 1)
        api POST /api/v1/policies "{\"name\":\"$name\",\"owner_app\":\"$APP\",$HUGE_POLICY}"
        die "$still of $POLICIES policies could not be created; e.g. $name: $API_CODE $(head -c 600 "$TMP/api.out")"
    fi
fi
CREATE_S=$(seconds_since "$start")
CREATE_RATE=$(awk -v n="$POLICIES" -v s="$CREATE_S" 'BEGIN { printf "%.0f", (s > 0 ? n / s : 0) }')
log "created $POLICIES policies in $CREATE_S s ($CREATE_RATE/s)"

# The API answers after the SQL commit; the push to Redis follows. Wait for every key.
deadline=$((SECONDS + 60))
while :; do
    IN_REDIS=$(count_policy_keys)
    ((IN_REDIS >= POLICIES)) && break
    if ((SECONDS >= deadline)); then
        log "WARNING: only $IN_REDIS of $POLICIES policy keys in Redis after 60 s; going on"
        break
    fi
    sleep 0.5
done
SYNCED_S=$(seconds_since "$start")
log "$IN_REDIS policy keys in Redis $SYNCED_S s after the first POST"

record_server_memory "the $POLICIES policies in Redis"
MEM_AFTER=$(redis_used_memory)
MEM_KEY_CONFIG=$(rcli MEMORY USAGE "$PREFIX:{p1}" || true)
DBSIZE=$(rcli DBSIZE || true)

# ---------------------------------------------------------------------------------------
# Acquire probes: the new API key may reach the server's key snapshot a little later.

acquire_once() { # RESOURCE [KEY] -> HTTP code; body in $TMP/acquire.out
    local key=
    [[ -z ${2:-} ]] || key=",\"key\":\"$2\""
    curl -sS --max-time 5 -o "$TMP/acquire.out" -w '%{http_code}' -X POST \
        -H "Authorization: Bearer $KEY" -H 'Content-Type: application/json' \
        --data-binary "{\"resource\":\"$1\",\"permits\":1$key}" "$BASE/v1/acquire" \
        2>>"$TMP/curl.log" || echo 000
}
wait_granted() { # RESOURCE [KEY]
    local code deadline=$((SECONDS + 30))
    while :; do
        code=$(acquire_once "$1" "${2:-}")
        [[ $code == 200 ]] && return 0
        server_alive || die_server "ratekeeper died"
        ((SECONDS < deadline)) ||
            die "POST /v1/acquire {\"resource\":\"$1\"} still answers $code after 30 s: $(head -c 600 "$TMP/acquire.out")"
        sleep 0.5
    done
}
log "probing the acquire path"
wait_granted hot
SAMPLE_GRANTED=$(head -c 400 "$TMP/acquire.out")
wait_granted p0
wait_granted "p$((POLICIES - 1))"
wait_granted users probe
wait_granted few probe

# ---------------------------------------------------------------------------------------
# wrk scenarios, in rounds

# Results per run under NAME.ROUND (hot.1, hot.2, ...); after the rounds, per NAME, the
# medians of the rounds (req/s, p50, p99) and their sums (non-2xx, requests, errors).
declare -A RPS P50 P99 NON2XX REQS SOCKERR CPU_SERVER CPU_REDIS CPU_MACHINE
WRK_TIMEOUT=$(($(duration_s "$DURATION") + 60))
SCENARIOS=(hot keyed few many ceiling denied noop bare)
declare -A LABEL=(
    [hot]="a) acquire, 1 hot policy"
    [keyed]="f) acquire, per_key, $KEYS keys"
    [few]="g) acquire, per_key, $FEW_KEYS keys"
    [many]="b) acquire, $POLICIES policies"
    [ceiling]="c) GET /healthz (ceiling)"
    [denied]="d) acquire, denied flood"
    [redis]="e) redis-benchmark EVALSHA"
    [noop]="h) reference: parse only"
    [bare]="i) reference: parse + EVALSHA"
)

# parse_wrk NAME FILE: Requests/sec, 50% and 99% latency (ms), non-2xx, total, socket errors.
parse_wrk() {
    local name=$1 file=$2 line rps p50 p99 non req se
    line=$(awk '
        function ms(v,  n) {
            n = v + 0
            if (v ~ /us$/) return n / 1000
            if (v ~ /ms$/) return n
            if (v ~ /m$/) return n * 60000
            if (v ~ /s$/) return n * 1000
            return n
        }
        /^Requests\/sec:/ { rps = $2 }
        $1 == "50%" { p50 = sprintf("%.3f", ms($2)) }
        $1 == "99%" { p99 = sprintf("%.3f", ms($2)) }
        /Non-2xx or 3xx responses:/ { non = $NF }
        / requests in / { req = $1 }
        /Socket errors:/ { se = $4 + $6 + $8 + $10 }
        END {
            printf "%s %s %s %s %s %s\n", (rps == "" ? "n/a" : rps), (p50 == "" ? "n/a" : p50),
                (p99 == "" ? "n/a" : p99), (non == "" ? 0 : non), (req == "" ? "n/a" : req),
                (se == "" ? 0 : se)
        }' "$file")
    read -r rps p50 p99 non req se <<<"$line"
    RPS[$name]=$rps P50[$name]=$p50 P99[$name]=$p99
    NON2XX[$name]=$non REQS[$name]=$req SOCKERR[$name]=$se
}

# CPU time (user + system, in clock ticks) a process has used so far: fields 14 and 15 of
# /proc/PID/stat, that is the 12th and 13th after the command name in parentheses (which
# may hold spaces); n/a if the process is gone.
CLK_TCK=$(getconf CLK_TCK 2>/dev/null || echo 100)
cpu_ticks() { # PID
    local stat fields
    stat=$(cat "/proc/$1/stat" 2>/dev/null) || { echo n/a; return; }
    read -r -a fields <<<"${stat##*) }"
    echo $((fields[11] + fields[12]))
}
# CPU time (in clock ticks) the machine's cores have worked so far, whoever ran: the first
# line of /proc/stat, user, nice, system, irq and softirq (guest time is inside user; idle,
# iowait and the time the hypervisor gave to others, steal, are not work done here).
machine_ticks() {
    awk '$1 == "cpu" { print $2 + $3 + $4 + $7 + $8; found = 1; exit }
        END { if (!found) print "n/a" }' /proc/stat 2>/dev/null || echo n/a
}
# us of CPU per request: TICKS_BEFORE TICKS_AFTER REQUESTS -> us with one decimal, or n/a
cpu_per_request() {
    awk -v a="$1" -v b="$2" -v n="$3" -v hz="$CLK_TCK" 'BEGIN {
        if (a !~ /^[0-9]+$/ || b !~ /^[0-9]+$/ || n !~ /^[0-9]+$/ || n == 0) { print "n/a"; exit }
        printf "%.1f", (b - a) * 1e6 / hz / n }'
}

# run_wrk NAME ROUND DURATION URL [wrk options...] [-- script arguments...]: the results
# go to the arrays under NAME.ROUND, wrk's output to $TMP/wrk-NAME.ROUND.txt, and the CPU
# time per request of the process serving URL (ratekeeper, or bare_acquire for its
# scenarios), of Redis and of the whole machine (wrk included) during the run to
# CPU_SERVER, CPU_REDIS and CPU_MACHINE. Round 0 is the
# warm-up; round 1 also records the server's memory after each scenario.
run_wrk() {
    local name=$1 round=$2 dur=$3 url=$4
    shift 4
    local opts=() script_args=()
    while (($# > 0)); do
        if [[ $1 == -- ]]; then
            shift
            script_args=("$@")
            break
        fi
        opts+=("$1")
        shift
    done
    local out=$TMP/wrk-$name.$round.txt what="round $round of $ROUNDS"
    ((round > 0)) || what=warm-up
    local serving=$SERVER_PID
    if [[ -n ${BARE_BASE:-} && $url == "$BARE_BASE"/* ]]; then
        serving=$BARE_PID
    fi
    local server_before redis_before machine_before
    server_before=$(cpu_ticks "$serving") redis_before=$(cpu_ticks "$REDIS_PID")
    machine_before=$(machine_ticks)
    log "wrk $name ($what): $THREADS threads, $CONNECTIONS connections, $dur"
    # wrk wants the URL after its options and before `--` and the script's arguments.
    if interruptible timeout -k 5 "$WRK_TIMEOUT" wrk -t "$THREADS" -c "$CONNECTIONS" -d "$dur" --latency \
        "${opts[@]}" "$url" -- "${script_args[@]}" >"$out" 2>&1; then
        parse_wrk "$name.$round" "$out"
        CPU_SERVER[$name.$round]=$(cpu_per_request "$server_before" "$(cpu_ticks "$serving")" \
            "${REQS[$name.$round]}")
        CPU_REDIS[$name.$round]=$(cpu_per_request "$redis_before" "$(cpu_ticks "$REDIS_PID")" \
            "${REQS[$name.$round]}")
        CPU_MACHINE[$name.$round]=$(cpu_per_request "$machine_before" "$(machine_ticks)" \
            "${REQS[$name.$round]}")
    else
        log "WARNING: wrk $name failed:"
        tail -n 20 "$out" >&2 || true
        RPS[$name.$round]=n/a P50[$name.$round]=n/a P99[$name.$round]=n/a
        NON2XX[$name.$round]=n/a REQS[$name.$round]=n/a SOCKERR[$name.$round]=n/a
    fi
    server_alive || die_server "ratekeeper died during wrk $name"
    if ((round == 1)); then
        record_server_memory "after ${LABEL[$name]}, round 1"
    fi
}

# The keyed scenarios walk their keys (bench/acquire_keyed.lua): each wrk thread its own
# share, in order, from where it stopped in the round before. Per NAME.THREAD: the next
# position (WALK_NEXT), the keys handed out in all rounds so far (WALK_DONE) and the size
# of the share (WALK_SHARE); per NAME.ROUND, the keys handed out in that round (WALKED).
declare -A WALK_NEXT WALK_DONE WALK_SHARE WALKED WALK_LOST
walk_starts() { # NAME -> each thread's start position, comma-separated
    local t starts=
    for ((t = 0; t < THREADS; t++)); do
        starts+="${starts:+,}${WALK_NEXT[$1.$t]:-0}"
    done
    echo "$starts"
}
note_walk() { # NAME ROUND: read the walk lines of that round's wrk output
    local t share walked next threads=0
    WALKED[$1.$2]=0
    while read -r t share walked next; do
        WALK_NEXT[$1.$t]=$next WALK_SHARE[$1.$t]=$share
        WALK_DONE[$1.$t]=$((${WALK_DONE[$1.$t]:-0} + walked))
        WALKED[$1.$2]=$((${WALKED[$1.$2]} + walked))
        threads=$((threads + 1))
    done < <(sed -n 's/^walk thread=\([0-9]*\) share=\([0-9]*\) walked=\([0-9]*\) next=\([0-9]*\)$/\1 \2 \3 \4/p' \
        "$TMP/wrk-$1.$2.txt")
    if ((threads != THREADS)); then
        log "WARNING: wrk $1 round $2 reported the walk of $threads of $THREADS threads; its keys seen are unknown"
        WALK_LOST[$1]=1 WALKED[$1.$2]=n/a
    fi
}
keys_seen() { # NAME -> the distinct keys handed out in all rounds, or n/a
    [[ -z ${WALK_LOST[$1]:-} ]] || { echo n/a; return 0; }
    local t handed share seen=0
    for ((t = 0; t < THREADS; t++)); do
        handed=${WALK_DONE[$1.$t]:-0} share=${WALK_SHARE[$1.$t]:-0}
        seen=$((seen + (handed < share ? handed : share)))
    done
    echo "$seen"
}
keys_walked() { # NAME -> the keys handed out in all rounds, duplicates included, or n/a
    [[ -z ${WALK_LOST[$1]:-} ]] || { echo n/a; return 0; }
    local t walked=0
    for ((t = 0; t < THREADS; t++)); do
        walked=$((walked + ${WALK_DONE[$1.$t]:-0}))
    done
    echo "$walked"
}
run_keyed() { # NAME ROUND RESOURCE KEYS PREFIX
    run_wrk "$1" "$2" "$DURATION" "$BASE/v1/acquire" "${AUTH[@]}" -s "$SCRIPT_DIR/acquire_keyed.lua" \
        -- "$3" "$4" "$5" "$(walk_starts "$1")"
    note_walk "$1" "$2"
}

# Round 1's one-off readings of the keyed buckets' and the top callers' memory.
read_keyed_and_top_memory() {
    read -r KEYED_MEM_MEAN KEYED_MEM_SAMPLE <<<"$(keyed_memory_usage 1000) "
    KEYED_MEM_PER_BUCKET=$(awk -v a="$MEM_BEFORE_KEYED" -v b="$MEM_AFTER_KEYED" -v n="$KEYED_BUCKETS" 'BEGIN {
        if (a !~ /^[0-9]+$/ || b !~ /^[0-9]+$/ || n + 0 == 0) { print "n/a"; exit }
        printf "%.0f", (b - a) / n }')
    # The flusher adds each instance's counts to Redis every couple of seconds.
    local deadline=$((SECONDS + 15))
    until [[ $(top_sets few) != "0 "* && $(top_sets users) != "0 "* ]]; do
        ((SECONDS < deadline)) || { log "WARNING: no top callers' sets in Redis after 15 s"; break; }
        sleep 0.5
    done
    read -r TOP_USERS_SETS TOP_USERS_CARD TOP_USERS_BYTES <<<"$(top_sets users)"
    read -r TOP_FEW_SETS TOP_FEW_CARD TOP_FEW_BYTES <<<"$(top_sets few)"
    TOP_USERS_DENIED=$(curl -sS --max-time 5 -H "Authorization: Bearer $TOKEN" \
        "$BASE/api/v1/policies/users/top?minutes=5" 2>>"$TMP/curl.log" | head -c 300 || true)
}

# The reference handlers (examples/bare_acquire.rs), on the same Redis: started once, idle
# while ratekeeper runs its scenarios, and ratekeeper idle while they run theirs.
BARE_UP=0
start_bare() {
    BARE_PORT=$(find_free_port $((HTTP_PORT + 1))) || die "no free port for bare_acquire"
    BARE_BASE=http://127.0.0.1:$BARE_PORT
    "$BARE_BIN" "127.0.0.1:$BARE_PORT" "redis://127.0.0.1:$REDIS_PORT" "$BARE_KEY" "$APP" \
        >"$TMP/bare.log" 2>&1 &
    BARE_PID=$!
    local deadline=$((SECONDS + 30))
    until [[ $(curl -s -o /dev/null -w '%{http_code}' --max-time 2 -X POST \
        -H 'Content-Type: application/json' -d '{"resource":"hot"}' "$BARE_BASE/v1/acquire" ||
        true) == 200 ]]; do
        kill -0 "$BARE_PID" 2>/dev/null || die "bare_acquire exited: $(tail -n 5 "$TMP/bare.log")"
        ((SECONDS < deadline)) || die "bare_acquire did not answer 200 within 30 s"
        sleep 0.2
    done
    BARE_UP=1
}

run_round() { # ROUND
    local round=$1
    run_wrk hot "$round" "$DURATION" "$BASE/v1/acquire" "${AUTH[@]}" -s "$SCRIPT_DIR/acquire_one.lua" -- hot 1
    if ((round == 1)); then
        MEM_BEFORE_KEYED=$(redis_used_memory)
    fi
    run_keyed keyed "$round" users "$KEYS" u
    if ((round == 1)); then
        MEM_AFTER_KEYED=$(redis_used_memory)
        KEYED_BUCKETS=$(count_keyed_buckets)
    fi
    run_keyed few "$round" few "$FEW_KEYS" f
    run_wrk many "$round" "$DURATION" "$BASE/v1/acquire" "${AUTH[@]}" -s "$SCRIPT_DIR/acquire_many.lua" -- "$POLICIES" p
    if ((round == 1)); then
        MEM_AFTER_LOAD=$(redis_used_memory)
        MEM_KEY_STATE=$(rcli MEMORY USAGE "$PREFIX:{p1}" || true)
    fi
    run_wrk ceiling "$round" "$DURATION" "$BASE/healthz"
    run_wrk denied "$round" "$DURATION" "$BASE/v1/acquire" "${AUTH[@]}" -s "$SCRIPT_DIR/acquire_one.lua" -- tight 1
    if ((round == 1)); then
        SAMPLE_DENIED_CODE=$(acquire_once tight)
        SAMPLE_DENIED=$(head -c 400 "$TMP/acquire.out")
    fi
    if ((BARE_UP)); then
        run_wrk noop "$round" "$DURATION" "$BARE_BASE/noop" -s "$SCRIPT_DIR/acquire_one.lua" -- hot 1
        run_wrk bare "$round" "$DURATION" "$BARE_BASE/v1/acquire" -s "$SCRIPT_DIR/acquire_one.lua" -- hot 1
    fi
    if ((round == 1)); then
        read_keyed_and_top_memory
    fi
}

AUTH=(-H "Authorization: Bearer $KEY")
LOAD_AT=$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo n/a)

if [[ -x $BARE_BIN ]]; then
    start_bare
else
    log "WARNING: no $BARE_BIN (cargo build --release --example bare_acquire): scenarios h and i skipped"
fi
if [[ $(duration_s "$WARMUP") -gt 0 ]]; then
    run_wrk warmup 0 "$WARMUP" "$BASE/v1/acquire" "${AUTH[@]}" -s "$SCRIPT_DIR/acquire_one.lua" -- hot 1
fi
for ((round = 1; round <= ROUNDS; round++)); do
    run_round "$round"
done
stop_bare

# ---------------------------------------------------------------------------------------
# redis-benchmark: the same Lua, straight against the same Redis

log "redis-benchmark: EVALSHA token_bucket.lua, $CONNECTIONS connections, $RB_REQUESTS requests"
# The script exactly as the server composes it (the reply codes and the algorithm table
# ahead of the shared gate, the decision and the script itself).
RB_SCRIPT=$(cd "$ROOT" && cargo run -q -p ratekeeper-limiter --example script_source -- token_bucket) \
    || die "cannot print the token bucket script"
SHA=$(rcli SCRIPT LOAD "$RB_SCRIPT") || die "SCRIPT LOAD failed"
[[ $SHA =~ ^[0-9a-f]{40}$ ]] || die "SCRIPT LOAD answered '$SHA'"
rcli HSET "$RB_KEY" max_permits 1000000000 rate 1000000 apps ",$APP," enabled 1 version 1 \
    created_ms 1 >/dev/null || die "HSET $RB_KEY failed"
RB_CHECK=$(rcli EVALSHA "$SHA" 1 "$RB_KEY" 1 "$APP" 2>&1 | awk 'NR == 1' || true)
[[ $RB_CHECK == 1 ]] || log "WARNING: EVALSHA on $RB_KEY answered code '$RB_CHECK', not 1 (granted)"
RPS[redis]=n/a P50[redis]=n/a P99[redis]=n/a NON2XX[redis]=- REQS[redis]=$RB_REQUESTS SOCKERR[redis]=-
if interruptible timeout -k 5 600 redis-benchmark -h 127.0.0.1 -p "$REDIS_PORT" -c "$CONNECTIONS" \
    -n "$RB_REQUESTS" --csv EVALSHA "$SHA" 1 "$RB_KEY" 1 "$APP" >"$TMP/redis-benchmark.csv" \
    2>"$TMP/redis-benchmark.err"; then
    # "test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms","p99_latency_ms",...
    read -r rb_rps rb_p50 rb_p99 < <(tr -d '\r' <"$TMP/redis-benchmark.csv" |
        awk -F'","' '/^"EVALSHA/ { print $2, ($5 == "" ? "n/a" : $5), ($7 == "" ? "n/a" : $7) }' |
        tail -n 1) || true
    RPS[redis]=${rb_rps:-n/a} P50[redis]=${rb_p50:-n/a} P99[redis]=${rb_p99:-n/a}
else
    log "WARNING: redis-benchmark failed: $(tail -n 5 "$TMP/redis-benchmark.err" 2>/dev/null || true)"
fi
RB_AFTER=$(rcli EVALSHA "$SHA" 1 "$RB_KEY" 1 "$APP" 2>&1 | awk 'NR == 1' || true)
[[ $RB_AFTER == 1 ]] || log "WARNING: after redis-benchmark, EVALSHA on $RB_KEY answers code '$RB_AFTER'"

# ---------------------------------------------------------------------------------------
# One worker's top-callers sketch

record_server_memory "the end"
SKETCH_EXAMPLE=$ROOT/target/release/examples/top_keys_memory
if [[ -x $SKETCH_EXAMPLE ]]; then
    SKETCH_TABLE=$(timeout 300 "$SKETCH_EXAMPLE" 2>&1 || echo "top_keys_memory failed")
else
    SKETCH_TABLE="(not built: cargo build --release --example top_keys_memory)"
fi

# ---------------------------------------------------------------------------------------
# Redis' time in the acquire scripts, with the server stopped: the example resets and
# reads the Redis' command statistics, which the server's own commands would blur.

stop_server
if [[ -x $COST_BIN ]]; then
    log "script cost: Redis' time per script call by batch shape (examples/script_cost.rs)"
    COST_TABLE=$(timeout 300 "$COST_BIN" "redis://127.0.0.1:$REDIS_PORT" 2>&1 || echo "script_cost failed")
else
    COST_TABLE="(not built: cargo build --release --example script_cost)"
fi

# ---------------------------------------------------------------------------------------
# Report

ratio() { # A B -> A/B with 2 decimals, or n/a
    awk -v a="$1" -v b="$2" 'BEGIN {
        if (a !~ /^[0-9.]+$/ || b !~ /^[0-9.]+$/ || b + 0 == 0) { print "n/a"; exit }
        printf "%.2f", a / b }'
}
verdict() { # VALUE OP LIMIT (OP: ge or le) -> meets / below / n/a
    awk -v v="$1" -v op="$2" -v l="$3" 'BEGIN {
        if (v !~ /^[0-9.]+$/) { print "n/a"; exit }
        ok = (op == "ge") ? (v + 0 >= l + 0) : (v + 0 <= l + 0)
        print (ok ? "meets" : "MISSES") }'
}
per_policy() { # BEFORE AFTER -> bytes per policy
    awk -v a="$1" -v b="$2" -v n="$POLICIES" 'BEGIN {
        if (a !~ /^[0-9]+$/ || b !~ /^[0-9]+$/) { print "n/a"; exit }
        printf "%.0f", (b - a) / n }'
}
cores_busy() { # NAME -> the machine's CPU time per request x req/s: how many cores worked
    awk -v m="${CPU_MACHINE[$1]}" -v r="${RPS[$1]}" 'BEGIN {
        if (m !~ /^[0-9.]+$/ || r !~ /^[0-9.]+$/) { print "n/a"; exit }
        printf "%.2f", m * r / 1e6 }'
}
budget_row() { # TARGET X REF RATIO: X's machine time per request against ref's / RATIO
    awk -v label="$1" -v ref="${CPU_MACHINE[$3]}" -v ratio="$4" -v uses="${CPU_MACHINE[$2]}" \
        -v redis="${CPU_REDIS[$2]}" -v server="${CPU_SERVER[$2]}" -v h="${CPU_SERVER[noop]}" \
        -v h_machine="${CPU_MACHINE[noop]}" 'BEGIN {
        num = "^[0-9.]+$"
        may = (ref ~ num) ? sprintf("%.1f", ref / ratio) : "n/a"
        beyond = (server ~ num && h ~ num) ? sprintf("%.1f", server - h) : "n/a"
        floor = (h_machine ~ num && redis ~ num) ? sprintf("%.1f", h_machine + redis) : "n/a"
        reach = ""
        if (floor != "n/a" && may != "n/a" && floor + 0 > may + 0) reach = "  out of reach"
        if (uses ~ num) uses = sprintf("%.1f", uses)
        if (redis ~ num) redis = sprintf("%.1f", redis)
        printf "  %-30s %8s %8s %8s %9s %10s%s\n", label, may, uses, redis, beyond, floor, reach }'
}
fmt_rps() { awk -v v="$1" 'BEGIN { if (v ~ /^[0-9.]+$/) printf "%.0f", v; else print v }'; }
median() { # VALUES... -> the median of the numeric ones (n/a if none)
    printf '%s\n' "$@" | awk '$1 ~ /^[0-9.]+$/' | sort -g | awk '{ v[NR] = $1 }
        END {
            if (NR == 0) print "n/a"
            else if (NR % 2) print v[(NR + 1) / 2]
            else printf "%.3f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2
        }'
}
total() { # VALUES... -> the sum of the numeric ones (n/a if none)
    printf '%s\n' "$@" | awk '$1 ~ /^[0-9]+$/ { sum += $1; n++ } END { print (n ? sum : "n/a") }'
}
mb() { # KB -> MB (10^6 bytes) with one decimal, or n/a
    awk -v k="$1" 'BEGIN { if (k ~ /^[0-9]+$/) printf "%.1f", k * 1024 / 1e6; else print "n/a" }'
}

# Each scenario's rounds: the median req/s, p50 and p99 (each of its own column), the
# non-2xx, requests and socket errors of all rounds together, each round's req/s.
declare -A ROUND_RPS
for name in "${SCENARIOS[@]}"; do
    rps=() p50=() p99=() non=() reqs=() errs=() cpu_server=() cpu_redis=() cpu_machine=()
    for ((round = 1; round <= ROUNDS; round++)); do
        rps+=("${RPS[$name.$round]:-n/a}") p50+=("${P50[$name.$round]:-n/a}")
        p99+=("${P99[$name.$round]:-n/a}") non+=("${NON2XX[$name.$round]:-n/a}")
        reqs+=("${REQS[$name.$round]:-n/a}") errs+=("${SOCKERR[$name.$round]:-n/a}")
        cpu_server+=("${CPU_SERVER[$name.$round]:-n/a}") cpu_redis+=("${CPU_REDIS[$name.$round]:-n/a}")
        cpu_machine+=("${CPU_MACHINE[$name.$round]:-n/a}")
    done
    RPS[$name]=$(median "${rps[@]}") P50[$name]=$(median "${p50[@]}") P99[$name]=$(median "${p99[@]}")
    CPU_SERVER[$name]=$(median "${cpu_server[@]}") CPU_REDIS[$name]=$(median "${cpu_redis[@]}")
    CPU_MACHINE[$name]=$(median "${cpu_machine[@]}")
    NON2XX[$name]=$(total "${non[@]}") REQS[$name]=$(total "${reqs[@]}") SOCKERR[$name]=$(total "${errs[@]}")
    ROUND_RPS[$name]=$(for v in "${rps[@]}"; do printf ' %9s' "$(fmt_rps "$v")"; done)
done
KEYS_SEEN=$(keys_seen keyed)
KEYS_WALKED=$(keys_walked keyed)

# The memory target: the server's RSS once it holds the policies and has seen the keys,
# that is at the end (its peak beside it), judged only on a run of the target's size.
END_RSS=${MEM_RSS[-1]} END_HWM=${MEM_HWM[-1]}
if ((POLICIES >= 100000)) && [[ $KEYS_SEEN =~ ^[0-9]+$ ]] && ((KEYS_SEEN >= 1000000)); then
    RSS_VERDICT="$(mb "$END_RSS") MB at the end (peak $(mb "$END_HWM") MB): $(verdict "$(mb "$END_RSS")" le 100)"
else
    RSS_VERDICT="not measured at this size ($POLICIES policies, $KEYS_SEEN distinct keys seen)"
fi

R_HOT=$(ratio "${RPS[hot]}" "${RPS[ceiling]}")
R_KEYED=$(ratio "${RPS[keyed]}" "${RPS[hot]}")
R_FEW=$(ratio "${RPS[few]}" "${RPS[hot]}")
R_MANY=$(ratio "${RPS[many]}" "${RPS[ceiling]}")
R_DENIED=$(ratio "${RPS[denied]}" "${RPS[ceiling]}")
R_HOT_RB=$(ratio "${RPS[hot]}" "${RPS[redis]}")
R_MANY_RB=$(ratio "${RPS[many]}" "${RPS[redis]}")
R_DENIED_SHARE=$(ratio "${NON2XX[denied]}" "${REQS[denied]}")
R_HOT_NOOP=$(ratio "${RPS[hot]}" "${RPS[noop]}")
R_MANY_NOOP=$(ratio "${RPS[many]}" "${RPS[noop]}")
R_KEYED_NOOP=$(ratio "${RPS[keyed]}" "${RPS[noop]}")
R_DENIED_NOOP=$(ratio "${RPS[denied]}" "${RPS[noop]}")
R_HOT_BARE=$(ratio "${RPS[hot]}" "${RPS[bare]}")
R_MANY_BARE=$(ratio "${RPS[many]}" "${RPS[bare]}")
R_KEYED_BARE=$(ratio "${RPS[keyed]}" "${RPS[bare]}")
R_BARE_NOOP=$(ratio "${RPS[bare]}" "${RPS[noop]}")
MEM_PER_POLICY=$(per_policy "$MEM_BEFORE" "$MEM_AFTER")
MEM_PER_POLICY_LOADED=$(per_policy "$MEM_BEFORE" "$MEM_AFTER_LOAD")

GIT_REV=$(git -C "$ROOT" rev-parse --short --verify -q HEAD 2>/dev/null || echo "no-commit")
if [[ -n $(git -C "$ROOT" status --porcelain --untracked-files=no 2>/dev/null || true) ]]; then
    GIT_REV="$GIT_REV (dirty)"
fi
STAMP=$(date -u +%Y%m%dT%H%M%SZ)

REPORT=$TMP/report.txt
{
    echo "ratekeeper acquire benchmark"
    echo "date:        $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
    echo "git:         $GIT_REV"
    echo "machine:     $(nproc 2>/dev/null || echo '?') cores, $(uname -sr), load average before load: $LOAD_AT"
    echo "tools:       $(wrk -v 2>&1 | awk 'NR == 1 { print $1, $2 }'), $(redis-server --version | awk '{ print $1, $2, $3 }')"
    echo "settings:    wrk -t$THREADS -c$CONNECTIONS -d$DURATION --latency, $ROUNDS round(s) (warm-up $WARMUP); redis-benchmark -c$CONNECTIONS -n$RB_REQUESTS, once"
    echo
    echo "medians of $ROUNDS round(s) (req/s, p50 and p99 each the median of its own column);"
    echo "non-2xx, requests and socket errors of all rounds together; e) is one run"
    printf '%-32s %10s %9s %9s %9s %10s %8s\n' scenario "req/s" "p50 ms" "p99 ms" non-2xx requests "sockerr"
    for name in hot keyed few many ceiling denied redis noop bare; do
        printf '%-32s %10s %9s %9s %9s %10s %8s\n' "${LABEL[$name]}" "$(fmt_rps "${RPS[$name]}")" \
            "${P50[$name]}" "${P99[$name]}" "${NON2XX[$name]}" "${REQS[$name]}" "${SOCKERR[$name]}"
    done
    echo
    echo "req/s of each round, in order:"
    for name in "${SCENARIOS[@]}"; do
        printf '  %-30s%s\n' "${LABEL[$name]}" "${ROUND_RPS[$name]}"
    done
    echo
    echo "CPU time per request, us (user + system from /proc/<pid>/stat over each run, median"
    echo "of the rounds): the process that served it (ratekeeper; bare_acquire for h and i), Redis,"
    echo "and the whole machine (/proc/stat: wrk and everything else included); 'cores busy' is the"
    echo "machine's time per request times the median req/s"
    printf '  %-30s %8s %8s %8s %11s\n' "" server redis machine "cores busy"
    for name in "${SCENARIOS[@]}"; do
        printf '  %-30s %8s %8s %8s %11s\n' "${LABEL[$name]}" "${CPU_SERVER[$name]}" \
            "${CPU_REDIS[$name]}" "${CPU_MACHINE[$name]}" "$(cores_busy "$name")"
    done
    echo
    echo "what each batching target leaves, in the machine's CPU time per request (us): with the"
    echo "cores saturated, req/s go as 1 / that time, so 'X >= R x ref' lets X use at most ref's"
    echo "time / R. 'redis' and 'beyond h' (ratekeeper's own time less the parse-only handler's)"
    echo "are where X's time goes beyond the parse-only request; 'h + redis' is what X would use"
    echo "if ratekeeper cost no more than the parse-only handler: above 'may use', the target is"
    echo "out of reach in this run whatever the server does, short of taking Redis' time down:"
    printf '  %-30s %8s %8s %8s %9s %10s\n' target "may use" uses redis "beyond h" "h + redis"
    budget_row "hot >= 0.85 x parse only" hot noop 0.85
    budget_row "many >= 0.70 x parse only" many noop 0.7
    budget_row "keyed >= 0.70 x parse only" keyed noop 0.7
    budget_row "denied >= 0.90 x parse only" denied noop 0.9
    budget_row "hot >= 1.30 x one EVALSHA" hot bare 1.3
    budget_row "many >= 1.30 x one EVALSHA" many bare 1.3
    budget_row "keyed >= 1.30 x one EVALSHA" keyed bare 1.3
    echo "  p99 <= 3 ms at $CONNECTIONS connections: hot ${P99[hot]}, many ${P99[many]}, keyed ${P99[keyed]} ms;"
    echo "    the parse-only handler's own p99 in this run: ${P99[noop]} ms"
    echo
    echo "ratios (targets of bench/README.md; informational, nothing is asserted):"
    printf '  %-28s %6s   target >= 0.55, p99 <= 4 ms: %s / %s\n' "hot / ceiling" "$R_HOT" \
        "$(verdict "$R_HOT" ge 0.55)" "$(verdict "${P99[hot]}" le 4)"
    printf '  %-28s %6s   target >= 0.90, p99 <= 4 ms: %s / %s\n' "keyed ($KEYS keys) / hot" "$R_KEYED" \
        "$(verdict "$R_KEYED" ge 0.9)" "$(verdict "${P99[keyed]}" le 4)"
    printf '  %-28s %6s\n' "keyed ($FEW_KEYS keys) / hot" "$R_FEW"
    printf '  %-28s %6s   target >= 0.55, p99 <= 4 ms: %s / %s\n' "many / ceiling" "$R_MANY" \
        "$(verdict "$R_MANY" ge 0.55)" "$(verdict "${P99[many]}" le 4)"
    printf '  %-28s %6s   target >= 0.80: %s (share denied: %s)\n' "denied / ceiling" "$R_DENIED" \
        "$(verdict "$R_DENIED" ge 0.8)" "$R_DENIED_SHARE"
    printf '  %-28s %6s\n' "hot / redis-benchmark" "$R_HOT_RB"
    printf '  %-28s %6s\n' "many / redis-benchmark" "$R_MANY_RB"
    echo
    echo "against the reference handlers of the same run (h: parse only, i: parse + one EVALSHA):"
    printf '  %-28s %6s   batching target >= 0.85: %s\n' "hot / parse only" "$R_HOT_NOOP" \
        "$(verdict "$R_HOT_NOOP" ge 0.85)"
    printf '  %-28s %6s   batching target >= 0.70: %s\n' "many / parse only" "$R_MANY_NOOP" \
        "$(verdict "$R_MANY_NOOP" ge 0.7)"
    printf '  %-28s %6s   batching target >= 0.70: %s\n' "keyed / parse only" "$R_KEYED_NOOP" \
        "$(verdict "$R_KEYED_NOOP" ge 0.7)"
    printf '  %-28s %6s   target >= 0.90: %s\n' "denied / parse only" "$R_DENIED_NOOP" \
        "$(verdict "$R_DENIED_NOOP" ge 0.9)"
    printf '  %-28s %6s   batching target >= 1.30: %s\n' "hot / one EVALSHA" "$R_HOT_BARE" \
        "$(verdict "$R_HOT_BARE" ge 1.3)"
    printf '  %-28s %6s   batching target >= 1.30: %s\n' "many / one EVALSHA" "$R_MANY_BARE" \
        "$(verdict "$R_MANY_BARE" ge 1.3)"
    printf '  %-28s %6s   batching target >= 1.30: %s\n' "keyed / one EVALSHA" "$R_KEYED_BARE" \
        "$(verdict "$R_KEYED_BARE" ge 1.3)"
    printf '  %-28s %6s\n' "one EVALSHA / parse only" "$R_BARE_NOOP"
    echo
    echo "policy set-up:"
    echo "  $POLICIES policies created over HTTP in $CREATE_S s ($CREATE_RATE/s, $CREATE_PARALLEL in parallel)"
    if ((FIRST_FAILURES > 0)); then
        echo "  $FIRST_FAILURES failed at first ($FIRST_FAILURE_CODES) and were retried one at a time"
    fi
    echo "  $IN_REDIS policy keys in Redis $SYNCED_S s after the first POST; DBSIZE $DBSIZE"
    echo
    echo "Redis memory per policy (target <= 200 bytes):"
    echo "  used_memory: $MEM_BEFORE before the $POLICIES policies, $MEM_AFTER after"
    echo "  -> $MEM_PER_POLICY bytes per policy (config only): $(verdict "$MEM_PER_POLICY" le 200)"
    echo "  -> $MEM_PER_POLICY_LOADED bytes per policy after scenario b, with bucket state ($MEM_AFTER_LOAD; includes client buffers)"
    echo "  MEMORY USAGE $PREFIX:{p1}: ${MEM_KEY_CONFIG:-n/a} (config only), ${MEM_KEY_STATE:-n/a} (after scenario b)"
    echo
    echo "Keyed buckets (target: MEMORY USAGE <= 120 bytes each):"
    echo "  $KEYED_BUCKETS buckets in Redis after round 1's scenario f, which handed out ${WALKED[keyed.1]:-n/a} keys"
    echo "    walking its $KEYS in order (the probes of users and few add 2)"
    echo "  distinct keys seen by f in all rounds: $KEYS_SEEN of $KEYS ($KEYS_WALKED handed out by wrk, ${REQS[keyed]} answered)"
    echo "  MEMORY USAGE, mean of ${KEYED_MEM_SAMPLE:-0} buckets: ${KEYED_MEM_MEAN:-n/a} bytes: $(verdict "${KEYED_MEM_MEAN:-n/a}" le 120)"
    echo "  used_memory grew by $KEYED_MEM_PER_BUCKET bytes per bucket during f (with Redis's key table; includes client buffers)"
    echo
    echo "Top callers (memory must not grow with the keys):"
    echo "  Redis, per_key over $KEYS keys:    $TOP_USERS_SETS sets, at most $TOP_USERS_CARD callers each, $TOP_USERS_BYTES bytes in all"
    echo "  Redis, per_key over $FEW_KEYS keys:     $TOP_FEW_SETS sets, at most $TOP_FEW_CARD callers each, $TOP_FEW_BYTES bytes in all"
    echo "  GET /api/v1/policies/users/top?minutes=5: $TOP_USERS_DENIED"
    echo "  one worker's sketch (examples/top_keys_memory.rs):"
    printf '%s\n' "$SKETCH_TABLE" | sed 's/^/    /'
    echo
    echo "Server memory (ratekeeper's VmRSS, resident now, and VmHWM, the peak so far; MB of 10^6 bytes):"
    printf '  %-58s %8s %8s\n' point "RSS MB" "peak MB"
    for ((i = 0; i < ${#MEM_POINTS[@]}; i++)); do
        printf '  %-58s %8s %8s\n' "${MEM_POINTS[$i]}" "$(mb "${MEM_RSS[$i]}")" "$(mb "${MEM_HWM[$i]}")"
    done
    echo "  target RSS <= 100 MB with 100,000 policies and 1,000,000 distinct keys seen:"
    echo "    $RSS_VERDICT"
    echo
    echo "Redis' time in the acquire scripts (INFO commandstats, lowest of 5 rounds; 'in commands'"
    echo "is the part of each acquire spent in the commands the scripts ran):"
    printf '%s\n' "$COST_TABLE" | sed 's/^/  /'
    echo
    echo "sample replies:"
    echo "  granted: 200 $SAMPLE_GRANTED"
    echo "  denied:  $SAMPLE_DENIED_CODE $SAMPLE_DENIED"
} >"$REPORT"

RESULTS_DIR=$SCRIPT_DIR/results
mkdir -p "$RESULTS_DIR"
RESULT_FILE=$RESULTS_DIR/$STAMP.txt
{
    cat "$REPORT"
    echo
    echo "raw wrk output:"
    if [[ -f $TMP/wrk-warmup.0.txt ]]; then
        echo "--- warm-up"
        cat "$TMP/wrk-warmup.0.txt"
    fi
    for ((round = 1; round <= ROUNDS; round++)); do
        for name in "${SCENARIOS[@]}"; do
            [[ -f $TMP/wrk-$name.$round.txt ]] || continue
            echo "--- $name, round $round"
            cat "$TMP/wrk-$name.$round.txt"
        done
    done
    echo "--- redis-benchmark"
    cat "$TMP/redis-benchmark.csv" 2>/dev/null || true
} >>"$RESULT_FILE"
if [[ -s $TMP/server.log ]]; then
    cp -- "$TMP/server.log" "$RESULTS_DIR/$STAMP.server.log"
fi

echo
cat "$REPORT"
echo
log "report written to ${RESULT_FILE#"$ROOT"/}"
