#!/usr/bin/env bash
# Make sure the services the test suite talks to are installed and answering:
#   PostgreSQL  127.0.0.1:5432  user postgres, trust auth (no password)
#   MariaDB     127.0.0.1:3306  root with an empty password
#   Redis       127.0.0.1:6379  (redis-server must also be on PATH: tests start
#                                private instances of their own)
# plus curl. Idempotent: on a machine where everything is up it only reports.
# Installs from Debian's archive with apt-get when something is missing (needs root).
# Prints one line per service; exits non-zero with a message if one cannot be brought up.
#
# A server that already accepts the URLs the tests use (RK_TEST_POSTGRES_URL,
# RK_TEST_MYSQL_URL; the defaults above) is never changed. Only when the default local
# login is refused does it change the local server's configuration, saying what first:
# a `host all all 127.0.0.1/32 trust` line at the top of pg_hba.conf, or an empty
# password for MariaDB's root. With URLs of your own that do not work, it changes
# nothing and says so.
set -euo pipefail

# start-stop-daemon and friends live in sbin, which a non-login PATH may lack.
export PATH="$PATH:/usr/local/sbin:/usr/sbin:/sbin"
export DEBIAN_FRONTEND=noninteractive

WAIT_SECONDS="${RK_SERVICES_WAIT_SECONDS:-60}"
# Which services to bring up; scripts/run.sh asks for Redis alone.
RK_SERVICES="${RK_SERVICES:-postgresql mariadb redis}"
wanted() { [[ " $RK_SERVICES " == *" $1 "* ]]; }

say() { printf 'services: %s\n' "$*"; }
die() {
    printf 'services: ERROR: %s\n' "$*" >&2
    exit 1
}

# wait_until SECONDS CMD... : poll CMD every 0.5 s until it succeeds or time runs out.
wait_until() {
    local tries=$(($1 * 2)) i
    shift
    for ((i = 0; i < tries; i++)); do
        if "$@" >/dev/null 2>&1; then
            return 0
        fi
        sleep 0.5
    done
    return 1
}

show_log() { # show_log FILE... : last lines of the first log that exists, to stderr
    local f
    for f in "$@"; do
        if [[ -r $f ]]; then
            printf -- '--- last lines of %s ---\n' "$f" >&2
            tail -n 20 "$f" >&2 || true
            return 0
        fi
    done
}

# ---------------------------------------------------------------- checks
DEFAULT_PG_URL="postgres://postgres@127.0.0.1:5432"
DEFAULT_MY_URL="mysql://root@127.0.0.1:3306"
PG_URL="${RK_TEST_POSTGRES_URL:-$DEFAULT_PG_URL}"
MY_URL="${RK_TEST_MYSQL_URL:-$DEFAULT_MY_URL}"
PG_URL="${PG_URL%/}"
MY_URL="${MY_URL%/}"

pg_alive() { timeout 5 pg_isready -q -h 127.0.0.1 -p 5432 -t 3 >/dev/null 2>&1; }
pg_login() { # the tests' own login: RK_TEST_POSTGRES_URL, database postgres
    env -u PGPASSWORD PGPASSFILE=/dev/null PGCONNECT_TIMEOUT=3 \
        timeout 10 psql -X -w "$PG_URL/postgres" -Atqc 'select 1'
}
my_alive() { timeout 5 mysqladmin -h127.0.0.1 -P3306 -uroot --connect-timeout=3 ping >/dev/null 2>&1; }
my_login() { # the tests' own login: RK_TEST_MYSQL_URL, ignoring any ~/.my.cnf
    local parts
    parts="$(python3 -c 'import sys, urllib.parse as u; p = u.urlsplit(sys.argv[1]); print(p.hostname or "127.0.0.1", p.port or 3306, u.unquote(p.username or "root"), u.unquote(p.password or ""))' "$MY_URL")"
    read -r my_host my_port my_user my_password <<<"$parts"
    MYSQL_PWD="${my_password:-}" timeout 10 mariadb --no-defaults -h"$my_host" -P"$my_port" \
        -u"$my_user" --connect-timeout=3 -e 'select 1'
}
redis_alive() { [[ "$(timeout 5 redis-cli -h 127.0.0.1 -p 6379 ping 2>/dev/null)" == PONG ]]; }

