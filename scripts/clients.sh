#!/usr/bin/env bash
# The client libraries' tests: each library under clients/ that has a check.sh (its
# formatter check, linter, unit tests and conformance runner), against one server for all
# of them, then each library's README quick start against a server of its own.
#
#   scripts/clients.sh
#   RK_CLIENTS_BIN=path/to/ratekeeper scripts/clients.sh   # a server binary already built (test.sh)
#
# Toolchains: python3 (with venv), node and npm, go, javac/java, cargo. Missing ones are
# installed with apt-get as root where Debian has them (golang-go, default-jdk,
# python3-venv); Node 20 or later is yours to bring (as for scripts/e2e.sh). Each library's
# check.sh installs its own packages into ignored directories inside clients/<lang>/.
#
# clients/conformance/serve.sh starts the server on SQLite (a temp dir) and the shared
# Redis (prefix `rktest-<RK_TEST_RUN>-clients`), with apps, keys and every scenario's
# policies for each library's prefix (python: py, typescript: ts, go, java, rust) and for
# `ref`, the reference runner (clients/conformance/reference_runner.py), which plays the
# scenarios first to check them against this server.
#
# Each check.sh runs with RK_CONFORMANCE_FIXTURE (its fixture) and RK_CONFORMANCE_SCENARIOS
# set, within RK_CLIENTS_TIMEOUT seconds (default 1200); its last line,
# `<lang>: tests: N passed, N failed`, is its count (a check.sh that fails without such a
# line counts as 1 failed). Each quick start counts as one test. The last line totals
# them: `clients: tests: N passed, N failed`; the exit status is non-zero when any failed.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
root="$(pwd)"
say() { echo "clients: $*"; }
die() {
    echo "clients: $*" >&2
    echo "clients: tests: 0 passed, 1 failed"
    exit 1
}

