#!/usr/bin/env bash
# The TypeScript client's checks: installs its devDependencies into node_modules (npm ci),
# then the format check, the build, the linter, and the tests (unit tests, the Express
# middleware against a real server when one can be started, and the conformance scenarios
# when RK_CONFORMANCE_FIXTURE names a fixture). Needs node (18 or later) and npm on PATH.
#
#   clients/typescript/check.sh
#
# Environment: RK_CONFORMANCE_FIXTURE, RK_CONFORMANCE_SCENARIOS (the conformance run),
# RK_RATEKEEPER_BIN or RK_CLIENTS_BIN (the server binary for the Express test; default
# target/debug/ratekeeper), RK_TEST_REDIS_URL (default redis://127.0.0.1:6379).
# The last line is `typescript: tests: N passed, N failed`; a stage that fails without a
# test (install, format, lint, build) counts as one failed. Exit status 1 on any failure.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"

passed=0
failed=0
stage() {
    local name=$1
    shift
    echo "== typescript: $name"
    if ! "$@"; then
        echo "typescript: $name failed"
        failed=$((failed + 1))
        return 1
    fi
}
finish() {
    echo "typescript: tests: $passed passed, $failed failed"
    [[ $failed -eq 0 ]]
    exit
}

stage "npm ci" timeout 600 npm ci --no-audit --no-fund || finish
stage "prettier --check" timeout 300 npx prettier --check .
built=1
stage "tsc" timeout 300 npx tsc || built=0
# After the build: the tests import the package by its name, whose types are in dist/,
# which a fresh checkout does not have; linted before it, every test is "unresolved".
stage "eslint" timeout 600 npx eslint .
stage "tsc -p test" timeout 300 npx tsc -p test || built=0
[[ $built -eq 1 ]] || finish

echo "== typescript: node --test"
tap=build-test/results.tap
timeout 900 node --test \
    --test-reporter=spec --test-reporter-destination=stdout \
    --test-reporter=tap --test-reporter-destination="$tap" \
    build-test/test/*.test.js
status=$?
count() { sed -n "s/^# $1 \([0-9]*\)\$/\1/p" "$tap" | tail -1; }
p=$(count pass)
f=$(count fail)
c=$(count cancelled)
passed=$((passed + ${p:-0}))
failed=$((failed + ${f:-0} + ${c:-0}))
# A run that failed without a failed test (a crash, a timeout, a failing hook) still fails.
if [[ $status -ne 0 && ${f:-0} -eq 0 && ${c:-0} -eq 0 ]]; then
    echo "typescript: node --test exited with $status"
    failed=$((failed + 1))
fi
finish
