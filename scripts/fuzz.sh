#!/usr/bin/env bash
# Fuzz both APIs from their own OpenAPI document with schemathesis: no input may produce a
# 5xx (DESIGN.md section 8). Starts its own ratekeeper (debug build, SQLite in a temp dir,
# a Redis key prefix of its own) on a free loopback port, and stops it at exit.
#   scripts/fuzz.sh            # RK_FUZZ_EXAMPLES=30 by default
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
BIN="${RK_FUZZ_BIN:-target/debug/ratekeeper}"
EXAMPLES="${RK_FUZZ_EXAMPLES:-30}"

if ! command -v schemathesis >/dev/null 2>&1; then
    echo "fuzz: installing schemathesis from PyPI"
    python3 -m pip install --quiet --disable-pip-version-check 'schemathesis>=4,<5' </dev/null
fi
[[ -x $BIN ]] || cargo build --quiet

tmp="$(mktemp -d)"
server_pid=""
cleanup() {
    [[ -n $server_pid ]] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT

port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
export RATEKEEPER_LISTEN="127.0.0.1:$port"
export RATEKEEPER_DATABASE_URL="sqlite://$tmp/fuzz.db"
export RATEKEEPER_REDIS_PREFIX="fuzz-$$"
export RUST_LOG="${RUST_LOG:-warn}"
api="http://127.0.0.1:$port"

"$BIN" migrate
printf 'fuzz-password-1\n' | "$BIN" user create fuzzer --admin
token="$("$BIN" token create fuzzer)"
"$BIN" serve >"$tmp/server.log" 2>&1 &
server_pid=$!
for _ in $(seq 1 100); do
    curl -fsS "$api/healthz" >/dev/null 2>&1 && break
    sleep 0.1
done
curl -fsS "$api/healthz" >/dev/null || { cat "$tmp/server.log"; echo "fuzz: server did not start" >&2; exit 1; }

auth=(-H "Authorization: Bearer $token")
curl -fsS -X POST "$api/api/v1/apps" "${auth[@]}" -d '{"slug":"shop","name":"Shop"}' >/dev/null
key="$(curl -fsS -X POST "$api/api/v1/apps/shop/keys" "${auth[@]}" -d '{"label":"fuzz"}' |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["key"])')"
curl -fsS -X POST "$api/api/v1/policies" "${auth[@]}" \
    -d '{"name":"orders.create","owner_app":"shop","rate":5,"max_permits":10}' >/dev/null

run() { # run AUTH_VALUE SCHEMATHESIS_ARGS...
    local auth_value=$1
    shift
    schemathesis run "$api/api/openapi.json" -H "Authorization: Bearer $auth_value" \
        --checks not_a_server_error --max-examples "$EXAMPLES" --no-color "$@"
}
echo "fuzz: admin API"
run "$token" --exclude-path /v1/acquire
echo "fuzz: acquire API"
run "$key" --include-path /v1/acquire
if grep -q 'panicked' "$tmp/server.log"; then
    cat "$tmp/server.log"
    echo "fuzz: the server panicked" >&2
    exit 1
fi
echo "fuzz: no 5xx"
