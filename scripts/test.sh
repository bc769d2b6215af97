#!/usr/bin/env bash
# Run the whole test suite: services, formatting, lints, then every test target.
#   scripts/test.sh                 # everything
#   scripts/test.sh some_filter     # extra arguments go to `cargo test --all-targets`
#   scripts/test.sh -- --nocapture
# RK_AUDIT_DB names an offline copy of the RustSec advisory database for `cargo audit`
# (by default it fetches the online one). No advisory is ignored.
#
# Each run has an id (RK_TEST_RUN, made here unless exported: `<unix seconds>_<random>`).
# The tests name what they make on the shared servers after it: databases
# `rk_test_<run>_<random>`, Redis keys `rktest-<run>-...`, SQLite files under
# `$TMPDIR/ratekeeper-tests/<run>/`. On exit, passed or failed, this script removes exactly
# those, plus what runs older than a day left behind: never what a live run uses.
# The last line it prints totals every stage's tests: `total: N passed, N failed`.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

# cargo may not be on a non-login shell's PATH.
if ! command -v cargo >/dev/null 2>&1 && [[ -f "$HOME/.cargo/env" ]]; then
    # shellcheck disable=SC1091
    . "$HOME/.cargo/env"
fi

# Where the tests find the shared services (override by exporting them first).
export RK_TEST_POSTGRES_URL="${RK_TEST_POSTGRES_URL:-postgres://postgres@127.0.0.1:5432}"
export RK_TEST_MYSQL_URL="${RK_TEST_MYSQL_URL:-mysql://root@127.0.0.1:3306}"
export RK_TEST_REDIS_URL="${RK_TEST_REDIS_URL:-redis://127.0.0.1:6379}"

if [[ -z ${RK_TEST_RUN:-} ]]; then
    RK_TEST_RUN="$(date +%s)_$(od -An -N3 -tx1 /dev/urandom | tr -d ' \n')"
fi
# It becomes part of SQL identifiers and of Redis match patterns.
[[ $RK_TEST_RUN =~ ^[a-z0-9_]+$ ]] || {
    echo "test: RK_TEST_RUN=$RK_TEST_RUN: only a-z, 0-9 and _" >&2
    exit 2
}
export RK_TEST_RUN
# Leftovers of runs that started before this (unix seconds) are old enough to drop.
stale_before=$(($(date +%s) - 86400))
sqlite_root="${TMPDIR:-/tmp}/ratekeeper-tests"

step() { printf '\n==> %s\n' "$*"; }

# ---------------------------------------------------------------- what each stage counted
logs="$(mktemp -d)"
stage=""           # the stage running now: named in the summary if it fails
counted=()         # "stage passed failed", one entry a stage that ran tests

# count_cargo LOG: passed and failed tests over libtest's "test result:" lines.
count_cargo() {
    awk '/^test result: / {
            for (i = 1; i <= NF; i++) {
                if ($(i + 1) ~ /^passed;?$/) p += $i
                if ($(i + 1) ~ /^failed;?$/) f += $i
            }
        } END { print p + 0, f + 0 }' "$1"
}
# count_fuzz LOG: scripts/fuzz.sh's closing count of generated cases.
count_fuzz() {
    awk '/^fuzz: generated cases: / { p += $4; f += $6 } END { print p + 0, f + 0 }' "$1"
}
# count_envoy LOG: scripts/envoy_client.sh's closing count of its tests.
count_envoy() {
    awk '/^envoy: tests: / { p += $3; f += $5 } END { print p + 0, f + 0 }' "$1"
}
# count_webhooks LOG: scripts/webhooks.sh's closing count of its tests.
count_webhooks() {
    awk '/^webhooks: tests: / { p += $3; f += $5 } END { print p + 0, f + 0 }' "$1"
}
# count_clients LOG: scripts/clients.sh's closing count of its tests (each library's, and
# the quick starts).
count_clients() {
    awk '/^clients: tests: / { p += $3; f += $5 } END { print p + 0, f + 0 }' "$1"
}
# count_soak LOG: scripts/soak.sh's closing count (the verdict's unit tests and the run).
count_soak() {
    awk '/^soak: tests: / { p += $3; f += $5 } END { print p + 0, f + 0 }' "$1"
}
# count_node LOG: node --test's summary ("ℹ pass N", "ℹ fail N", "ℹ cancelled N").
count_node() {
    awk '$2 == "pass" && $3 ~ /^[0-9]+$/ { p += $3 }
         ($2 == "fail" || $2 == "cancelled") && $3 ~ /^[0-9]+$/ { f += $3 }
         END { print p + 0, f + 0 }' "$1"
}

