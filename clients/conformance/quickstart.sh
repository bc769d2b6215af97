#!/usr/bin/env bash
# Runs one client library's quick start, as its README shows it, against a real server.
#
#   clients/conformance/quickstart.sh LANG     # python | typescript | go | java | rust
#
# The quick start is the first fenced code block after the line `<!-- quickstart -->` in
# clients/<lang>/README.md. It reads RATEKEEPER_URL (default http://127.0.0.1:8080) and
# RATEKEEPER_API_KEY, and must exit 0 having printed a line containing `allowed`.
#
# The server is started as scripts/run.sh starts it, with its defaults (SQLite
# ./ratekeeper.db in the working directory, here a new temporary one; Redis on
# 127.0.0.1:6379; HTTP on 127.0.0.1:8080; the admin `admin` made at the first start),
# except for its Redis key prefix, its own so that a shared Redis is not touched. When
# 8080 is taken, it listens on a free port instead and RATEKEEPER_URL says which. Then,
# through the admin API: the app `shop`, an API key for it, and the policy `orders.create`
# (token bucket, 10 permits a second, bursts of 20, allowed to shop).
#
# How each language runs its block (what the library's check.sh leaves behind for it):
#   python      a file, run by clients/python/.venv/bin/python (the library installed in it)
#   typescript  an ES module (.mjs, plain JavaScript) run by node in a new directory whose
#               node_modules/<package name> links to clients/typescript (built: dist/)
#   go          `go run .` in a new module that requires the library's module path
#               (clients/go/go.mod) with a replace directive to clients/go
#   java        the single-file source launcher, `java -cp <library> QuickStart.java`;
#               the library: the classpath in clients/java/build/classpath.txt if that
#               file exists, else the jars in clients/java/build/libs/, else the classes
#               in clients/java/build/classes/
#   rust        the crate's example `quickstart` (cargo run), which must be the block word
#               for word (checked here, and by the crate's own tests)
#
# Environment: RK_CLIENTS_BIN (the server binary, default target/debug/ratekeeper),
# RK_TEST_RUN (Redis prefix `rktest-<run>-quickstart-<lang>`), RK_TEST_REDIS_URL,
# RK_QUICKSTART_TIMEOUT (seconds the quick start may take, default 300).
# Its last line: `quickstart: <lang>: passed` or `quickstart: <lang>: failed (why)`.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
lang="${1:-}"
case $lang in
    py) lang=python ;;
    ts) lang=typescript ;;
esac
lib="$root/clients/$lang"

result() { # result passed|"failed (why)": the last line, and the exit status
    echo "quickstart: $lang: $1"
    [[ $1 == passed ]]
}
fail() { result "failed ($*)" || exit 1; }

case $lang in
    python | typescript | go | java | rust) ;;
    *)
        echo "usage: quickstart.sh python|typescript|go|java|rust" >&2
        exit 2
        ;;
esac
[[ -f $lib/README.md ]] || fail "no $lib/README.md"

BIN="${RK_CLIENTS_BIN:-$root/target/debug/ratekeeper}"
[[ -x $BIN ]] || fail "no server binary at $BIN (set RK_CLIENTS_BIN)"
REDIS_URL="${RK_TEST_REDIS_URL:-redis://127.0.0.1:6379}"
if [[ -n ${RK_TEST_RUN:-} ]]; then
    redis_prefix="rktest-${RK_TEST_RUN}-quickstart-$lang"
else
    redis_prefix="rkquickstart-$lang-$(python3 -c 'import secrets; print(secrets.token_hex(4))')"
fi

tmp="$(mktemp -d -t rk-quickstart-XXXXXX)"
server_pid=""
cleanup() {
    if [[ -n $server_pid ]]; then
        kill "$server_pid" 2>/dev/null || true
        for _ in $(seq 1 100); do
            kill -0 "$server_pid" 2>/dev/null || break
            sleep 0.1
        done
        kill -9 "$server_pid" 2>/dev/null || true
    fi
    if command -v redis-cli >/dev/null 2>&1; then
        timeout 60 redis-cli -u "$REDIS_URL" --scan --pattern "$redis_prefix*" 2>/dev/null |
            timeout 60 xargs -r redis-cli -u "$REDIS_URL" UNLINK >/dev/null 2>&1 || true
    fi
    rm -rf "$tmp"
}
trap cleanup EXIT

# ---------------------------------------------------------------- the README's block
python3 - "$lib/README.md" "$tmp/block" <<'PY' || fail "no fenced code block after <!-- quickstart --> in $lib/README.md"
import re, sys
lines = open(sys.argv[1], encoding="utf-8").read().splitlines()
marker = next((i for i, line in enumerate(lines) if line.strip() == "<!-- quickstart -->"), None)
if marker is None:
    sys.exit(1)
code, fence = None, None
for line in lines[marker + 1:]:
    if fence is None:
        opening = re.match(r"^\s*(`{3,}|~{3,})", line)
        if opening:
            fence, code = opening.group(1), []
    elif line.strip().startswith(fence) and line.strip().strip(fence[0]) == "":
        break
    else:
        code.append(line)
else:
    sys.exit(1)
open(sys.argv[2], "w", encoding="utf-8").write("\n".join(code) + "\n")
PY

