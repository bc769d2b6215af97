#!/usr/bin/env bash
# Fuzz both APIs from their own OpenAPI document (/api/openapi.json) with schemathesis, and
# fail if any answer breaks the document's promises:
#   - no input produces a 5xx (a crash or an unhandled error);
#   - every status code is one the operation documents;
#   - every body has a content type documented for its status (errors are
#     application/problem+json) and matches the documented schema.
# The admin API is fuzzed with an admin's personal access token; the client API
# (/v1/acquire, /v1/release) with an application's API key, on a token-bucket policy and on a
# concurrency policy whose leases release gives back.
# All of it runs twice, on SQLite (a temp dir) and on PostgreSQL (a fresh database, dropped
# at exit), against the same debug build, each time with a ratekeeper of its own on a free
# loopback port and a Redis key prefix of its own.
#   scripts/fuzz.sh                  # at most RK_FUZZ_EXAMPLES (30) generated cases an operation
#   RK_FUZZ_POSTGRES_URL=postgres://user@host:5432 scripts/fuzz.sh  # another PostgreSQL server
#   RK_FUZZ_BIN=path/to/ratekeeper scripts/fuzz.sh  # a server binary already built (test.sh)
# Per backend it prints each operation's generated requests and how many the server
# accepted (2xx) (scripts/fuzz_accepted.py, from schemathesis's HAR report).
# Its last line counts the generated cases: `fuzz: generated cases: N passed, N failed`.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
EXAMPLES="${RK_FUZZ_EXAMPLES:-30}"
POSTGRES_URL="${RK_FUZZ_POSTGRES_URL:-${RK_TEST_POSTGRES_URL:-postgres://postgres@127.0.0.1:5432}}"
POSTGRES_URL="${POSTGRES_URL%/}"
CHECKS=not_a_server_error,status_code_conformance,content_type_conformance
CHECKS+=,response_schema_conformance
# The fuzz dictionaries below (real names mixed into generated requests) reach body fields
# behind a $ref, as all of ours are, since schemathesis 4.24.2.
SCHEMATHESIS_REQ='schemathesis>=4.25,<5'
# schemathesis lives in a virtual environment of the project's (under target/, ignored by
# git): never in the system's Python, which Debian refuses to change (PEP 668).
VENV="${RK_FUZZ_VENV:-target/fuzz-venv}"
if [[ ! -x $VENV/bin/python ]]; then
    echo "fuzz: making a Python virtual environment in $VENV"
    if ! python3 -m venv "$VENV" </dev/null; then
        if [[ $(id -u) -ne 0 ]] || ! command -v apt-get >/dev/null; then
            echo "fuzz: python3 -m venv failed; install python3-venv" >&2
            exit 1
        fi
        echo "fuzz: installing python3-venv with apt-get (Debian's python3 lacks venv without it)"
        DEBIAN_FRONTEND=noninteractive apt-get -q install -y python3-venv </dev/null
        rm -rf "$VENV"
        python3 -m venv "$VENV" </dev/null
    fi
fi
schemathesis() { "$VENV/bin/schemathesis" "$@"; }
st_version="$(schemathesis --version 2>/dev/null || true)"
if ! [[ $st_version =~ version\ 4\.([0-9]+) ]] || ((BASH_REMATCH[1] < 25)); then
    echo "fuzz: installing $SCHEMATHESIS_REQ from PyPI into $VENV"
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "$SCHEMATHESIS_REQ" </dev/null
fi
# The server: the binary `cargo test --all-targets` builds (scripts/test.sh passes it in
# RK_FUZZ_BIN). Built here with that same command, not `cargo build`: a plain build
# resolves features without the dev-dependencies' and would rebuild ~30 crates into
# another binary than the one the tests ran.
if [[ -n ${RK_FUZZ_BIN:-} ]]; then
    BIN="$RK_FUZZ_BIN"
else
    if ! command -v cargo >/dev/null 2>&1 && [[ -f "$HOME/.cargo/env" ]]; then
        # shellcheck disable=SC1091
        . "$HOME/.cargo/env"
    fi
    echo "fuzz: cargo test --all-targets --no-run (the tests' build of the server)"
    cargo test --all-targets --no-run --quiet
    BIN="$(cd "${CARGO_TARGET_DIR:-target}" && pwd)/debug/ratekeeper"
fi
[[ -x $BIN ]] || {
    echo "fuzz: no server binary at $BIN" >&2
    exit 1
}

