//! The shared services a test uses: a new database of each SQL backend, the Redis URL
//! and key prefixes, and a Redis server of the test's own.
//!
//! Everything a test makes on the shared servers carries the run's id (`run_id`): the
//! databases `rk_test_<run>_<random>`, the Redis keys `rktest-<run>-...`, the SQLite files
//! and sockets under `<temp dir>/ratekeeper-tests/<run>/`. `scripts/test.sh` picks the id
//! (`RK_TEST_RUN`) and removes exactly that run's leftovers when it exits, pass or fail,
//! so that concurrent runs from two checkouts never drop each other's databases.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rand::Rng;
use ratekeeper::config::{KeyedExpiry, RedisState, Settings};
use secrecy::SecretString;
use sqlx::Connection;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Db {
    Sqlite,
    Postgres,
    MySql,
}

pub fn random_suffix() -> String {
    let n: u64 = rand::rng().random();
    format!("{n:016x}")
}

fn env_or(name: &str, default: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| default.to_owned())
}

pub fn redis_url() -> String {
    env_or("RK_TEST_REDIS_URL", "redis://127.0.0.1:6379")
}

/// This run's id, `<unix seconds>_<random hex>`: `RK_TEST_RUN` when set (by
/// `scripts/test.sh`), else one made for this process, so that a bare `cargo test` still
/// names what it makes apart from any other run's. The time in it lets a later run tell
/// a day-old leftover from a live run's databases without asking the servers.
pub fn run_id() -> &'static str {
    static RUN: OnceLock<String> = OnceLock::new();
    RUN.get_or_init(|| match std::env::var("RK_TEST_RUN") {
        Ok(run) => {
            // It ends up inside SQL identifiers and Redis match patterns: only these.
            assert!(
                !run.is_empty()
                    && run
                        .bytes()
                        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_'),
                "RK_TEST_RUN={run:?}: only a-z, 0-9 and _"
            );
            run
        }
        Err(_) => {
            let now = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap()
                .as_secs();
            let n: u32 = rand::rng().random();
            format!("{now}_{:06x}", n & 0xff_ffff)
        }
    })
}

/// A Redis key prefix of this run's, for one server or script: `rktest-<run>-<what>-<random>`.
pub fn test_prefix(what: &str) -> String {
    format!("rktest-{}-{what}-{}", run_id(), random_suffix())
}

/// A limiter on the test Redis under a prefix of its own (`what` names it), and a plain
/// connection beside it with the acquire functions loaded, for tests that play another
/// version's scripts beside this one's.
pub async fn limiter_beside_scripts(
    what: &str,
) -> (
    ratekeeper_limiter::Limiter,
    redis::aio::MultiplexedConnection,
) {
    let prefix = test_prefix(what);
    let limiter =
        ratekeeper_limiter::Limiter::new(&redis_url(), &prefix, Duration::from_secs(5)).unwrap();
    let client = redis::Client::open(redis_url()).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    ratekeeper_limiter::functions::LIBRARY
        .load_cmd()
        .query_async::<()>(&mut conn)
        .await
        .unwrap();
    (limiter, conn)
}