# run_stage NAME COUNTER COMMAND...: runs COMMAND with its output also in a log, and
# counts the log's tests with COUNTER (none: a stage without tests).
run_stage() {
    local name=$1 counter=$2 status=0
    shift 2
    stage=$name
    "$@" 2>&1 | tee "$logs/$name.log" || status=$?
    if [[ $counter != none ]]; then
        counted+=("$name $($counter "$logs/$name.log")")
    fi
    ((status == 0)) || exit "$status"
    stage=""
}

# ---------------------------------------------------------------- cleanup of this run
my_parts() {
    python3 -c 'import sys, urllib.parse as u; p = u.urlsplit(sys.argv[1]); print(p.hostname or "127.0.0.1", p.port or 3306, u.unquote(p.username or "root"), u.unquote(p.password or ""))' "$RK_TEST_MYSQL_URL"
}
read -r my_host my_port my_user my_password <<<"$(my_parts)"
my() { MYSQL_PWD="${my_password:-}" mariadb --no-defaults -h"$my_host" -P"$my_port" -u"$my_user" "$@"; }
pg() { psql -X -q "${RK_TEST_POSTGRES_URL%/}/postgres" "$@"; }

# droppable NAME: whether a test database is this run's, or one of a run older than a day.
droppable() {
    [[ $1 == "rk_test_${RK_TEST_RUN}_"* ]] && return 0
    [[ $1 =~ ^rk_test_([0-9]{9,11})_[0-9a-f]{6}_[0-9a-f]{16}$ ]] &&
        ((BASH_REMATCH[1] < stale_before))
}

# Deletes Redis keys by a match pattern on the server side, SCAN by SCAN (a key name
# never passes through a shell). With a cutoff, only keys `rktest-<seconds>_...` of runs
# that started before it.
# shellcheck disable=SC2016  # Lua, not shell
REDIS_SWEEP='
local reply = redis.call("SCAN", ARGV[1], "MATCH", ARGV[2], "COUNT", 1000)
local dropped = 0
for _, key in ipairs(reply[2]) do
    local drop = true
    if ARGV[3] then
        local started = tonumber(string.match(key, "^rktest%-(%d+)_"))
        drop = started ~= nil and started < tonumber(ARGV[3])
    end
    if drop then
        redis.call("UNLINK", key)
        dropped = dropped + 1
    end