# ---------------------------------------------------------------- the libraries
libs=()
for check in clients/*/check.sh; do
    [[ -f $check ]] || continue
    lib="$(basename "$(dirname "$check")")"
    [[ $lib == conformance ]] && continue
    libs+=("$lib")
done
prefix_of() {
    case $1 in
        python) echo py ;;
        typescript) echo ts ;;
        *) echo "$1" ;;
    esac
}
if ((${#libs[@]} == 0)); then
    say "no library with a check.sh under clients/"
else
    say "libraries: ${libs[*]}"
fi

# ---------------------------------------------------------------- toolchains
if ! command -v cargo >/dev/null 2>&1 && [[ -f "$HOME/.cargo/env" ]]; then
    # shellcheck disable=SC1091
    . "$HOME/.cargo/env"
fi
apt_updated=""
apt_install() { # apt_install PACKAGE WHY
    if [[ $(id -u) -ne 0 ]] || ! command -v apt-get >/dev/null 2>&1; then
        die "$2, and not root: install Debian's $1 (apt-get install -y $1) as root"
    fi
    say "$2: installing $1 with apt-get"
    if [[ -z $apt_updated ]]; then
        DEBIAN_FRONTEND=noninteractive timeout 600 apt-get -q update </dev/null >/dev/null ||
            die "apt-get update failed"
        apt_updated=1
    fi
    DEBIAN_FRONTEND=noninteractive timeout 900 apt-get -q install -y "$1" </dev/null >/dev/null ||
        die "apt-get install $1 failed"
}
needs() { # needs LIB: whether LIB is among the libraries
    local lib
    for lib in "${libs[@]}"; do [[ $lib == "$1" ]] && return 0; done
    return 1
}
command -v python3 >/dev/null 2>&1 || apt_install python3 "python3 not found"
if needs python; then
    probe="$(mktemp -d)"
    if ! python3 -m venv "$probe/venv" </dev/null >/dev/null 2>&1; then
        apt_install python3-venv "python3 -m venv does not work"
    fi
    rm -rf "$probe"
fi
if needs go && ! command -v go >/dev/null 2>&1; then
    apt_install golang-go "go not found"
fi
if needs java && ! { command -v javac >/dev/null 2>&1 && command -v java >/dev/null 2>&1; }; then
    apt_install default-jdk "javac not found"
fi
if needs typescript; then
    command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 ||
        die "node and npm not found (Node 20 or later: nodesource or nvm)"
fi
if needs rust; then
    command -v cargo >/dev/null 2>&1 || die "cargo not found (rustup)"
fi
command -v curl >/dev/null 2>&1 || apt_install curl "curl not found"

# ---------------------------------------------------------------- the server binary
# The binary `cargo test --all-targets` builds (scripts/test.sh passes it in
# RK_CLIENTS_BIN), or built here with that same command (see scripts/fuzz.sh for why).
if [[ -n ${RK_CLIENTS_BIN:-} ]]; then
    BIN="$RK_CLIENTS_BIN"
else
    command -v cargo >/dev/null 2>&1 || die "cargo not found, and no RK_CLIENTS_BIN"
    say "cargo test --all-targets --no-run (the tests' build of the server)"
    cargo test --all-targets --no-run --quiet
    BIN="$(cd "${CARGO_TARGET_DIR:-target}" && pwd)/debug/ratekeeper"
fi
[[ -x $BIN ]] || die "no server binary at $BIN"
BIN="$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")"
export RK_CLIENTS_BIN="$BIN"

# ---------------------------------------------------------------- the server
export RK_CONFORMANCE_SCENARIOS="$root/clients/conformance/scenarios"
prefixes=(ref)
for lib in "${libs[@]}"; do prefixes+=("$(prefix_of "$lib")"); done
serve_out="$(mktemp)"
conformance_dir=""
cleanup() {
    [[ -n $conformance_dir ]] && clients/conformance/serve.sh --stop "$conformance_dir" || true
    rm -f "$serve_out"
}
trap cleanup EXIT
timeout 600 clients/conformance/serve.sh "${prefixes[@]}" >"$serve_out" || die "the conformance server did not start"
conformance_dir="$(sed -n 's/^RK_CONFORMANCE_DIR=//p' "$serve_out")"
[[ -d $conformance_dir ]] || die "serve.sh printed no directory"

# ---------------------------------------------------------------- the tests
passed=0 failed=0
summary=()
count() { # count NAME PASSED FAILED
    passed=$((passed + $2))
    failed=$((failed + $3))
    summary+=("$(printf '  %-24s %5d passed %5d failed' "$1" "$2" "$3")")
}
# run NAME COMMAND...: runs it with a time bound; its last line is its count.
run() {
    local name=$1 log status=0 last
    shift
    log="$(mktemp)"
    printf '\n==> clients: %s\n' "$name"
    timeout "${RK_CLIENTS_TIMEOUT:-1200}" "$@" 2>&1 | tee "$log" || status=$?
    last="$(tail -n 1 "$log")"
    rm -f "$log"
    if [[ $last =~ ^[A-Za-z0-9_.-]+:\ tests:\ ([0-9]+)\ passed,\ ([0-9]+)\ failed$ ]]; then
        local p=${BASH_REMATCH[1]} f=${BASH_REMATCH[2]}
        # A failed exit without a failed test (a linter, a crash) still failed.
        ((status != 0 && f == 0)) && f=1
        count "$name" "$p" "$f"
    else
        say "$name: exit $status, and no last line 'LANG: tests: N passed, N failed'"
        count "$name" 0 1
    fi
}

run "reference runner" env RK_CONFORMANCE_FIXTURE="$conformance_dir/ref.json" \
    python3 clients/conformance/reference_runner.py
for lib in "${libs[@]}"; do
    run "$lib" env RK_CONFORMANCE_FIXTURE="$conformance_dir/$(prefix_of "$lib").json" \
        "clients/$lib/check.sh"
done
# Quick starts: after the checks, which leave each library built (see quickstart.sh).
for lib in "${libs[@]}"; do
    printf '\n==> clients: %s quick start\n' "$lib"
    if timeout "${RK_CLIENTS_TIMEOUT:-1200}" clients/conformance/quickstart.sh "$lib"; then
        count "$lib quick start" 1 0
    else
        count "$lib quick start" 0 1
    fi
done

printf '\n==> clients: summary\n'
printf '%s\n' "${summary[@]}"
echo "clients: tests: $passed passed, $failed failed"
((failed == 0))
