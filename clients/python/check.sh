#!/usr/bin/env bash
# Checks the Python client: formatting (ruff format), lint (ruff check), types
# (mypy --strict), then the tests (pytest): unit tests, the tests against a real server
# (started from $RK_CLIENTS_BIN or the repository's build; skipped when there is none),
# and the conformance scenarios when RK_CONFORMANCE_FIXTURE is set.
#
# Needs python3 (3.10 or newer) on PATH; installs everything else into .venv here.
# The last line is `python: tests: N passed, N failed` (a failed format, lint or type
# check counts as one failed test); the exit status is non-zero on any failure.
set -uo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$here"
venv="$here/.venv"
failed=0
passed=0

finish() {
    echo "python: tests: $passed passed, $failed failed"
    [[ $failed -eq 0 ]]
    exit $?
}

if [[ ! -x $venv/bin/python ]]; then
    python3 -m venv "$venv" || { echo "check: cannot create $venv" >&2; failed=1; finish; }
fi
# Install (again) only when the project's metadata changed since the last install.
stamp="$venv/.installed"
want="$(sha256sum pyproject.toml | cut -d' ' -f1)"
if [[ ! -f $stamp || $(cat "$stamp") != "$want" ]]; then
    if timeout 900 "$venv/bin/python" -m pip install -q --disable-pip-version-check -e '.[dev]'; then
        echo "$want" >"$stamp"
    else
        echo "check: pip install failed" >&2
        failed=1
        finish
    fi
fi

step() {
    local name=$1
    shift
    echo "== $name" >&2
    if ! timeout 600 "$@"; then
        echo "check: $name failed" >&2
        failed=$((failed + 1))
    fi
}

step "ruff format --check" "$venv/bin/ruff" format --check .
step "ruff check" "$venv/bin/ruff" check .
step "mypy --strict src" "$venv/bin/mypy" --strict src

echo "== pytest" >&2
report="$(mktemp)"
timeout 900 "$venv/bin/python" -m pytest -q -p no:cacheprovider --junitxml="$report" "$@"
status=$?
if [[ -s $report ]]; then
    read -r ok bad < <("$venv/bin/python" - "$report" <<'PY'
import sys
import xml.etree.ElementTree as ET

root = ET.parse(sys.argv[1]).getroot()
suites = [root] if root.tag == "testsuite" else root.findall("testsuite")
tests = failures = errors = skipped = 0
for suite in suites:
    tests += int(suite.get("tests", 0))
    failures += int(suite.get("failures", 0))
    errors += int(suite.get("errors", 0))
    skipped += int(suite.get("skipped", 0))
print(tests - failures - errors - skipped, failures + errors)
PY
)
    passed=$((passed + ok))
    failed=$((failed + bad))
fi
rm -f "$report"
# pytest exits 5 when it collected nothing: that is a failure here too.
if [[ $status -ne 0 && $failed -eq 0 ]]; then
    failed=1
fi
finish