end
return {reply[1], dropped}'
redis_sweep() { # redis_sweep PATTERN [CUTOFF]: prints how many keys it deleted
    local cursor=0 total=0 reply
    while :; do
        mapfile -t reply < <(redis-cli -u "$RK_TEST_REDIS_URL" EVAL "$REDIS_SWEEP" 0 "$cursor" "$@")
        [[ ${#reply[@]} -eq 2 && ${reply[1]} =~ ^[0-9]+$ ]] || {
            echo "test: could not delete Redis keys $1: ${reply[*]}" >&2
            return 1
        }
        cursor=${reply[0]}
        total=$((total + reply[1]))
        [[ $cursor == 0 ]] && break
    done
    echo "$total"
}

cleanup_run() {
    local db pg_dbs=() my_dbs=() keys old_keys dir
    # One session a server for all the drops: a client process a database is slow.
    if command -v psql >/dev/null 2>&1; then
        for db in $(pg -Atc "SELECT datname FROM pg_database WHERE datname LIKE 'rk\_test\_%'" 2>/dev/null); do
            droppable "$db" && pg_dbs+=("$db")
        done
        if ((${#pg_dbs[@]})); then
            printf 'DROP DATABASE IF EXISTS "%s" WITH (FORCE);\n' "${pg_dbs[@]}" | pg >/dev/null ||
                echo "test: could not drop every PostgreSQL test database" >&2
        fi
    fi
    if command -v mariadb >/dev/null 2>&1; then
        for db in $(my -N -e "SHOW DATABASES LIKE 'rk\_test\_%'" 2>/dev/null); do
            droppable "$db" && my_dbs+=("$db")
        done
        if ((${#my_dbs[@]})); then
            # shellcheck disable=SC2016  # MariaDB's quotes, not a shell expansion
            printf 'DROP DATABASE IF EXISTS `%s`;\n' "${my_dbs[@]}" | my ||
                echo "test: could not drop every MariaDB test database" >&2
        fi
    fi
    keys="$(redis_sweep "rktest-${RK_TEST_RUN}-*" || echo '?')"
    old_keys="$(redis_sweep 'rktest-*' "$stale_before" || echo '?')"
    rm -rf "${sqlite_root:?}/$RK_TEST_RUN"
    for dir in "$sqlite_root"/*_*; do
        [[ -d $dir && ${dir##*/} =~ ^([0-9]{9,11})_ ]] && ((BASH_REMATCH[1] < stale_before)) &&
            rm -rf "$dir"
    done
    echo "test: removed run $RK_TEST_RUN's leftovers (and those of runs older than a day):" \
        "${#pg_dbs[@]} PostgreSQL and ${#my_dbs[@]} MariaDB databases, $keys + $old_keys Redis keys," \
        "$sqlite_root/$RK_TEST_RUN"
}

# ---------------------------------------------------------------- the summary, at exit
on_exit() {
    local status=$? entry name p f passed=0 failed=0
    trap - EXIT
    set +e
    step "cleanup"
    cleanup_run
    step "summary"
    for entry in "${counted[@]}"; do
        read -r name p f <<<"$entry"
        printf '  %-12s %6d passed %6d failed\n' "$name" "$p" "$f"
        passed=$((passed + p))
        failed=$((failed + f))
        # A stage that failed without a failed test (a build error, a crash) still failed.
        if [[ $name == "$stage" ]] && ((status != 0 && f == 0)); then
            failed=$((failed + 1))
            printf '  %-12s exited %d without a failed test: counted as 1 failed\n' "$name" "$status"
        fi
        [[ $name == "$stage" ]] && stage_counted=1
    done
    # A stage without tests (audit, fmt, clippy) that failed counts as one failed test.
    if [[ -n $stage && -z ${stage_counted:-} ]] && ((status != 0)); then
        failed=$((failed + 1))
        printf '  %-12s failed: counted as 1 failed\n' "$stage"
    fi
    rm -rf "$logs"
    ((status == 0)) || echo "test: FAILED (exit $status${stage:+, in stage $stage})"
    # One line, last, that a reader (or CI) takes as the run's count.
    echo "total: $passed passed, $failed failed"
    exit "$status"
}
trap on_exit EXIT

# ---------------------------------------------------------------- the stages
step "services (PostgreSQL, MariaDB, Redis)"
stage=services
scripts/services.sh
stage=""
echo "test: run $RK_TEST_RUN"

step "cargo audit: no dependency with a known vulnerability"
stage=audit
if ! cargo audit --version >/dev/null 2>&1; then
    echo "test: installing cargo-audit (cargo install cargo-audit --locked; a few minutes)"
    cargo install cargo-audit --locked
fi
# Against the online RustSec database, or an offline copy named by RK_AUDIT_DB (a clone or
# snapshot of github.com/rustsec/advisory-db), for machines without a route to GitHub.
if [[ -n ${RK_AUDIT_DB:-} ]]; then
    [[ -d $RK_AUDIT_DB/crates ]] || {
        echo "test: RK_AUDIT_DB=$RK_AUDIT_DB is not an advisory database (no crates/ in it)" >&2
        exit 1
    }
    if [[ -f $RK_AUDIT_DB/SNAPSHOT ]]; then
        echo "advisory database: $(head -n 1 "$RK_AUDIT_DB/SNAPSHOT")"
    elif git -C "$RK_AUDIT_DB" log -1 --format='%cs' >/dev/null 2>&1; then
        echo "advisory database: $RK_AUDIT_DB, last commit $(git -C "$RK_AUDIT_DB" log -1 --format='%cs')"
    fi
    cargo audit --db "$RK_AUDIT_DB" --no-fetch --stale
else
    echo "advisory database: the online RustSec database (fetched now)"
    audit_status=0
    cargo audit 2>&1 | tee "$logs/audit.log" || audit_status=$?
    if ((audit_status != 0)); then
        # cargo audit's own message does not say that an offline copy can be used.
        if grep -qi "fetch advisory database\|couldn't fetch\|failed to fetch" "$logs/audit.log"; then
            echo "test: cargo audit could not fetch the RustSec advisory database (no network?)." >&2
            echo "test: set RK_AUDIT_DB to a local copy of it (a clone or snapshot of" \
                "github.com/rustsec/advisory-db, with crates/ in it) and run again." >&2
        fi
        exit "$audit_status"
    fi
fi
stage=""

step "cargo fmt --all -- --check"
stage=fmt
cargo fmt --all -- --check
stage=""

# Clippy's build is a check build (metadata only, no code generated), kept apart from the
# test build below by cargo: it cannot be shared, and costs a fraction of a full build.
step "cargo clippy --all-targets -- -D warnings"
stage=clippy
cargo clippy --all-targets -- -D warnings
stage=""

# The one debug build of the server: `cargo test --all-targets` builds
# target/debug/ratekeeper too (the integration tests run it), with the features that the
# dev-dependencies add to shared crates (tokio's test-util, ...). A plain `cargo build`
# resolves features without them and rebuilds ~30 crates, so the fuzz and browser stages
# run this binary instead of building their own.
step "cargo test --all-targets $*"
run_stage cargo-test count_cargo cargo test --all-targets "$@"
bin="$(cd "${CARGO_TARGET_DIR:-target}" && pwd)/debug/ratekeeper"
[[ -x $bin ]] || {
    echo "test: no server binary at $bin after cargo test" >&2
    exit 1
}
export RK_FUZZ_BIN="$bin" RK_E2E_BIN="$bin" RK_ENVOY_BIN="$bin" RK_CLIENTS_BIN="$bin" RK_SOAK_BIN="$bin"
export RK_WEBHOOKS_BIN="$bin"

step "fuzz both APIs from their OpenAPI document (schemathesis): no 5xx"
run_stage fuzz count_fuzz scripts/fuzz.sh

step "Envoy's rate limit service asked by Envoy's own messages (envoy-data-plane): scripts/envoy_client.sh"
run_stage envoy count_envoy scripts/envoy_client.sh

step "webhooks from three instances, verified by the specification's library (standardwebhooks): scripts/webhooks.sh"
run_stage webhooks count_webhooks scripts/webhooks.sh

step "client libraries (clients/*): their checks, the conformance scenarios and the quick starts: scripts/clients.sh"
run_stage clients count_clients scripts/clients.sh

step "browser tests of the console (headless Chromium): scripts/e2e.sh"
run_stage e2e count_node scripts/e2e.sh

step "the soak, 3 minutes: faults under load, nothing over-admitted, lost or outside a failure mode: scripts/soak.sh"
run_stage soak count_soak scripts/soak.sh

step "all tests passed"
