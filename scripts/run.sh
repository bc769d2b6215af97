#!/usr/bin/env bash
# Run ratekeeper locally with its defaults: SQLite in ./ratekeeper.db, Redis on
# 127.0.0.1:6379 (installed and started here if missing), serving on 127.0.0.1:8080.
# Extra arguments go to ratekeeper (e.g. `scripts/run.sh migrate`).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

if ! command -v cargo >/dev/null 2>&1 && [[ -f "$HOME/.cargo/env" ]]; then
    # shellcheck disable=SC1091
    . "$HOME/.cargo/env"
fi

RK_SERVICES=redis scripts/services.sh
exec cargo run --release -- "$@"
