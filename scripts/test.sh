#!/usr/bin/env bash
# Run the whole test suite: services, formatting, lints, then every test target.
#   scripts/test.sh                 # everything
#   scripts/test.sh some_filter     # extra arguments go to `cargo test --all-targets`
#   scripts/test.sh -- --nocapture
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
for db in $(psql -X -h 127.0.0.1 -U postgres -d postgres -Atc \
    "SELECT datname FROM pg_database WHERE datname LIKE 'rk\_test\_%'"); do
    psql -X -q -h 127.0.0.1 -U postgres -d postgres -c "DROP DATABASE IF EXISTS $db WITH (FORCE)"
done
for db in $(mariadb --no-defaults -h127.0.0.1 -uroot -N -e "SHOW DATABASES LIKE 'rk\_test\_%'"); do
    mariadb --no-defaults -h127.0.0.1 -uroot -e "DROP DATABASE IF EXISTS $db"
done
rm -rf "${TMPDIR:-/tmp}/ratekeeper-tests"

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
