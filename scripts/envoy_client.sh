#!/usr/bin/env bash
# Envoy's rate limit service (gRPC), asked by a client no one here wrote: Envoy's own
# messages from PyPI's envoy-data-plane (betterproto2) over grpcio, in
# tests/envoy/test_rls.py. This script starts the server binary on SQLite (a temp dir) and
# the shared Redis (a key prefix of this run's), with HTTP and gRPC on free loopback ports
# (127.0.0.1:0, read back from the server's log); makes an admin, the apps "shop" and
# "other" with a key each, and the policies the tests ask about, through the admin API;
# then runs the tests.
#   scripts/envoy_client.sh
#   RK_ENVOY_BIN=path/to/ratekeeper scripts/envoy_client.sh  # a server binary already built (test.sh)
# Its last line counts the tests: `envoy: tests: N passed, N failed`.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
# Pinned: the tests use its module paths and betterproto2's method names.
PACKAGES=('envoy-data-plane==2.2.0' 'betterproto2[all]' 'grpcio' 'pyyaml')
# In a virtual environment of the project's (under target/, ignored by git): never in the
# system's Python, which Debian refuses to change (PEP 668).
VENV="${RK_ENVOY_VENV:-target/envoy-venv}"
if [[ ! -x $VENV/bin/python ]]; then
    echo "envoy: making a Python virtual environment in $VENV"
    if ! python3 -m venv "$VENV" </dev/null; then
        if [[ $(id -u) -ne 0 ]] || ! command -v apt-get >/dev/null; then
            echo "envoy: python3 -m venv failed; install python3-venv" >&2
            exit 1
        fi
        echo "envoy: installing python3-venv with apt-get (Debian's python3 lacks venv without it)"
        DEBIAN_FRONTEND=noninteractive apt-get -q install -y python3-venv </dev/null
        rm -rf "$VENV"
        python3 -m venv "$VENV" </dev/null
    fi
fi
installed="$("$VENV/bin/python" -c 'import importlib.metadata as m
try:
    import grpc, betterproto2, yaml
    print(m.version("envoy-data-plane"))
except Exception:
    pass' 2>/dev/null || true)"
if [[ $installed != 2.2.0 ]]; then
    echo "envoy: installing ${PACKAGES[*]} from PyPI into $VENV"
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "${PACKAGES[@]}" </dev/null
fi

# The server: the binary `cargo test --all-targets` builds (scripts/test.sh passes it in
# RK_ENVOY_BIN), or built here with that same command (see scripts/fuzz.sh for why).
if [[ -n ${RK_ENVOY_BIN:-} ]]; then
    BIN="$RK_ENVOY_BIN"
else
    if ! command -v cargo >/dev/null 2>&1 && [[ -f "$HOME/.cargo/env" ]]; then
        # shellcheck disable=SC1091
        . "$HOME/.cargo/env"
    fi
    echo "envoy: cargo test --all-targets --no-run (the tests' build of the server)"
    cargo test --all-targets --no-run --quiet
    BIN="$(cd "${CARGO_TARGET_DIR:-target}" && pwd)/debug/ratekeeper"
fi
[[ -x $BIN ]] || {
    echo "envoy: no server binary at $BIN" >&2
    exit 1
}

# The Redis keys carry the test run's id (scripts/test.sh's, or one of this script's), so
# test.sh's cleanup finds them; this script deletes its own at exit anyway.
RK_TEST_RUN="${RK_TEST_RUN:-$(date +%s)_$(python3 -c 'import secrets; print(secrets.token_hex(3))')}"
REDIS_URL="${RK_TEST_REDIS_URL:-redis://127.0.0.1:6379}"
export RATEKEEPER_REDIS_URL="$REDIS_URL"
export RATEKEEPER_REDIS_PREFIX="rktest-$RK_TEST_RUN-envoy"
tmp="$(mktemp -d)"
export RATEKEEPER_DATABASE_URL="sqlite://$tmp/envoy.db"
export RATEKEEPER_LISTEN=127.0.0.1:0 RATEKEEPER_GRPC_LISTEN=127.0.0.1:0
# JSON lines: the bound addresses are read back from them.
export RATEKEEPER_LOG_JSON=true RUST_LOG="${RUST_LOG:-info}"
server_pid=""
cleanup() {
    if [[ -n $server_pid ]]; then
        kill "$server_pid" 2>/dev/null || true
        wait "$server_pid" 2>/dev/null || true
    fi
    if command -v redis-cli >/dev/null 2>&1; then
        redis-cli -u "$REDIS_URL" --scan --pattern "$RATEKEEPER_REDIS_PREFIX*" 2>/dev/null |
            xargs -r redis-cli -u "$REDIS_URL" DEL >/dev/null 2>&1 || true
    fi
    rm -rf "$tmp"
}
trap cleanup EXIT