/// This run's temp dir (SQLite files, sockets, configs), made on first use.
pub fn test_dir() -> PathBuf {
    let dir = std::env::temp_dir().join("ratekeeper-tests").join(run_id());
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

/// A new dir of the test's own inside this run's temp dir.
pub fn fresh_dir(what: &str) -> PathBuf {
    let dir = test_dir().join(format!("{what}-{}", random_suffix()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

/// A new, empty database of the backend; its URL.
pub async fn fresh_database(db: Db) -> String {
    sqlx::any::install_default_drivers();
    let name = format!("rk_test_{}_{}", run_id(), random_suffix());
    match db {
        Db::Sqlite => format!("sqlite://{}/{name}.db", test_dir().display()),
        Db::Postgres => {
            let server = env_or("RK_TEST_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432");
            let mut conn = sqlx::AnyConnection::connect(&format!("{server}/postgres"))
                .await
                .expect("PostgreSQL must be running (scripts/services.sh starts it)");
            sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
                .execute(&mut conn)
                .await
                .expect("create database");
            format!("{server}/{name}")
        }
        Db::MySql => {
            let server = env_or("RK_TEST_MYSQL_URL", "mysql://root@127.0.0.1:3306");
            let mut conn = sqlx::AnyConnection::connect(&server)
                .await
                .expect("MariaDB must be running (scripts/services.sh starts it)");
            sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
                .execute(&mut conn)
                .await
                .expect("create database");
            format!("{server}/{name}")
        }
    }
}

pub fn settings(database_url: &str, redis_url: &str, prefix: &str) -> Settings {
    Settings {
        listen: "127.0.0.1:0".into(),
        // Off unless a test serves gRPC (`grpc_settings`).
        grpc_listen: None,
        database_url: SecretString::from(database_url.to_owned()),
        redis_url: SecretString::from(redis_url.to_owned()),
        redis_prefix: prefix.to_owned(),
        // Long by default so that tests decide when a reconcile pass runs.
        sync_interval_ms: 60_000,
        // Seconds: on a loaded 2-core machine a healthy Redis can take longer than a
        // tight timeout to answer, which would fail a test about something else. Tests
        // whose subject is a Redis outage set a short one themselves.
        redis_timeout_ms: 5_000,
        redis_state: RedisState::Packed,
        keyed_expiry: KeyedExpiry::Held,
        database_timeout_ms: 1000,
        workers: Some(1),
        console_concurrency: None,
        log_json: false,
        // The tests' receivers listen on loopback.
        webhook_allow_private: true,
        public_url: None,
        oidc_issuer: None,
        oidc_client_id: None,
        oidc_client_secret: None,
        oidc_admin_group: None,
        oidc_name: "single sign-on".into(),
        password_sign_in: true,
    }
}

/// A Redis server of the test's own, on a unix socket, killed when dropped: for tests
/// that flush it or stop it.
pub struct PrivateRedis {
    child: Child,
    pub socket: std::path::PathBuf,
}

impl PrivateRedis {
    pub async fn start() -> Self {
        let socket = test_dir().join(format!("redis-{}.sock", random_suffix()));
        let child = Command::new("redis-server")
            .args([
                "--port",
                "0",
                "--save",
                "",
                "--appendonly",
                "no",
                "--unixsocket",
            ])
            .arg(&socket)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server on PATH (scripts/services.sh installs it)");
        let me = Self { child, socket };
        // Wait for the socket to answer, bounded.
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Ok(client) = redis::Client::open(me.url())
                && let Ok(mut conn) = client.get_multiplexed_async_connection().await
                && redis::cmd("PING")
                    .query_async::<String>(&mut conn)
                    .await
                    .is_ok()
            {
                return me;
            }
            assert!(Instant::now() < deadline, "private redis did not start");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    pub fn url(&self) -> String {
        format!("redis+unix://{}", self.socket.display())
    }

    pub fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for PrivateRedis {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_file(&self.socket);
    }
}

/// How many connections to this database wait for a row lock now, as the server itself
/// reports it (never on SQLite, which has no such view: its writers wait for the one
/// write lock inside SQLite, unseen from outside).
async fn lock_waits(observer: &mut sqlx::AnyConnection, db: Db) -> i64 {
    let query = match db {
        Db::Postgres => {
            "SELECT COUNT(*) FROM pg_stat_activity \
             WHERE datname = current_database() AND wait_event_type = 'Lock'"
        }
        Db::MySql => {
            "SELECT COUNT(*) FROM information_schema.innodb_trx t \
             JOIN information_schema.processlist p ON p.id = t.trx_mysql_thread_id \
             WHERE t.trx_state = 'LOCK WAIT' AND p.db = DATABASE()"
        }
        Db::Sqlite => unreachable!("SQLite shows no lock waits"),
    };
    sqlx::query_scalar(sqlx::AssertSqlSafe(query))
        .fetch_one(observer)
        .await
        .unwrap()
}

/// Whether the server at `url` comes to report `count` connections waiting for a row
/// lock, polled for at most 10 s. Not more often than every 250 ms: InnoDB refreshes what
/// information_schema.innodb_trx shows only once it has not been read for 100 ms, so
/// faster polling would keep reading a stale view.
pub async fn lock_waits_reach(url: &str, db: Db, count: i64) -> bool {
    let mut observer = sqlx::AnyConnection::connect(url).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while lock_waits(&mut observer, db).await != count {
        if Instant::now() > deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    true
}