have() { command -v "$1" >/dev/null 2>&1; }
pg_server_present() { compgen -G '/usr/lib/postgresql/*/bin/postgres' >/dev/null; }

# ---------------------------------------------------------------- install what is missing
pg_done=() my_done=() redis_done=() tools_done=()
missing=()
if wanted postgresql && { ! have pg_isready || ! have psql || ! have pg_ctlcluster || ! pg_server_present; }; then
    missing+=(postgresql)
    pg_done+=("installed")
fi
if wanted mariadb && { [[ ! -x /usr/sbin/mariadbd ]] || ! have mariadb || ! have mysqladmin; }; then
    missing+=(mariadb-server)
    my_done+=("installed")
fi
if ! have redis-server || ! have redis-cli; then
    missing+=(redis-server)
    redis_done+=("installed")
fi
if ! have curl; then
    missing+=(curl)
    tools_done+=("installed curl")
fi

if ((${#missing[@]})); then
    if [[ $(id -u) -ne 0 ]]; then
        die "missing packages (${missing[*]}) and not root: install them with apt-get as root"
    fi
    say "installing with apt-get: ${missing[*]}"
    apt-get -q update </dev/null || die "apt-get update failed"
    apt-get -q install -y "${missing[@]}" </dev/null || die "apt-get install ${missing[*]} failed"
    # Re-check, so a package that did not deliver what we need is reported clearly.
    if wanted postgresql && ! { have pg_isready && have psql && have pg_ctlcluster && pg_server_present; }; then
        die "postgresql: binaries still missing after apt-get install"
    fi
    if wanted mariadb && ! { [[ -x /usr/sbin/mariadbd ]] && have mariadb && have mysqladmin; }; then
        die "mariadb: binaries still missing after apt-get install"
    fi
    if ! { have redis-server && have redis-cli; }; then
        die "redis: binaries still missing after apt-get install"
    fi
    have curl || die "curl still missing after apt-get install"
fi

# ---------------------------------------------------------------- PostgreSQL
if wanted postgresql; then
# shellcheck disable=SC2012  # the cluster layout is Debian's: one version directory
pg_version="$(ls /etc/postgresql 2>/dev/null | head -n 1 || true)"
if ! pg_alive; then
    [[ -n $pg_version && -d /etc/postgresql/$pg_version/main ]] ||
        die "postgresql: no cluster under /etc/postgresql (expected <version>/main); create one with pg_createcluster"
    # shellcheck disable=SC2046,SC2012  # the documented start command, word splitting intended
    pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start ||
        say "postgresql: pg_ctlcluster start returned non-zero; waiting anyway"
    if ! wait_until "$WAIT_SECONDS" pg_alive; then
        show_log /var/log/postgresql/postgresql-"$pg_version"-main.log
        die "postgresql: not answering on 127.0.0.1:5432 after ${WAIT_SECONDS}s (pg_isready -h 127.0.0.1)"
    fi
    pg_done+=("started")
fi
if ! pg_login >/dev/null 2>&1; then
    [[ $PG_URL == "$DEFAULT_PG_URL" ]] ||
        die "postgresql: RK_TEST_POSTGRES_URL ($PG_URL) does not log in; nothing was changed: fix the URL or the server"
    hba="/etc/postgresql/$pg_version/main/pg_hba.conf"
    trust_line='host all all 127.0.0.1/32 trust'
    [[ -n $pg_version && -w $hba ]] ||
        die "postgresql: postgres cannot log in over TCP without a password, and $hba is not writable"
    say "postgresql: postgres cannot log in on 127.0.0.1 without a password, which the tests need;"
    say "postgresql: adding '$trust_line' as the first line of $hba and reloading"
    if [[ "$(head -n 1 "$hba")" != "$trust_line" ]]; then
        sed -i "1i $trust_line" "$hba"
    fi
    pg_ctlcluster --skip-systemctl-redirect "$pg_version" main reload ||
        die "postgresql: reload after editing $hba failed"
    wait_until 10 pg_login ||
        die "postgresql: psql -h 127.0.0.1 -U postgres still fails after adding '$trust_line' to $hba"
    pg_done+=("enabled trust auth for 127.0.0.1 in $hba")
fi
say "postgresql 127.0.0.1:5432: ${pg_done[*]:-already running}"
fi

# ---------------------------------------------------------------- MariaDB
if wanted mariadb; then
if ! my_alive; then
    # Debian's tmpfs /run loses the socket directory on reboot.
    if [[ ! -d /run/mysqld ]]; then
        install -d -o mysql -g mysql -m 0755 /run/mysqld
    fi
    # mariadbd refuses to run as root unless the config names a user; the start
    # command below has no --user, so make sure the config does.
    if have my_print_defaults && ! my_print_defaults mysqld | grep -q -- '^--user=' &&
        [[ -d /etc/mysql/mariadb.conf.d ]]; then
        printf '[mysqld]\nuser = mysql\n' >/etc/mysql/mariadb.conf.d/99-ratekeeper-user.cnf
        my_done+=("set user=mysql in /etc/mysql/mariadb.conf.d/99-ratekeeper-user.cnf")
    fi
    start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd ||
        say "mariadb: start-stop-daemon returned non-zero; waiting anyway"
    if ! wait_until "$WAIT_SECONDS" my_alive; then
        show_log /var/log/mysql/error.log
        die "mariadb: not answering on 127.0.0.1:3306 after ${WAIT_SECONDS}s (mysqladmin -h127.0.0.1 -uroot ping)"
    fi
    my_done+=("started")
fi
if ! my_login >/dev/null 2>&1; then
    [[ $MY_URL == "$DEFAULT_MY_URL" ]] ||
        die "mariadb: RK_TEST_MYSQL_URL ($MY_URL) does not log in; nothing was changed: fix the URL or the server"
    say "mariadb: root cannot log in on 127.0.0.1 with an empty password, which the tests need;"
    say "mariadb: setting an empty password for root@localhost and root@127.0.0.1 (over the unix socket)"
    # Fix through the unix socket, where OS root gets in by unix_socket auth.
    timeout 30 mariadb -uroot -e "
        ALTER USER 'root'@'localhost' IDENTIFIED VIA mysql_native_password USING PASSWORD('');
        CREATE USER IF NOT EXISTS 'root'@'127.0.0.1' IDENTIFIED VIA mysql_native_password USING PASSWORD('');
        ALTER USER 'root'@'127.0.0.1' IDENTIFIED VIA mysql_native_password USING PASSWORD('');
        GRANT ALL PRIVILEGES ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION;
        FLUSH PRIVILEGES;" </dev/null ||
        die "mariadb: root cannot log in over TCP with an empty password, and fixing it over the unix socket failed"
    my_login >/dev/null 2>&1 ||
        die "mariadb: root still cannot log in on 127.0.0.1:3306 with an empty password"
    my_done+=("set empty root password for root@localhost and root@127.0.0.1")
fi
say "mariadb 127.0.0.1:3306: ${my_done[*]:-already running}"
fi

# ---------------------------------------------------------------- Redis
if ! redis_alive; then
    redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no ||
        say "redis: redis-server returned non-zero; waiting anyway"
    wait_until "$WAIT_SECONDS" redis_alive ||
        die "redis: not answering PONG on 127.0.0.1:6379 after ${WAIT_SECONDS}s (redis-cli -h 127.0.0.1 ping)"
    redis_done+=("started")
fi
say "redis 127.0.0.1:6379: ${redis_done[*]:-already running} (redis-server at $(command -v redis-server))"

say "tools: ${tools_done[*]:-curl present} ($(command -v curl))"