# ---------------------------------------------------------------- the server
mkdir -p "$tmp/server"
export RATEKEEPER_REDIS_URL="$REDIS_URL" RATEKEEPER_REDIS_PREFIX="$redis_prefix"
export RATEKEEPER_LOG_JSON=true RUST_LOG="${RUST_LOG:-info}"
unset RATEKEEPER_CONFIG RATEKEEPER_DATABASE_URL RATEKEEPER_GRPC_LISTEN RATEKEEPER_URL
port_free() {
    # SO_REUSEADDR as a server sets it: connections of a past server in TIME_WAIT do
    # not make the port taken.
    python3 -c 'import socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
try:
    s.bind(("127.0.0.1", 8080))
except OSError:
    sys.exit(1)
finally:
    s.close()'
}
listening() {
    python3 - "$tmp/server.log" <<'PY'
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
# start LISTEN: the server on LISTEN (empty: its default); sets address (empty: no start)
start() {
    address=""
    : >"$tmp/server.log"
    (cd "$tmp/server" && if [[ -n $1 ]]; then export RATEKEEPER_LISTEN=$1; else unset RATEKEEPER_LISTEN; fi &&
        exec nohup "$BIN" serve >>"$tmp/server.log" 2>&1 </dev/null) &
    server_pid=$!
    for _ in $(seq 1 300); do
        kill -0 "$server_pid" 2>/dev/null || break
        [[ -n $address ]] || address="$(listening)"
        if [[ -n $address ]] && curl -fsS --max-time 2 "http://$address/readyz" >/dev/null 2>&1; then
            return
        fi
        sleep 0.1
    done
    address=""
    kill "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
    server_pid=""
}
address=""
if port_free; then
    start ""
fi
if [[ -z $address ]]; then
    # 8080 is taken (or was taken before the server could bind it): another port.
    start 127.0.0.1:0
fi
[[ -n $address ]] || {
    tail -n 20 "$tmp/server.log" >&2
    fail "the server did not start (log above)"
}
url="http://$address"
token="$(cd "$tmp/server" && timeout 60 "$BIN" token create admin 2>>"$tmp/server.log")" ||
    fail "ratekeeper token create admin failed"
admin() { # admin PATH JSON: POST as the admin; the reply on stdout
    curl -fsS --max-time 10 -X POST "$url$1" -H "Authorization: Bearer $token" -d "$2"
}
admin /api/v1/apps '{"slug":"shop","name":"Shop"}' >/dev/null || fail "could not create the app shop"
key="$(admin /api/v1/apps/shop/keys '{"label":"quick start"}' |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["key"])')" || fail "could not create a key for shop"
admin /api/v1/policies \
    '{"name":"orders.create","owner_app":"shop","rate":10,"max_permits":20,"allowed_apps":["shop"]}' \
    >/dev/null || fail "could not create the policy orders.create"
export RATEKEEPER_API_KEY="$key"
if [[ $address != 127.0.0.1:8080 ]]; then
    export RATEKEEPER_URL="$url"
    echo "quickstart: 127.0.0.1:8080 is taken: the server is at $url (RATEKEEPER_URL)"
fi

# ---------------------------------------------------------------- the quick start
run="$tmp/run"
mkdir -p "$run"
case $lang in
    python)
        py="$lib/.venv/bin/python"
        [[ -x $py ]] || fail "no $py: run clients/python/check.sh first"
        cp "$tmp/block" "$run/quickstart.py"
        command=("$py" quickstart.py)
        ;;
    typescript)
        name="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["name"])' "$lib/package.json")" ||
            fail "no package name in $lib/package.json"
        mkdir -p "$run/node_modules/$(dirname "$name")"
        ln -s "$lib" "$run/node_modules/$name"
        cp "$tmp/block" "$run/quickstart.mjs"
        command=(node quickstart.mjs)
        ;;
    go)
        module="$(sed -n 's/^module[[:space:]]\+//p' "$lib/go.mod" | head -n 1)"
        [[ -n $module ]] || fail "no module path in $lib/go.mod"
        cp "$tmp/block" "$run/main.go"
        printf 'module quickstart\n\ngo 1.19\n\nrequire %s v0.0.0\n\nreplace %s => %s\n' \
            "$module" "$module" "$lib" >"$run/go.mod"
        (cd "$run" && timeout 300 go mod tidy) || fail "go mod tidy failed"
        command=(go run .)
        ;;
    java)
        if [[ -f $lib/build/classpath.txt ]]; then
            classpath="$(head -n 1 "$lib/build/classpath.txt")"
        elif compgen -G "$lib/build/libs/*.jar" >/dev/null; then
            classpath="$(printf '%s:' "$lib"/build/libs/*.jar)"
            classpath="${classpath%:}"
        elif [[ -d $lib/build/classes ]]; then
            classpath="$lib/build/classes"
        else
            fail "no library build in $lib/build: run clients/java/check.sh first"
        fi
        class="$(sed -n 's/^public[[:space:]]\+\(final[[:space:]]\+\)\?class[[:space:]]\+\([A-Za-z0-9_]\+\).*/\2/p' "$tmp/block" | head -n 1)"
        cp "$tmp/block" "$run/${class:-QuickStart}.java"
        command=(java -cp "$classpath" "${class:-QuickStart}.java")
        ;;
    rust)
        # A Cargo example is the one way to run Rust without a new crate to build from
        # scratch; it is the README's block exactly, or this run says so.
        cmp -s "$tmp/block" "$lib/examples/quickstart.rs" ||
            fail "the README's quick start is not clients/rust/examples/quickstart.rs word for word"
        command=(cargo run --quiet --manifest-path "$root/Cargo.toml" -p ratekeeper-client --example quickstart)
        ;;
esac
echo "quickstart: $lang: ${command[*]}"
status=0
(cd "$run" && timeout "${RK_QUICKSTART_TIMEOUT:-300}" "${command[@]}") >"$tmp/out" 2>&1 || status=$?
sed 's/^/    /' "$tmp/out"
((status == 0)) || fail "exit status $status"
grep -q allowed "$tmp/out" || fail "no line containing 'allowed' in its output"
result passed
