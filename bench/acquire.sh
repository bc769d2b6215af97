#!/usr/bin/env bash
# bench/acquire.sh: build the release binaries (unless BENCH_SKIP_BUILD=1), then run the
# acquire-path benchmark, bench/src/ (the `bench` binary of the package ratekeeper-bench).
# Its knobs are BENCH_* environment variables; bench/README.md says what it measures, how,
# and where the results go.
set -euo pipefail
ROOT=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd)
cd -- "$ROOT"
if [[ ${BENCH_SKIP_BUILD:-0} != 1 ]]; then
    echo "[bench] cargo build --release (a clean build takes minutes on 2 cores)" >&2
    cargo build --release -p ratekeeper --bin ratekeeper --example top_keys_memory \
        --example bare_acquire --example script_cost -p ratekeeper-bench --bin bench
fi
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
[[ -x $TARGET/release/bench ]] || { echo "[bench] no $TARGET/release/bench: build it first" >&2; exit 1; }
exec "$TARGET/release/bench" "$@"