"$BIN" migrate 2>>"$tmp/server.log"
printf 'envoy-password-1\n' | "$BIN" user create envoy --admin 2>>"$tmp/server.log"
token="$("$BIN" token create envoy 2>>"$tmp/server.log")"
"$BIN" serve >>"$tmp/server.log" 2>&1 &
server_pid=$!

http="" grpc=""
for _ in $(seq 1 200); do
    http="$(python3 scripts/logged_address.py "$tmp/server.log" "ratekeeper listening")"
    grpc="$(python3 scripts/logged_address.py "$tmp/server.log" "ratekeeper gRPC (Envoy rate limit service) listening")"
    [[ -n $http && -n $grpc ]] && curl -fsS "http://$http/healthz" >/dev/null 2>&1 && break
    kill -0 "$server_pid" 2>/dev/null || break
    sleep 0.1
done
[[ -n $http && -n $grpc ]] && curl -fsS "http://$http/healthz" >/dev/null || {
    cat "$tmp/server.log"
    echo "envoy: the server did not start" >&2
    exit 1
}
api="http://$http"
echo "envoy: server at $api, rate limit service at $grpc"

json_field() { # json_field FIELD < JSON
    python3 -c 'import json,sys; print(json.load(sys.stdin)[sys.argv[1]])' "$1"
}
admin() { # admin PATH JSON: POST as the admin; the reply on stdout
    curl -fsS -X POST "$api$1" -H "Authorization: Bearer $token" -d "$2"
}
admin /api/v1/apps '{"slug":"shop","name":"Shop"}' >/dev/null
admin /api/v1/apps '{"slug":"other","name":"Other"}' >/dev/null
key="$(admin /api/v1/apps/shop/keys '{"label":"envoy"}' | json_field key)"
other_key="$(admin /api/v1/apps/other/keys '{"label":"envoy"}' | json_field key)"
for policy in \
    '{"name":"py.generic","owner_app":"shop","rate":0.5,"max_permits":2}' \
    '{"name":"py.resource","owner_app":"shop","rate":1,"max_permits":10}' \
    '{"name":"py.hits","owner_app":"shop","rate":0.001,"max_permits":100}' \
    '{"name":"py.keyed","owner_app":"shop","scope":"per_key","rate":0.001,"max_permits":5}' \
    '{"name":"py.shared","owner_app":"shop","scope":"per_key","rate":0.001,"max_permits":5}' \
    '{"name":"py.burst","owner_app":"shop","rate":0.001,"max_permits":5}' \
    '{"name":"py.daily","owner_app":"shop","rate":0.001,"max_permits":1}' \
    '{"name":"py.per-ip","owner_app":"shop","scope":"per_key","rate":0.001,"max_permits":3,"descriptors":[{"domain":"edge_proxy_per_ip","entries":["remote_address"]}]}' \
    '{"name":"py.blocked-ip","owner_app":"shop","mode":"block","algorithm":"fixed_window","window_ms":1000,"max_permits":1,"descriptors":[{"domain":"edge_proxy_per_ip","entries":["remote_address=50.0.0.5"]}]}' \
    '{"name":"py.specific","owner_app":"shop","rate":0.001,"max_permits":1,"descriptors":[{"domain":"example7","entries":["key_1=value_1","user=bkthomps"]}]}' \
    '{"name":"py.replacing","owner_app":"shop","rate":0.001,"max_permits":10,"descriptors":[{"domain":"example7","entries":["key_2=value_2","user=bkthomps"],"replaces":["py.specific"]}]}'; do
    admin /api/v1/policies "$policy" >/dev/null
done

status=0
RK_GRPC="$grpc" RK_HTTP="$api" RK_KEY="$key" RK_OTHER_KEY="$other_key" \
    "$VENV/bin/python" tests/envoy/test_rls.py || status=$?
# The README's Envoy configuration, read with Envoy's own message definitions.
"$VENV/bin/python" tests/envoy/test_envoy_configs.py || status=$?
if grep -q 'panicked' "$tmp/server.log"; then
    cat "$tmp/server.log"
    echo "envoy: the server panicked" >&2
    status=1
fi
exit "$status"
