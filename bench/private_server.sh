# Sourced by the bench scripts that need one private ratekeeper: a Redis on a free
# loopback port and the release server on SQLite, both in a temporary directory, with an
# admin token, an application `bench` and an API key of it. Not run on its own.
#
# Needs BIN (the ratekeeper binary) and PREFIX (the Redis key prefix). Sets TMP,
# REDIS_PORT, HTTP_PORT, API, TOKEN, auth (curl's header arguments), KEY and SERVER_PID;
# start_redis starts (or, after a kill, starts again) the Redis on the same port, its pid
# in REDIS_PID. Stops both and removes TMP on exit.

TMP=$(mktemp -d)
SERVER_PID=""
cleanup() {
    jobs -p | xargs -r kill 2>/dev/null || true
    [[ -n $SERVER_PID ]] && kill "$SERVER_PID" 2>/dev/null && wait "$SERVER_PID" 2>/dev/null
    # The pid file names the Redis running now (a restart writes it anew).
    [[ -s $TMP/redis.pid ]] && kill "$(<"$TMP/redis.pid")" 2>/dev/null
    rm -rf "$TMP"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
REDIS_PORT=$(free_port)
HTTP_PORT=$(free_port)
start_redis() {
    redis-server --bind 127.0.0.1 --port "$REDIS_PORT" --save "" --appendonly no \
        --daemonize yes --pidfile "$TMP/redis.pid" --dir "$TMP" --logfile "$TMP/redis.log"
    for _ in $(seq 1 100); do
        [[ $(redis-cli -p "$REDIS_PORT" PING 2>/dev/null || true) == PONG ]] && break
        sleep 0.05
    done
    REDIS_PID=$(<"$TMP/redis.pid")
}
start_redis

export RATEKEEPER_DATABASE_URL="sqlite://$TMP/bench.db"
export RATEKEEPER_REDIS_URL="redis://127.0.0.1:$REDIS_PORT"
export RATEKEEPER_LISTEN="127.0.0.1:$HTTP_PORT"
export RATEKEEPER_REDIS_PREFIX=$PREFIX
export RUST_LOG=error
API="http://127.0.0.1:$HTTP_PORT"
"$BIN" migrate 2>/dev/null
printf '%s-bench-pw\n' "$PREFIX" | "$BIN" user create bench --admin 2>/dev/null
TOKEN=$("$BIN" token create bench 2>/dev/null)
"$BIN" serve >"$TMP/server.log" 2>&1 &
SERVER_PID=$!
for _ in $(seq 1 100); do curl -fsS "$API/healthz" >/dev/null 2>&1 && break; sleep 0.1; done
auth=(-H "Authorization: Bearer $TOKEN")
curl -fsS -X POST "$API/api/v1/apps" "${auth[@]}" -d '{"slug":"bench","name":"Bench"}' >/dev/null
KEY=$(curl -fsS -X POST "$API/api/v1/apps/bench/keys" "${auth[@]}" -d '{"label":"b"}' |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["key"])')
