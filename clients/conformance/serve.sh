#!/usr/bin/env bash
# Starts one ratekeeper server for the client libraries' conformance runs and leaves it
# running: SQLite in a new directory, the shared Redis under a key prefix of its own,
# HTTP on a free loopback port (127.0.0.1:0, read back from the server's log). Makes an
# admin and an access token with the CLI, then, through the admin API, for each PREFIX
# (one per library: py ts go java rust ...): the apps `<prefix>-caller` and
# `<prefix>-stranger` with an API key each, and every scenario's policies as
# `<prefix>.<name>`. Writes `<dir>/<prefix>.json`, the fixture a runner reads through
# RK_CONFORMANCE_FIXTURE: {"url", "prefix", "keys": {"caller", "stranger"}, "unreachable_url"}.
#
#   clients/conformance/serve.sh py ts         # prints RK_CONFORMANCE_DIR=... and RK_CONFORMANCE_PID=...
#   clients/conformance/serve.sh --stop DIR    # stops that server, deletes its Redis keys and DIR
#
# Environment:
#   RK_CLIENTS_BIN           the server binary (default: target/debug/ratekeeper)
#   RK_TEST_RUN              a test run's id: Redis prefix `rktest-<run>-clients` (else a random one)
#   RK_TEST_REDIS_URL        Redis (default redis://127.0.0.1:6379)
#   RK_CONFORMANCE_SCENARIOS the scenarios (default clients/conformance/scenarios)
#   RK_CONFORMANCE_READY_TRIES  how many times to poll /readyz, 0.1 s apart (default 300)
# The directory holds the fixtures, `server.log`, the database and `env` (the two lines
# printed, plus RK_CONFORMANCE_URL, RK_CONFORMANCE_REDIS_PREFIX and the pid of the process
# holding the unreachable port, RK_CONFORMANCE_HOLDER_PID, for `source`).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
here="$root/clients/conformance"
REDIS_URL="${RK_TEST_REDIS_URL:-redis://127.0.0.1:6379}"

say() { echo "conformance: $*" >&2; }
die() {
    say "$*"
    exit 1
}

