#!/usr/bin/env bash
# Browser tests of the web console (e2e/): headless Debian Chromium driven by
# playwright-core, against the real server (debug build) on a free loopback port, with a
# SQLite database in a temp dir and a Redis key prefix of its own.
#   scripts/e2e.sh                             # everything
#   scripts/e2e.sh --test-name-pattern=viewer  # extra arguments go to `node --test`
#   RK_E2E_BIN=path/to/ratekeeper scripts/e2e.sh  # a server binary already built (test.sh)
# Installs chromium (apt-get, as root) and the npm packages (npm ci) when missing; never
# runs `playwright install`. Screenshots land in e2e/screenshots/ (not committed).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

# cargo may not be on a non-login shell's PATH.
if ! command -v cargo >/dev/null 2>&1 && [[ -f "$HOME/.cargo/env" ]]; then
    # shellcheck disable=SC1091
    . "$HOME/.cargo/env"
fi
export PATH="$PATH:/usr/local/sbin:/usr/sbin:/sbin"
export DEBIAN_FRONTEND=noninteractive

say() { printf 'e2e: %s\n' "$*"; }
die() {
    printf 'e2e: ERROR: %s\n' "$*" >&2
    exit 1
}

CHROMIUM="${RK_E2E_CHROMIUM:-/usr/bin/chromium}"
export RK_E2E_CHROMIUM="$CHROMIUM"

# ---------------------------------------------------------------- chromium (apt)
if [[ ! -x $CHROMIUM ]]; then
    [[ $(id -u) -eq 0 ]] ||
        die "no $CHROMIUM and not root: apt-get install -y chromium as root"
    # playwright-core drives Chromium itself (CDP): no chromium-driver (WebDriver).
    say "installing chromium with apt-get"
    log="$(mktemp)"
    if ! { apt-get -q update && apt-get -q install -y chromium; } </dev/null >"$log" 2>&1; then
        tail -n 30 "$log" >&2
        rm -f "$log"
        die "apt-get install chromium failed"
    fi
    rm -f "$log"
    [[ -x $CHROMIUM ]] || die "still no $CHROMIUM after apt-get install chromium"
fi
say "browser: $("$CHROMIUM" --version 2>/dev/null | head -n 1) ($CHROMIUM)"

# ---------------------------------------------------------------- node and npm packages
command -v node >/dev/null 2>&1 || die "node not found (Node 20 or later is needed)"
command -v npm >/dev/null 2>&1 || die "npm not found"
node_major="$(node -p 'process.versions.node.split(".")[0]')"
((node_major >= 20)) || die "node $(node --version) is too old: playwright-core needs Node 20 or later"
if [[ -f e2e/package-lock.json ]]; then
    npm ci --prefix e2e --no-audit --no-fund --loglevel=error </dev/null
else
    npm install --prefix e2e --no-audit --no-fund --loglevel=error </dev/null
fi

# ---------------------------------------------------------------- Redis and the server
RK_SERVICES=redis scripts/services.sh
# The server: the binary `cargo test --all-targets` builds (scripts/test.sh passes it in
# RK_E2E_BIN). Built here with that same command, not `cargo build --bin`: a plain build
# resolves features without the dev-dependencies' and would rebuild ~30 crates into
# another binary than the one the tests ran.
if [[ -z ${RK_E2E_BIN:-} ]]; then
    say "cargo test --all-targets --no-run (the tests' build of the server)"
    cargo test --all-targets --no-run --quiet
    RK_E2E_BIN="$(cd "${CARGO_TARGET_DIR:-target}" && pwd)/debug/ratekeeper"
fi
export RK_E2E_BIN
[[ -x $RK_E2E_BIN ]] || die "no server binary at $RK_E2E_BIN"
# Where the server finds Redis: the test suite's setting, when exported.
if [[ -n ${RK_TEST_REDIS_URL:-} ]]; then
    export RK_E2E_REDIS_URL="${RK_E2E_REDIS_URL:-$RK_TEST_REDIS_URL}"
fi

# ---------------------------------------------------------------- the tests
shopt -s nullglob
tests=(e2e/*.test.mjs)
((${#tests[@]})) || die "no e2e/*.test.mjs"
# Failure screenshots of an earlier run would mislead.
rm -f e2e/screenshots/FAILED-*.png
say "node --test ${tests[*]}"
exec node --test --test-concurrency=1 --test-reporter=spec "$@" "${tests[@]}"
