#!/usr/bin/env bash
# The Rust client's checks: rustfmt, clippy, the unit and behaviour tests, the doc tests
# (the README's quick start among them), and the conformance scenarios against the server
# of RK_CONFORMANCE_FIXTURE (skipped without it). With RATEKEEPER_API_KEY set (and
# RATEKEEPER_URL, default http://127.0.0.1:8080, serving a policy orders.create), the quick
# start is also run against that server. Last line: `rust: tests: N passed, N failed`
# (each unit test and each scenario counted); exit status non-zero on any failure.
set -uo pipefail
cd "$(dirname "$0")/../.."
export CARGO_TERM_COLOR=never
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
passed=0
failed=0

step() { # name command...
    local name="$1"
    shift
    if "$@"; then
        echo "rust: $name: ok"
    else
        echo "rust: $name: FAILED"
        failed=$((failed + 1))
    fi
}

step fmt cargo fmt -p ratekeeper-client --check
step clippy cargo clippy -p ratekeeper-client --all-targets --quiet -- -D warnings

cargo test -p ratekeeper-client --no-fail-fast -- --nocapture >"$log" 2>&1
status=$?
grep -E '^(test |conformance: |test result)' "$log"
# libtest's counts, without the one test that plays the scenarios (counted one by one).
while read -r ok bad; do
    passed=$((passed + ok))
    failed=$((failed + bad))
done < <(awk '
    /^     Running .*conformance/ { skip = 1; next }
    /^     Running|^   Doc-tests/ { skip = 0 }
    /^test result:/ && !skip {
        for (i = 1; i <= NF; i++) {
            if ($(i + 1) ~ /^passed/) ok = $i
            if ($(i + 1) ~ /^failed/) bad = $i
        }
        print ok, bad
    }' "$log")
scenarios_ok=$(grep -cE '^conformance: [^ ]+ \.\.\. ok$' "$log")
scenarios_failed=$(grep -cE '^conformance: [^ ]+ \.\.\. FAILED' "$log")
passed=$((passed + scenarios_ok))
failed=$((failed + scenarios_failed))
if [[ $status -ne 0 && $failed -eq 0 ]]; then
    # A build error or a crash: nothing counted as failed, so say so.
    tail -40 "$log"
    failed=$((failed + 1))
fi
if [[ -z ${RK_CONFORMANCE_FIXTURE:-} ]]; then
    echo "rust: conformance skipped (RK_CONFORMANCE_FIXTURE is unset)"
fi

if [[ -n ${RATEKEEPER_API_KEY:-} ]]; then
    if out="$(timeout 300 cargo run -q -p ratekeeper-client --example quickstart 2>&1)" &&
        grep -q allowed <<<"$out"; then
        echo "rust: quickstart: ok: $out"
        passed=$((passed + 1))
    else
        echo "rust: quickstart: FAILED: $out"
        failed=$((failed + 1))
    fi
fi

echo "rust: tests: $passed passed, $failed failed"
[[ $failed -eq 0 ]]
