#!/usr/bin/env bash
# Checks the Go client: gofmt (must list no file), go vet, then go test (unit tests,
# examples, and the conformance scenarios, which run when RK_CONFORMANCE_FIXTURE names a
# fixture and are skipped otherwise). Needs only the go toolchain on PATH: the module
# uses the standard library alone, so nothing is downloaded.
#
# Last line: `go: tests: N passed, N failed`, counting each test without subtests and
# each subtest (one per conformance scenario); gofmt, vet or a build that fails without
# a failed test counts as one failed. Exit status non-zero on any failure.
set -uo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")"
export GOTOOLCHAIN=local GOPROXY=off GOFLAGS="${GOFLAGS:-}"

failed_stages=0
status=0

echo "== gofmt -l"
unformatted="$(gofmt -l .)"
if [[ -n $unformatted ]]; then
    echo "gofmt: these files are not formatted:"
    echo "$unformatted"
    failed_stages=$((failed_stages + 1))
    status=1
fi

echo "== go vet ./..."
if ! timeout 600 go vet ./...; then
    failed_stages=$((failed_stages + 1))
    status=1
fi

echo "== go test -count=1 -v ./..."
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
timeout 900 go test -count=1 -timeout 600s -v ./... 2>&1 | tee "$log"
test_status=${PIPESTATUS[0]}

# Leaves of the test tree: a test whose name prefixes no other's (plus "/") has no subtest.
read -r passed failed < <(awk '
    /^ *--- (PASS|FAIL|SKIP): / { s = $2; sub(":", "", s); result[$3] = s; order[++n] = $3 }
    END {
        p = 0; f = 0
        for (i = 1; i <= n; i++) {
            name = order[i]; leaf = 1
            for (j = 1; j <= n; j++) {
                if (index(order[j], name "/") == 1) { leaf = 0; break }
            }
            if (!leaf) continue
            if (result[name] == "PASS") p++
            else if (result[name] == "FAIL") f++
        }
        print p, f
    }' "$log")

if [[ $test_status -ne 0 ]]; then
    status=1
    # A build failure or a panic fails without a --- FAIL line: count it.
    [[ $failed -eq 0 ]] && failed=1
fi
failed=$((failed + failed_stages))
echo "go: tests: $passed passed, $failed failed"
exit $status
