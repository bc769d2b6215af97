//! The real server on port 0 (`spawn_app`, `TestApp`) and the JSON API calls the tests
//! make through it, with the checks of a reply's status and problem body.

use std::str::FromStr;

use ratekeeper::auth::Actor;
use ratekeeper::config::Settings;
use ratekeeper::control::TokenInput;
use ratekeeper::startup::{Application, Core};
use reqwest::{Response, StatusCode};
use secrecy::{ExposeSecret, SecretString};
use serde_json::{Value, json};

use super::services::{Db, fresh_database, redis_url, settings, test_prefix};

pub struct TestApp {
    pub address: String,
    /// `http://127.0.0.1:<port>` of Envoy's rate limit service, when the settings serve it.
    pub grpc_address: Option<String>,
    pub settings: Settings,
    /// The bootstrap admin's personal access token.
    pub admin_token: String,
    pub client: reqwest::Client,
    /// The test's own connection to the server's Redis (made at first use: a test may
    /// start the server while Redis is down).
    pub redis: redis::aio::ConnectionManager,
}

pub async fn spawn_app(db: Db) -> TestApp {
    let url = fresh_database(db).await;
    spawn_app_with(settings(&url, &redis_url(), &test_prefix("app"))).await
}

/// Starts the real server with these settings, on its own task.
pub async fn spawn_app_with(settings: Settings) -> TestApp {
    spawn_app_until(settings, std::future::pending()).await.0
}

/// Starts the real server with these settings until `stop` resolves; the handle ends
/// when the server has stopped gracefully (both servers drained, the tasks stopped).
pub async fn spawn_app_until(
    settings: Settings,
    stop: impl Future<Output = ()> + Send + 'static,
) -> (TestApp, tokio::task::JoinHandle<anyhow::Result<()>>) {
    ratekeeper::telemetry::init_tracing(false);
    // reqwest is built with `rustls-no-provider` (Cargo.toml): the process names the
    // crypto provider, as the CLI does, before the first client (the tests' and their
    // browsers') is built. The first installation stays.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let app = Application::build(settings.clone())
        .await
        .expect("the application builds");
    let address = format!("http://127.0.0.1:{}", app.port());
    let grpc_address = app
        .grpc_port()
        .map(|port| format!("http://127.0.0.1:{port}"));
    let running = tokio::spawn(app.run_until(stop));
    let core = Core::build(&settings).await.expect("core builds");
    // The bootstrap admin exists unless the database had users before this start.
    let has_admin = core
        .control
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
            Ok(_) | Err(ratekeeper::control::ControlError::Conflict(_))
        ),
        "admin user: {has_admin:?}"
    );
    let token = core
        .control
        .create_token(&Actor::operator(), "admin", &tests_token())
        .await
        .expect("token for the admin");
    let url = settings.redis_url.expose_secret();
    // Behind Sentinel the master moves: a test there reads Redis through its
    // `LocalSentinel`, and this connection (made lazily) goes nowhere.
    let direct = if url.starts_with("redis+sentinel://") {
        "redis://127.0.0.1:1"
    } else {
        url.split(',').next().unwrap()
    };
    let client = redis::Client::open(direct).unwrap();
    let redis = redis::aio::ConnectionManager::new_lazy_with_config(
        client,
        redis::aio::ConnectionManagerConfig::new(),
    )
    .unwrap();
    let app = TestApp {
        address,
        grpc_address,
        settings,
        admin_token: token.expose_secret().to_owned(),
        client: reqwest::Client::new(),
        redis,
    };
    (app, running)
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

    /// Changes a policy's fields as the admin (`PATCH`); panics unless 200.
    pub async fn edit_policy(&self, name: &str, changes: Value) -> Value {
        let path = format!("/api/v1/policies/{name}");
        let r = self
            .send("PATCH", &path, &self.admin_token, Some(changes))
            .await;
        expect_status(r, StatusCode::OK).await
    }

    /// A user with a personal access token; `role` in `app` when given.
    pub async fn create_user(&self, name: &str, membership: Option<(&str, &str)>) -> String {
        let core = self.core().await;
        core.control
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
        self.token_for(name, &tests_token()).await
    }

    /// A new personal access token of the user `name`, as `input` asks.
    pub async fn token_for(&self, name: &str, input: &TokenInput) -> String {
        self.core()
            .await
            .control
            .create_token(&Actor::operator(), name, input)
            .await
            .unwrap()
            .expose_secret()
            .to_owned()
    }

    /// The policy file `GET /api/v1/export{query}` writes, as the admin.
    pub async fn export_as_admin(&self, query: &str) -> String {
        self.get(&format!("/api/v1/export{query}"), &self.admin_token)
            .await
            .text()
            .await
            .expect("an export")
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

    /// A global token bucket's state as the server writes it: tokens and the ms of its
    /// last write, from its state key (`<hash>:tb`, two little-endian doubles ahead of the
    /// configuration's id); `None` before a grant wrote it.
    pub async fn token_bucket_state(&self, name: &str) -> Option<(f64, f64)> {
        let mut conn = self.redis.clone();
        let raw: Vec<u8> = redis::cmd("GET")
            .arg(format!("{}:tb", self.policy_key(name)))
            .query_async(&mut conn)
            .await
            .unwrap();
        let double = |at: usize| f64::from_le_bytes(raw[at..at + 8].try_into().unwrap());
        (raw.len() > 16).then(|| (double(0), double(8)))
    }

    /// Sets a global token bucket's tokens behind the server's back, keeping the rest.
    pub async fn set_token_bucket_tokens(&self, name: &str, tokens: f64) {
        let key = format!("{}:tb", self.policy_key(name));
        let mut conn = self.redis.clone();
        let mut raw: Vec<u8> = redis::cmd("GET")
            .arg(&key)
            .query_async(&mut conn)
            .await
            .unwrap();
        assert!(raw.len() > 16, "no state written yet");
        raw[..8].copy_from_slice(&tokens.to_le_bytes());
        redis::cmd("SET")
            .arg(&key)
            .arg(raw)
            .query_async::<()>(&mut conn)
            .await
            .unwrap();
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

    /// The server's metrics as Prometheus text.
    pub async fn metrics_text(&self) -> String {
        self.client
            .get(self.url("/metrics"))
            .send()
            .await
            .expect("request sent")
            .text()
            .await
            .unwrap()
    }

    /// The value of one sample of the server's metrics, named with its labels as the
    /// Prometheus text writes it (`name{label="value"}`).
    pub async fn metric(&self, sample: &str) -> Option<f64> {
        let text = self.metrics_text().await;
        text.lines()
            .find_map(|line| line.strip_prefix(sample)?.strip_prefix(' '))
            .map(|value| value.trim().parse().expect("a number"))
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

/// The terms of the tokens the tests act with: labelled, never expiring, not read-only.
fn tests_token() -> TokenInput {
    TokenInput {
        label: Some("tests".to_owned()),
        ..TokenInput::default()
    }
}
