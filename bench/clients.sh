#!/usr/bin/env bash
# The client libraries' denial cache under a denied flood: a private server (release or
# debug binary), an application and key, per_key token-bucket policies of rate 1/s and
# capacity 1, then a 10 s flood of acquires over a few keys through the Rust client
# (clients/rust/examples/denied_flood.rs), with its denial cache and without, and through
# the Python client (bench/clients/python_flood.py, when clients/python/.venv exists).
# The server's own /metrics (ratekeeper_acquire_seconds_count: every answer it gave) is
# read before and after each run, to count what reached it independently of the clients.
#
#   bench/clients.sh [BIN]        # BIN: the server binary (default target/release/ratekeeper,
#                                 # else target/debug/ratekeeper)
#   FLOOD_SECONDS=10 FLOOD_TASKS=8 FLOOD_KEYS=4   (the defaults)
#
# Prints one line per run: calls, requests that reached the server (the client's count
# and the server's), grants, and per key per second; then the JSON of each run.
set -euo pipefail
cd "$(dirname "$0")/.."
TARGET=${CARGO_TARGET_DIR:-target}
BIN=${1:-}
if [[ -z $BIN ]]; then
    for candidate in "$TARGET/release/ratekeeper" "$TARGET/debug/ratekeeper"; do
        [[ -x $candidate ]] && BIN=$candidate && break
    done
fi
[[ -x $BIN ]] || { echo "no server binary: give its path (cargo build --release)" >&2; exit 1; }
SECONDS_=${FLOOD_SECONDS:-10}
TASKS=${FLOOD_TASKS:-8}
KEYS=${FLOOD_KEYS:-4}
PREFIX="rkbench-clients-$$"
# shellcheck source=bench/private_server.sh
source bench/private_server.sh

timeout 900 cargo build -q -p ratekeeper-client --example denied_flood
FLOOD="$TARGET/debug/examples/denied_flood"

# Every answer the server gave so far (granted, denied, refused), from /metrics.
answered() {
    curl -fsS "$API/metrics" | awk '/^ratekeeper_acquire_seconds_count/ { n += $2 } END { printf "%d\n", n }'
}

policy() { # name
    curl -fsS -X POST "$API/api/v1/policies" "${auth[@]}" -H 'content-type: application/json' \
        -d "{\"name\": \"$1\", \"owner_app\": \"bench\", \"scope\": \"per_key\", \"algorithm\": \"token_bucket\", \"rate\": 1, \"max_permits\": 1}" >/dev/null
}

summary() { # label json before after
    python3 - "$1" "$2" "$3" "$4" "$SECONDS_" <<'PY'
import json, sys
label, report, before, after, seconds = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
calls = report["calls"]
client_sent = report.get("server_requests", report.get("requests"))
per_key = report.get("per_key", {})
keys = max(len(per_key), 1)
server = after - before
print(f"{label}: {calls} calls, {server} reached the server ({client_sent} by the client's count), "
      f"{report.get('grants')} granted; per key per second: {calls / keys / seconds:.0f} calls, "
      f"{server / keys / seconds:.2f} server requests")
PY
}

results=()
run_rust() { # label cache-size
    local name="flood-$1"
    policy "$name"
    local before after out
    before=$(answered)
    out=$(timeout $((SECONDS_ + 120)) "$FLOOD" --url "$API" --api-key "$KEY" --resource "$name" \
        --tasks "$TASKS" --keys "$KEYS" --seconds "$SECONDS_" --cache-size "$2")
    after=$(answered)
    summary "rust ($1)" "$out" "$before" "$after"
    results+=("$out")
}

run_rust cache 10000
run_rust no-cache 0

PY_FLOOD=bench/clients/python_flood.py
PYTHON=clients/python/.venv/bin/python
if [[ -f $PY_FLOOD && -x $PYTHON ]]; then
    policy flood-python
    before=$(answered)
    out=$(timeout $((SECONDS_ + 120)) "$PYTHON" "$PY_FLOOD" --url "$API" --key "$KEY" \
        --resource flood-python --threads "$TASKS" --duration "$SECONDS_" --keys "$KEYS")
    after=$(answered)
    summary "python (cache)" "$out" "$before" "$after"
    results+=("$out")
else
    echo "python: skipped ($PY_FLOOD or $PYTHON missing: clients/python/check.sh makes the venv)"
fi

for result in "${results[@]}"; do
    echo "$result"
done