tmp="$(mktemp -d)"
# Names this run's database and Redis keys, so that concurrent runs never share them.
run_id="$(python3 -c 'import secrets; print(secrets.token_hex(4))')"
server_pid=""
pg_db=""
stop_server() {
    if [[ -n $server_pid ]]; then
        kill "$server_pid" 2>/dev/null || true
        wait "$server_pid" 2>/dev/null || true
        server_pid=""
    fi
}
cleanup() {
    stop_server
    # The servers' Redis keys (policies, leases, counters), by their prefix.
    if command -v redis-cli >/dev/null 2>&1; then
        redis-cli -u "${RATEKEEPER_REDIS_URL:-redis://127.0.0.1:6379}" --scan \
            --pattern "fuzz-$run_id-*" 2>/dev/null |
            xargs -r redis-cli -u "${RATEKEEPER_REDIS_URL:-redis://127.0.0.1:6379}" DEL \
                >/dev/null 2>&1 || true
    fi
    if [[ -n $pg_db ]]; then
        psql -X -q "$POSTGRES_URL/postgres" -c "DROP DATABASE IF EXISTS $pg_db WITH (FORCE)" ||
            echo "fuzz: could not drop database $pg_db" >&2
    fi
    rm -rf "$tmp"
}
trap cleanup EXIT

json_field() { # json_field FIELD < JSON
    python3 -c 'import json,sys; print(json.load(sys.stdin)[sys.argv[1]])' "$1"
}

# Generated cases of every schemathesis run, passed and failed, from its summary's
# "Test cases:" line ("N generated, N passed" or "N generated, N found N unique failures,
# N errored, N skipped"); a skipped case (no check ran) counts as neither.
cases_passed=0
cases_failed=0
count_cases() { # count_cases LOG
    local counts p f
    counts="$(awk '
        seen { for (i = 1; i < NF; i++) {
                   w = $(i + 1); sub(/,$/, "", w)
                   if (w == "generated") g = $i
                   else if (w == "found") f += $i
                   else if (w == "errored") f += $i
                   else if (w == "skipped") s = $i
               }
               seen = 0 }
        /^Test cases:/ { seen = 1 }
        END { print g - f - s, f + 0 }' "$1")"
    read -r p f <<<"$counts"
    cases_passed=$((cases_passed + p))
    cases_failed=$((cases_failed + f))
}

schemathesis_run() { # schemathesis_run API DIR BEARER_TOKEN SCHEMATHESIS_ARGS...
    local api=$1 dir=$2 bearer=$3 status=0 log
    shift 3
    log="$(mktemp -p "$dir")"
    # Every request and its answer, for the accepted cases per operation (below).
    schemathesis --config-file "$dir/schemathesis.toml" run "$api/api/openapi.json" \
        -H "Authorization: Bearer $bearer" --checks "$CHECKS" --max-examples "$EXAMPLES" \
        --report har --report-har-path "$log.har" \
        --no-color "$@" 2>&1 | tee "$log" || status=$?
    count_cases "$log"
    return "$status"
}

# fuzz BACKEND DATABASE_URL: a server on DATABASE_URL, fuzzed until done; stopped after.
fuzz() {
    local backend=$1 database_url=$2
    local dir="$tmp/$backend"
    mkdir -p "$dir"
    local port
    port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
    local api="http://127.0.0.1:$port"
    export RATEKEEPER_LISTEN="127.0.0.1:$port"
    export RATEKEEPER_DATABASE_URL="$database_url"
    export RATEKEEPER_REDIS_PREFIX="fuzz-$run_id-$backend"
    export RUST_LOG="${RUST_LOG:-warn}"

    echo "fuzz: $backend"
    "$BIN" migrate
    printf 'fuzz-password-1\n' | "$BIN" user create fuzzer --admin
    local token
    token="$("$BIN" token create fuzzer)"
    "$BIN" serve >"$dir/server.log" 2>&1 &
    server_pid=$!
    for _ in $(seq 1 100); do
        curl -fsS "$api/healthz" >/dev/null 2>&1 && break
        sleep 0.1
    done
    curl -fsS "$api/healthz" >/dev/null || {
        cat "$dir/server.log"
        echo "fuzz: server did not start ($backend)" >&2
        exit 1
    }

    local auth=(-H "Authorization: Bearer $token")
    curl -fsS -X POST "$api/api/v1/apps" "${auth[@]}" -d '{"slug":"shop","name":"Shop"}' >/dev/null
    local key
    key="$(curl -fsS -X POST "$api/api/v1/apps/shop/keys" "${auth[@]}" -d '{"label":"fuzz"}' |
        json_field key)"
    curl -fsS -X POST "$api/api/v1/policies" "${auth[@]}" \
        -d '{"name":"orders.create","owner_app":"shop","rate":5,"max_permits":10}' >/dev/null
    curl -fsS -X POST "$api/api/v1/policies" "${auth[@]}" -d '{"name":"jobs.run","owner_app":"shop",
        "algorithm":"concurrency","max_permits":3,"lease_ttl_ms":30000}' >/dev/null
    # Keyed policies, with an override each: acquires, state and resets per caller.
    curl -fsS -X POST "$api/api/v1/policies" "${auth[@]}" -d '{"name":"users.login","owner_app":"shop",
        "scope":"per_key","rate":1,"max_permits":5,"overrides":[{"match":"user-1","max_permits":9}]}' >/dev/null
    curl -fsS -X POST "$api/api/v1/policies" "${auth[@]}" -d '{"name":"tenants.search","owner_app":"shop",
        "scope":"per_app","rate":10,"max_permits":20,"overrides":[{"match":"shop","rate":20}]}' >/dev/null
    # Leases really held, for release to give back (new policies reach the acquire path
    # with the next snapshot: wait for it).
    local leases=() lease
    for _ in $(seq 1 3); do
        for _ in $(seq 1 50); do
            lease="$(curl -sS -X POST "$api/v1/acquire" -H "Authorization: Bearer $key" \
                -d '{"resource":"jobs.run"}' | python3 -c \
                'import json,sys; print(json.load(sys.stdin).get("lease_id") or "")' || true)"
            [[ -n $lease ]] && break
            sleep 0.1
        done
        [[ -n $lease ]] || {
            echo "fuzz: could not acquire a lease on jobs.run ($backend)" >&2
            exit 1
        }
        leases+=("\"$lease\"")
    done

    # Real names, mixed into the generated requests so that a good share of them get past
    # "no such application/policy/lease" to the code behind it. The client API's leases
    # are the ones just acquired: releasing them is the only way to see a 200 there.
    local lease_list
    lease_list="$(
        IFS=,
        echo "${leases[*]}"
    )"
    cat >"$dir/schemathesis.toml" <<EOF
