#!/usr/bin/env bash
# Webhooks end to end, verified by the Standard Webhooks specification's own Python library
# (PyPI standardwebhooks) in tests/webhooks/test_delivery.py. This script makes a
# PostgreSQL database of the test run's, an admin with an access token, and starts three
# server instances on it and on the shared Redis (a key prefix of this run's), each on a
# free loopback port (read back from its log); then runs the tests, which stop them.
#   scripts/webhooks.sh
#   RK_WEBHOOKS_BIN=path/to/ratekeeper scripts/webhooks.sh  # a server binary already built
# Its last line counts the tests: `webhooks: tests: N passed, N failed`.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
PACKAGES=('standardwebhooks==1.1.0')
# A virtual environment of the project's (under target/, ignored by git), as
# scripts/envoy_client.sh makes: never the system's Python (PEP 668).
VENV="${RK_WEBHOOKS_VENV:-target/webhooks-venv}"
if [[ ! -x $VENV/bin/python ]]; then
    echo "webhooks: making a Python virtual environment in $VENV"
    if ! python3 -m venv "$VENV" </dev/null; then
        if [[ $(id -u) -ne 0 ]] || ! command -v apt-get >/dev/null; then
            echo "webhooks: python3 -m venv failed; install python3-venv" >&2
            exit 1
        fi
        DEBIAN_FRONTEND=noninteractive apt-get -q install -y python3-venv </dev/null
        rm -rf "$VENV"
        python3 -m venv "$VENV" </dev/null
    fi
fi
installed="$("$VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("standardwebhooks"))' 2>/dev/null || true)"
if [[ $installed != 1.1.0 ]]; then
    echo "webhooks: installing ${PACKAGES[*]} from PyPI into $VENV"
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "${PACKAGES[@]}" </dev/null
fi

if [[ -n ${RK_WEBHOOKS_BIN:-} ]]; then
    BIN="$RK_WEBHOOKS_BIN"
else
    if ! command -v cargo >/dev/null 2>&1 && [[ -f "$HOME/.cargo/env" ]]; then
        # shellcheck disable=SC1091
        . "$HOME/.cargo/env"
    fi
    echo "webhooks: cargo test --all-targets --no-run (the tests' build of the server)"
    cargo test --all-targets --no-run --quiet
    BIN="$(cd "${CARGO_TARGET_DIR:-target}" && pwd)/debug/ratekeeper"
fi
[[ -x $BIN ]] || {
    echo "webhooks: no server binary at $BIN" >&2
    exit 1
}

# Named after the test run (scripts/test.sh's, or one of this script's), so that
# test.sh's cleanup finds what a killed run left; this script drops its own at exit.
RK_TEST_RUN="${RK_TEST_RUN:-$(date +%s)_$(python3 -c 'import secrets; print(secrets.token_hex(3))')}"
PG="${RK_TEST_POSTGRES_URL:-postgres://postgres@127.0.0.1:5432}"
PG="${PG%/}"
database="rk_test_${RK_TEST_RUN}_$(python3 -c 'import secrets; print(secrets.token_hex(8))')"
REDIS_URL="${RK_TEST_REDIS_URL:-redis://127.0.0.1:6379}"
export RATEKEEPER_REDIS_URL="$REDIS_URL"
export RATEKEEPER_REDIS_PREFIX="rktest-$RK_TEST_RUN-webhooks"
export RATEKEEPER_DATABASE_URL="$PG/$database"
export RATEKEEPER_LISTEN=127.0.0.1:0
# The receiver listens on loopback.
export RATEKEEPER_WEBHOOK_ALLOW_PRIVATE=true
export RATEKEEPER_LOG_JSON=true RUST_LOG="${RUST_LOG:-info}"
tmp="$(mktemp -d)"
pids=()
cleanup() {
    for pid in "${pids[@]}"; do
        kill "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    if command -v redis-cli >/dev/null 2>&1; then
        redis-cli -u "$REDIS_URL" --scan --pattern "$RATEKEEPER_REDIS_PREFIX*" 2>/dev/null |
            xargs -r redis-cli -u "$REDIS_URL" DEL >/dev/null 2>&1 || true
    fi
    psql -X -q "$PG/postgres" -c "DROP DATABASE IF EXISTS $database" >/dev/null 2>&1 || true
    rm -rf "$tmp"
}
trap cleanup EXIT

psql -X -q "$PG/postgres" -c "CREATE DATABASE $database" >/dev/null
"$BIN" migrate 2>>"$tmp/setup.log"
printf 'webhooks-password-1\n' | "$BIN" user create hooks --admin 2>>"$tmp/setup.log"
token="$("$BIN" token create hooks 2>>"$tmp/setup.log")"
for i in 1 2 3; do
    "$BIN" serve >>"$tmp/server-$i.log" 2>&1 &
    pids+=("$!")
done

instances=()
for i in 1 2 3; do
    address=""
    for _ in $(seq 1 300); do
        address="$(python3 scripts/logged_address.py "$tmp/server-$i.log" "ratekeeper listening")"
        [[ -n $address ]] && curl -fsS "http://$address/healthz" >/dev/null 2>&1 && break
        kill -0 "${pids[$((i - 1))]}" 2>/dev/null || break
        sleep 0.1
    done
    [[ -n $address ]] && curl -fsS "http://$address/healthz" >/dev/null || {
        cat "$tmp/server-$i.log"
        echo "webhooks: instance $i did not start" >&2
        exit 1
    }
    instances+=("http://$address")
done
echo "webhooks: instances at ${instances[*]}"

status=0
RK_INSTANCES="$(IFS=,; echo "${instances[*]}")" RK_PIDS="$(IFS=,; echo "${pids[*]}")" \
    RK_TOKEN="$token" RK_DATABASE="$PG/$database" \
    "$VENV/bin/python" tests/webhooks/test_delivery.py 2>&1 | tee "$tmp/tests.log" || status=$?
passed="$(grep -c '\.\.\. ok$' "$tmp/tests.log" || true)"
failed="$(grep -cE '\.\.\. (FAIL|ERROR)$' "$tmp/tests.log" || true)"
for i in 1 2 3; do
    if grep -q 'panicked' "$tmp/server-$i.log"; then
        cat "$tmp/server-$i.log"
        echo "webhooks: instance $i panicked" >&2
        status=1
    fi
done
echo "webhooks: tests: $passed passed, $failed failed"
exit "$status"