# stop DIR: the server of DIR (its pid from DIR/env), its Redis keys, then DIR.
stop() {
    local dir=$1 pid prefix holder
    [[ -f $dir/env ]] || die "$dir is not a directory this script made (no env file in it)"
    pid="$(sed -n 's/^RK_CONFORMANCE_PID=//p' "$dir/env")"
    prefix="$(sed -n 's/^RK_CONFORMANCE_REDIS_PREFIX=//p' "$dir/env")"
    if [[ $pid =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null; then
        kill "$pid" 2>/dev/null || true
        # SIGTERM: it finishes in-flight requests first; give it 10 s, then SIGKILL.
        for _ in $(seq 1 100); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        kill -0 "$pid" 2>/dev/null && kill -9 "$pid" 2>/dev/null || true
    fi
    holder="$(sed -n 's/^RK_CONFORMANCE_HOLDER_PID=//p' "$dir/env")"
    if [[ $holder =~ ^[0-9]+$ ]]; then
        kill "$holder" 2>/dev/null || true
    fi
    if [[ $prefix == rk* ]] && command -v redis-cli >/dev/null 2>&1; then
        timeout 60 redis-cli -u "$REDIS_URL" --scan --pattern "$prefix*" 2>/dev/null |
            timeout 60 xargs -r redis-cli -u "$REDIS_URL" UNLINK >/dev/null 2>&1 || true
    fi
    rm -rf "$dir"
}

if [[ ${1:-} == --stop ]]; then
    [[ $# -eq 2 ]] || die "usage: serve.sh --stop DIR"
    stop "$2"
    exit 0
fi
[[ $# -ge 1 ]] || die "usage: serve.sh PREFIX... (e.g. py ts go java rust), or serve.sh --stop DIR"
for prefix in "$@"; do
    [[ $prefix =~ ^[a-z0-9]{1,16}$ ]] || die "prefix '$prefix': 1 to 16 of a-z and 0-9"
done

BIN="${RK_CLIENTS_BIN:-$root/target/debug/ratekeeper}"
[[ -x $BIN ]] || die "no server binary at $BIN (build it with cargo test --all-targets --no-run, or set RK_CLIENTS_BIN)"
SCENARIOS="${RK_CONFORMANCE_SCENARIOS:-$here/scenarios}"
[[ -d $SCENARIOS ]] || die "no scenarios directory at $SCENARIOS"
TRIES="${RK_CONFORMANCE_READY_TRIES:-300}"
command -v curl >/dev/null || die "curl is needed"
command -v python3 >/dev/null || die "python3 is needed"

random="$(python3 -c 'import secrets; print(secrets.token_hex(4))')"
if [[ -n ${RK_TEST_RUN:-} ]]; then
    redis_prefix="rktest-${RK_TEST_RUN}-clients"
else
    redis_prefix="rkclients-$random"
fi
dir="$(mktemp -d -t rk-conformance-XXXXXX)"
server_pid=""
holder_pid=""
started=""
# Anything that fails before the end leaves nothing behind: no server, no keys, no dir.
abandon() {
    if [[ -z $started ]]; then
        printf 'RK_CONFORMANCE_PID=%s\nRK_CONFORMANCE_HOLDER_PID=%s\nRK_CONFORMANCE_REDIS_PREFIX=%s\n' \
            "$server_pid" "$holder_pid" "$redis_prefix" >"$dir/env"
        stop "$dir"
    fi
}
trap abandon EXIT

export RATEKEEPER_DATABASE_URL="sqlite://$dir/rk.db?mode=rwc"
export RATEKEEPER_REDIS_URL="$REDIS_URL" RATEKEEPER_REDIS_PREFIX="$redis_prefix"
export RATEKEEPER_LISTEN=127.0.0.1:0
export RATEKEEPER_LOG_JSON=true RUST_LOG="${RUST_LOG:-info}"
unset RATEKEEPER_CONFIG RATEKEEPER_GRPC_LISTEN

timeout 120 "$BIN" migrate >>"$dir/server.log" 2>&1 || {
    tail -n 20 "$dir/server.log" >&2
    die "ratekeeper migrate failed (log above)"
}
printf 'conformance-password-1\n' | timeout 60 "$BIN" user create conformance --admin >>"$dir/server.log" 2>&1 || {
    tail -n 20 "$dir/server.log" >&2
    die "ratekeeper user create failed (log above)"
}
token="$(timeout 60 "$BIN" token create conformance 2>>"$dir/server.log")" || die "ratekeeper token create failed"
[[ -n $token ]] || die "ratekeeper token create printed no token"

nohup "$BIN" serve >>"$dir/server.log" 2>&1 </dev/null &
server_pid=$!

# The address the server logged with "ratekeeper listening", once it has.
listening() {
    python3 - "$dir/server.log" <<'PY'
import json, sys
for line in open(sys.argv[1], errors="replace"):
    try:
        fields = json.loads(line).get("fields", {})
    except ValueError:
        continue
    if fields.get("message") == "ratekeeper listening":
        print(fields["address"])
        break
PY
}
address="" ready=""
for _ in $(seq 1 "$TRIES"); do
    kill -0 "$server_pid" 2>/dev/null || {
        tail -n 20 "$dir/server.log" >&2
        die "the server exited during its start (log above)"
    }
    [[ -n $address ]] || address="$(listening)"
    if [[ -n $address ]] && curl -fsS --max-time 2 "http://$address/readyz" >/dev/null 2>&1; then
        ready=1
        break
    fi
    sleep 0.1
done
[[ -n $ready ]] || {
    tail -n 20 "$dir/server.log" >&2
    if [[ -z $address ]]; then
        die "the server logged no address within $TRIES tries (log above)"
    fi
    die "http://$address/readyz did not answer 200 within $TRIES tries: $(curl -sS --max-time 2 "http://$address/readyz" 2>&1 || true)"
}
url="http://$address"

# A loopback port where nothing listens: bound (by the kernel's choice) and held, never
# listened on, by a process of its own until --stop, so that no other server can take it
# meanwhile; a connection to it is refused.
nohup python3 -c 'import signal, socket, sys
s = socket.socket()
s.bind(("127.0.0.1", 0))
open(sys.argv[1], "w").write(str(s.getsockname()[1]))
signal.pause()' "$dir/unreachable_port" >/dev/null 2>&1 </dev/null &
holder_pid=$!
unreachable_port=""
for _ in $(seq 1 100); do
    unreachable_port="$(cat "$dir/unreachable_port" 2>/dev/null || true)"
    [[ -n $unreachable_port ]] && break
    sleep 0.05
done
[[ $unreachable_port =~ ^[0-9]+$ ]] || die "could not hold a free port for unreachable_url"

timeout 300 python3 "$here/setup_fixtures.py" --url "$url" --token "$token" \
    --scenarios "$SCENARIOS" --out "$dir" --unreachable-url "http://127.0.0.1:$unreachable_port" "$@" >&2

{
    printf 'RK_CONFORMANCE_DIR=%s\n' "$dir"
    printf 'RK_CONFORMANCE_PID=%s\n' "$server_pid"
    printf 'RK_CONFORMANCE_HOLDER_PID=%s\n' "$holder_pid"
    printf 'RK_CONFORMANCE_URL=%s\n' "$url"
    printf 'RK_CONFORMANCE_REDIS_PREFIX=%s\n' "$redis_prefix"
} >"$dir/env"
started=1
say "server at $url (pid $server_pid, Redis prefix $redis_prefix); stop it with: $0 --stop $dir"
printf 'RK_CONFORMANCE_DIR=%s\nRK_CONFORMANCE_PID=%s\n' "$dir" "$server_pid"
