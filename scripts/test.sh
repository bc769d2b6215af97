#!/usr/bin/env bash
# Run the whole test suite: services, formatting, lints, then every test target.
#   scripts/test.sh                 # everything
#   scripts/test.sh some_filter     # extra arguments go to `cargo test --all-targets`
#   scripts/test.sh -- --nocapture
# RK_AUDIT_DB names an offline copy of the RustSec advisory database for `cargo audit`
# (by default it fetches the online one). No advisory is ignored.
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

step() { printf '\n==> %s\n' "$*"; }

step "services (PostgreSQL, MariaDB, Redis)"
scripts/services.sh

# Each test makes a database of its own (rk_test_<random>); drop those of earlier runs.
step "dropping test databases of earlier runs"
pg="${RK_TEST_POSTGRES_URL%/}/postgres"
for db in $(psql -X "$pg" -Atc "SELECT datname FROM pg_database WHERE datname LIKE 'rk\_test\_%'"); do
    psql -X -q "$pg" -c "DROP DATABASE IF EXISTS $db WITH (FORCE)"
done
read -r my_host my_port my_user my_password <<<"$(python3 -c 'import sys, urllib.parse as u; p = u.urlsplit(sys.argv[1]); print(p.hostname or "127.0.0.1", p.port or 3306, u.unquote(p.username or "root"), u.unquote(p.password or ""))' "$RK_TEST_MYSQL_URL")"
my() { MYSQL_PWD="${my_password:-}" mariadb --no-defaults -h"$my_host" -P"$my_port" -u"$my_user" "$@"; }
for db in $(my -N -e "SHOW DATABASES LIKE 'rk\_test\_%'"); do
    my -e "DROP DATABASE IF EXISTS $db"
done
rm -rf "${TMPDIR:-/tmp}/ratekeeper-tests"

step "cargo audit: no dependency with a known vulnerability"
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
    cargo audit
fi

step "cargo fmt --all -- --check"
cargo fmt --all -- --check

step "cargo clippy --all-targets -- -D warnings"
cargo clippy --all-targets -- -D warnings

step "cargo test --all-targets $*"
cargo test --all-targets "$@"

step "fuzz both APIs from their OpenAPI document (schemathesis): no 5xx"
scripts/fuzz.sh

step "browser tests of the console (headless Chromium): scripts/e2e.sh"
scripts/e2e.sh

step "all tests passed"
