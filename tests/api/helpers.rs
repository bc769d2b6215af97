//! Test helpers: a fresh database per test on each SQL backend, a Redis key prefix per
//! test, the real server on port 0, and calls that read like the user story.

use std::process::{Child, Command, Stdio};
use std::str::FromStr;
use std::time::{Duration, Instant};

use rand::Rng;
use ratekeeper::auth::Actor;
use ratekeeper::config::Settings;
use ratekeeper::startup::{Application, Core};
use reqwest::{Response, StatusCode};
use secrecy::{ExposeSecret, SecretString};
use serde_json::{Value, json};
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

/// A new, empty database of the backend; its URL.
pub async fn fresh_database(db: Db) -> String {
    sqlx::any::install_default_drivers();
    let name = format!("rk_test_{}", random_suffix());
    match db {
        Db::Sqlite => {
            let dir = std::env::temp_dir().join("ratekeeper-tests");
            std::fs::create_dir_all(&dir).expect("temp dir");
            format!("sqlite://{}/{name}.db", dir.display())
        }
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
        database_url: SecretString::from(database_url.to_owned()),
        redis_url: SecretString::from(redis_url.to_owned()),
        redis_prefix: prefix.to_owned(),
        // Long by default so that tests decide when a reconcile pass runs.
        sync_interval_ms: 60_000,
        redis_timeout_ms: 500,
        workers: Some(1),
        log_json: false,
    }
}

pub struct TestApp {
    pub address: String,
    pub settings: Settings,
    /// The bootstrap admin's personal access token.
    pub admin_token: String,
    pub client: reqwest::Client,
    pub redis: redis::aio::MultiplexedConnection,
}

pub async fn spawn_app(db: Db) -> TestApp {
    let url = fresh_database(db).await;
    spawn_app_with(settings(
        &url,
        &redis_url(),
        &format!("rktest-{}", random_suffix()),
    ))
    .await
}

/// Starts the real server with these settings, on its own task.
pub async fn spawn_app_with(settings: Settings) -> TestApp {
    ratekeeper::telemetry::init_tracing(false);
    let app = Application::build(settings.clone())
        .await
        .expect("the application builds");
    let address = format!("http://127.0.0.1:{}", app.port());
    tokio::spawn(app.run_until(std::future::pending()));
    let core = Core::build(&settings).await.expect("core builds");
    // The bootstrap admin exists unless the database had users before this start.
    let has_admin = core
        .admin
        .create_user(
            &Actor::operator(),
            "admin",
            SecretString::from("a long password"),
            true,
        )
        .await;
    assert!(
        matches!(
            has_admin,
            Ok(_) | Err(ratekeeper::admin::AdminError::Conflict(_))
        ),
        "admin user: {has_admin:?}"
    );
    let token = core
        .admin
        .create_token(&Actor::operator(), "admin", "tests")
        .await
        .expect("token for the admin");
    let client = redis::Client::open(
        settings
            .redis_url
            .expose_secret()
            .split(',')
            .next()
            .unwrap(),
    )
    .unwrap();
    let redis = client.get_multiplexed_async_connection().await.unwrap();
    TestApp {
        address,
        settings,
        admin_token: token.expose_secret().to_owned(),
        client: reqwest::Client::new(),
        redis,
    }
}

