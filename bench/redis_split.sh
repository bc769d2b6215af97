#!/usr/bin/env bash
# Where Redis' time goes under load over many policies: the server (SQLite, its default
# workers) and a private Redis, POLICIES never-reached token buckets created over HTTP,
# wrk -t2 -c64 with bench/acquire_many.lua for DURATION seconds after 7 s of warm-up (longer
# than the sync interval, so that the full reconcile pass the new policies cause is over and
# the figures are the steady state's); then Redis'
# CPU per decision (/proc) and its INFO commandstats over the measured run (reset before
# it): the acquire scripts (fcall), the flusher's and the sync's (evalsha), and the commands
# inside them.
#
#   cargo build --release && bash bench/redis_split.sh
#   BIN=/path/to/another/ratekeeper POLICIES=10000 DURATION=8 bash bench/redis_split.sh
#
# Uses ports 6392 (Redis) and 18095 (ratekeeper) and a temporary directory; needs
# redis-server, redis-cli, wrk, curl and python3.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-target/release/ratekeeper}
POLICIES=${POLICIES:-10000}
DURATION=${DURATION:-8}
DIR=$(mktemp -d)
SERVER_PID=
cleanup() {
  [ -n "$SERVER_PID" ] && kill "$SERVER_PID" 2>/dev/null || true
  redis-cli -p 6392 shutdown nosave >/dev/null 2>&1 || true
  rm -rf "$DIR"
}
trap cleanup EXIT
redis-server --daemonize yes --port 6392 --bind 127.0.0.1 --save "" --appendonly no \
  --dir "$DIR" >/dev/null
export RATEKEEPER_DATABASE_URL="sqlite://$DIR/db.sqlite" \
  RATEKEEPER_REDIS_URL=redis://127.0.0.1:6392 RATEKEEPER_LISTEN=127.0.0.1:18095 \
  RATEKEEPER_REDIS_PREFIX=split RUST_LOG=warn
"$BIN" migrate >/dev/null
echo 'a-password-long-enough' | "$BIN" user create split --admin >/dev/null
TOKEN=$("$BIN" token create split | tail -1)
"$BIN" serve >"$DIR/server.log" 2>&1 &
SERVER_PID=$!
for _ in $(seq 100); do curl -sf localhost:18095/healthz >/dev/null && break; sleep 0.1; done
AUTH="Authorization: Bearer $TOKEN"
curl -sf -X POST -H "$AUTH" -H 'content-type: application/json' localhost:18095/api/v1/apps \
  -d '{"slug":"bench","name":"Bench"}' >/dev/null
KEY=$(curl -sf -X POST -H "$AUTH" -H 'content-type: application/json' \
  localhost:18095/api/v1/apps/bench/keys -d '{"label":"split"}' |
  python3 -c 'import json, sys; print(json.load(sys.stdin)["key"])')
python3 - "$TOKEN" "$POLICIES" <<'PY'
import concurrent.futures, json, sys, urllib.request
token, count = sys.argv[1], int(sys.argv[2])
def create(i):
    body = json.dumps({"name": f"p{i}", "owner_app": "bench", "rate": 1000000,
                       "max_permits": 1000000000, "allowed_apps": ["bench"]}).encode()
    request = urllib.request.Request("http://127.0.0.1:18095/api/v1/policies", data=body,
        headers={"Authorization": "Bearer " + token, "Content-Type": "application/json"})
    urllib.request.urlopen(request).read()
with concurrent.futures.ThreadPoolExecutor(8) as pool:
    list(pool.map(create, range(count)))
PY
LOAD=(wrk -t2 -c64 -H "Authorization: Bearer $KEY" -s bench/acquire_many.lua
  http://127.0.0.1:18095/v1/acquire -- "$POLICIES" p)
"${LOAD[@]:0:3}" -d7s "${LOAD[@]:3}" >/dev/null
REDIS_PID=$(pgrep -f 'redis-server 127.0.0.1:6392')
redis-cli -p 6392 config resetstat >/dev/null
before=$(awk '{print $14 + $15}' "/proc/$REDIS_PID/stat")
"${LOAD[@]:0:3}" -d"${DURATION}s" "${LOAD[@]:3}" >"$DIR/wrk.txt"
after=$(awk '{print $14 + $15}' "/proc/$REDIS_PID/stat")
requests=$(awk '/requests in/ {print $1}' "$DIR/wrk.txt")
ticks=$(getconf CLK_TCK)
grep 'Requests/sec' "$DIR/wrk.txt"
python3 -c "print(f'Redis CPU per decision: {($after - $before) / $ticks * 1e6 / $requests:.2f} us')"
echo "INFO commandstats over the run, by total time:"
redis-cli -p 6392 info commandstats | grep '^cmdstat' | sort -t= -k3 -n -r | head -12