[dictionaries.apps]
values = ["shop"]

[dictionaries.users]
values = ["fuzzer"]

[dictionaries.policies]
values = ["orders.create", "jobs.run", "users.login", "tenants.search"]

[dictionaries.keys]
values = ["user-1", "user-2", "shop"]

[dictionaries.scopes]
values = ["global", "per_app", "per_key"]

[dictionaries.leases]
values = [$lease_list]

[dictionaries.algorithms]
values = ["token_bucket", "fixed_window", "sliding_log", "sliding_window", "concurrency", "gcra"]

[dictionaries.failure_modes]
values = ["closed", "open"]

[dictionaries.roles]
values = ["owner", "viewer"]

[dictionaries.versions]
values = [1, 2]

[parameters]
"path.slug" = { dictionary = "apps", probability = 0.5 }
"query.app" = { dictionary = "apps", probability = 0.5 }
"path.username" = { dictionary = "users", probability = 0.5 }
"path.name" = { dictionary = "policies", probability = 0.5 }
"body.owner_app" = { dictionary = "apps", probability = 0.5 }
"body.algorithm" = { dictionary = "algorithms", probability = 0.5 }
"body.failure_mode" = { dictionary = "failure_modes", probability = 0.5 }
"body.role" = { dictionary = "roles", probability = 0.5 }
"body.scope" = { dictionary = "scopes", probability = 0.5 }
"body.key" = { dictionary = "keys", probability = 0.5 }
"query.key" = { dictionary = "keys", probability = 0.5 }
"body.resource" = { dictionary = "policies", probability = 0.8 }
"body.lease_id" = { dictionary = "leases", probability = 0.8 }
"body.version" = { dictionary = "versions", probability = 0.5 }
"body.to_version" = { dictionary = "versions", probability = 0.5 }
EOF

    # The client API first: the admin API's fuzzing may revoke the key and change or
    # delete the policies.
    echo "fuzz: $backend: client API (API key)"
    schemathesis_run "$api" "$dir" "$key" --include-path-regex '^/v1/' ||
        failed+=("$backend: client API")
    echo "fuzz: $backend: admin API (access token)"
    schemathesis_run "$api" "$dir" "$token" --exclude-path-regex '^/v1/' ||
        failed+=("$backend: admin API")

    # What the fuzzing reached: a request refused by validation (4xx) tests little behind
    # it, so the case counts above say less than the accepted ones.
    curl -fsS "$api/api/openapi.json" >"$dir/openapi.json"
    echo "fuzz: $backend: generated requests per operation, and how many were accepted"
    python3 scripts/fuzz_accepted.py "$dir/openapi.json" "$dir"/*.har
    stop_server
    if grep -q 'panicked' "$dir/server.log"; then
        cat "$dir/server.log"
        failed+=("$backend: the server panicked")
    fi
}

failed=()
fuzz sqlite "sqlite://$tmp/fuzz.db"

pg_db="rk_fuzz_$run_id"
psql -X -q "$POSTGRES_URL/postgres" -c "CREATE DATABASE $pg_db"
fuzz postgres "$POSTGRES_URL/$pg_db"

if ((${#failed[@]})); then
    printf 'fuzz: FAILED: %s\n' "${failed[@]}" >&2
    # A failure that no case counts (a server panic) still fails one.
    ((cases_failed > 0)) || cases_failed=1
    echo "fuzz: generated cases: $cases_passed passed, $cases_failed failed"
    exit 1
fi
echo "fuzz: every answer as documented, no 5xx (SQLite and PostgreSQL)"
echo "fuzz: generated cases: $cases_passed passed, $cases_failed failed"
