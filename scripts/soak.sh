#!/usr/bin/env bash
# The soak in short (bench/soak, see bench/README.md "The soak"): first its verdict's own
# tests (a grant over a bound, an odd answer, growing memory each fail), then a 3-minute
# run: 3 instances on PostgreSQL and a Redis behind three sentinels, under load, with a
# fault every 8 seconds (each kind at least once). It fails on anything over-admitted, an
# acknowledged edit not stored, an answer outside its policy's failure mode.
#   scripts/soak.sh
#   RK_SOAK_BIN=path/to/ratekeeper scripts/soak.sh  # a server binary already built (test.sh)
#   RK_SOAK_MINUTES=10 scripts/soak.sh               # longer (the full run: python3 bench/soak)
# Its last line counts: `soak: tests: N passed, N failed` (the verdict's unit tests and the
# run itself, as one).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
for cmd in python3 redis-server redis-cli psql; do
    command -v "$cmd" >/dev/null || {
        echo "soak: $cmd is required (scripts/services.sh installs it)" >&2
        exit 1
    }
done
if [[ -n ${RK_SOAK_BIN:-} ]]; then
    BIN="$RK_SOAK_BIN"
else
    echo "soak: cargo build --release (the server the soak runs)"
    cargo build --release --quiet -p ratekeeper --bin ratekeeper
    BIN="$(cd "${CARGO_TARGET_DIR:-target}" && pwd)/release/ratekeeper"
fi
MINUTES="${RK_SOAK_MINUTES:-3}"
# A debug build costs several times a release one's CPU a request: the short run offers
# it half the load (still more than every bucket's limit).
RATE="${RK_SOAK_RATE:-600}"
EVERY="${RK_SOAK_FAULT_EVERY:-8}"

passed=0
failed=0
unit_log="$(mktemp)"
trap 'rm -f "$unit_log"' EXIT
if python3 -m unittest discover -s bench/soak -p 'test_*.py' 2>&1 | tee "$unit_log"; then :; fi
ran=$(awk '/^Ran [0-9]+ tests?/ { print $2 }' "$unit_log")
bad=$(awk '/^FAILED \(/ { while (match($0, /(failures|errors)=[0-9]+/)) {
        s += substr($0, RSTART + index(substr($0, RSTART, RLENGTH), "="), RLENGTH)
        $0 = substr($0, RSTART + RLENGTH) } } END { print s + 0 }' "$unit_log")
passed=$((passed + ${ran:-0} - bad))
failed=$((failed + bad))
if [[ -z ${ran:-} ]]; then failed=$((failed + 1)); fi

if python3 bench/soak --minutes "$MINUTES" --rate "$RATE" --fault-every "$EVERY" --bin "$BIN"; then
    passed=$((passed + 1))
else
    failed=$((failed + 1))
fi
echo "soak: tests: $passed passed, $failed failed"
((failed == 0))