impl TestApp {
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.address)
    }

    /// A second view of the same database and Redis: another instance's parts.
    pub async fn core(&self) -> Core {
        Core::build(&self.settings).await.expect("core builds")
    }

    pub fn policy_key(&self, name: &str) -> String {
        format!("{}:{{{name}}}", self.settings.redis_prefix)
    }

    pub async fn send(
        &self,
        method: &str,
        path: &str,
        token: &str,
        body: Option<Value>,
    ) -> Response {
        let method = reqwest::Method::from_str(method).unwrap();
        let mut req = self
            .client
            .request(method, self.url(path))
            .bearer_auth(token);
        if let Some(body) = body {
            req = req.json(&body);
        }
        req.send().await.expect("request sent")
    }

    pub async fn post(&self, path: &str, token: &str, body: Value) -> Response {
        self.send("POST", path, token, Some(body)).await
    }

    pub async fn get(&self, path: &str, token: &str) -> Response {
        self.send("GET", path, token, None).await
    }

    /// Creates an application as the admin; panics unless 201.
    pub async fn create_app(&self, slug: &str) -> Value {
        let r = self
            .post(
                "/api/v1/apps",
                &self.admin_token,
                json!({"slug": slug, "name": slug}),
            )
            .await;
        expect_status(r, StatusCode::CREATED).await
    }

    /// A new API key of the application, made by the admin.
    pub async fn create_key(&self, slug: &str) -> String {
        let r = self
            .post(
                &format!("/api/v1/apps/{slug}/keys"),
                &self.admin_token,
                json!({"label": "test"}),
            )
            .await;
        let body = expect_status(r, StatusCode::CREATED).await;
        body["key"].as_str().unwrap().to_owned()
    }

    pub async fn create_policy(&self, policy: Value) -> Value {
        let r = self
            .post("/api/v1/policies", &self.admin_token, policy)
            .await;
        expect_status(r, StatusCode::CREATED).await
    }

    /// A user with a personal access token; `role` in `app` when given.
    pub async fn create_user(&self, name: &str, membership: Option<(&str, &str)>) -> String {
        let core = self.core().await;
        core.admin
            .create_user(
                &Actor::operator(),
                name,
                SecretString::from("a long password"),
                false,
            )
            .await
            .expect("user created");
        if let Some((app, role)) = membership {
            let r = self
                .send(
                    "PUT",
                    &format!("/api/v1/apps/{app}/members/{name}"),
                    &self.admin_token,
                    Some(json!({"role": role})),
                )
                .await;
            expect_status(r, StatusCode::OK).await;
        }
        core.admin
            .create_token(&Actor::operator(), name, "tests")
            .await
            .unwrap()
            .expose_secret()
            .to_owned()
    }

    pub async fn acquire(&self, key: &str, resource: &str, permits: i64) -> Response {
        self.post(
            "/v1/acquire",
            key,
            json!({"resource": resource, "permits": permits}),
        )
        .await
    }

    /// An app "shop" with a key, and a token-bucket policy on it.
    pub async fn shop_with_policy(&self, name: &str, rate: f64, max_permits: i64) -> String {
        self.create_app("shop").await;
        let key = self.create_key("shop").await;
        self.create_policy(json!({
            "name": name, "owner_app": "shop", "rate": rate, "max_permits": max_permits
        }))
        .await;
        key
    }

    pub async fn redis_field(&self, key: &str, field: &str) -> Option<String> {
        let mut conn = self.redis.clone();
        redis::cmd("HGET")
            .arg(key)
            .arg(field)
            .query_async(&mut conn)
            .await
            .unwrap()
    }

    pub async fn redis_exists(&self, key: &str) -> bool {
        let mut conn = self.redis.clone();
        redis::cmd("EXISTS")
            .arg(key)
            .query_async::<i64>(&mut conn)
            .await
            .unwrap()
            == 1
    }

    /// Audit events as the admin sees them, newest first.
    pub async fn audit(&self, query: &str) -> Vec<Value> {
        let r = self
            .get(&format!("/api/v1/audit{query}"), &self.admin_token)
            .await;
        expect_status(r, StatusCode::OK)
            .await
            .as_array()
            .unwrap()
            .clone()
    }
}

/// The JSON body, after checking the status (printing the body when it is wrong).
pub async fn expect_status(response: Response, status: StatusCode) -> Value {
    let actual = response.status();
    let text = response.text().await.unwrap();
    assert_eq!(actual, status, "unexpected status; body: {text}");
    if text.is_empty() {
        Value::Null
    } else {
        serde_json::from_str(&text).unwrap_or(Value::String(text))
    }
}

/// A problem+json error: checks status, content type, and returns the body.
pub async fn expect_problem(response: Response, status: StatusCode) -> Value {
    let ct = response
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_owned());
    let body = expect_status(response, status).await;
    assert_eq!(ct.as_deref(), Some("application/problem+json"));
    assert!(
        body["type"]
            .as_str()
            .unwrap()
            .starts_with("urn:ratekeeper:problem:")
    );
    body
}

/// A Redis server of the test's own, on a unix socket, killed when dropped: for tests
/// that flush it or stop it.
pub struct PrivateRedis {
    child: Child,
    pub socket: std::path::PathBuf,
}

impl PrivateRedis {
    pub async fn start() -> Self {
        let dir = std::env::temp_dir().join("ratekeeper-tests");
        std::fs::create_dir_all(&dir).unwrap();
        let socket = dir.join(format!("redis-{}.sock", random_suffix()));
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

/// Polls `check` until it holds, for at most `limit`: waiting for an outcome that
/// another task brings about (a reconcile pass), never for a fixed time.
pub async fn eventually<F, Fut>(limit: Duration, mut check: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if check().await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    false
}

/// Runs one test body against every SQL backend, as separate tests.
#[macro_export]
macro_rules! on_every_backend {
    ($name:ident, $body:path) => {
        mod $name {
            use super::*;
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite() {
                $body($crate::helpers::Db::Sqlite).await
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn postgres() {
                $body($crate::helpers::Db::Postgres).await
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn mysql() {
                $body($crate::helpers::Db::MySql).await
            }
        }
    };
}
