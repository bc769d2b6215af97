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
        core.control
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

// ---------------------------------------------------------------------------------------
// The web console, as a browser uses it
// ---------------------------------------------------------------------------------------

/// The password `create_user` (and the bootstrap admin) are given.
pub const PASSWORD: &str = "a long password";

/// One answer of the console, as the browser received it (redirects are not followed).
pub struct Page {
    pub status: StatusCode,
    pub headers: reqwest::header::HeaderMap,
    pub body: String,
}

impl Page {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(|v| v.to_str().unwrap())
    }

    pub fn location(&self) -> Option<&str> {
        self.header("location")
    }

    /// Asserts a `303 See Other` to `location`.
    #[track_caller]
    pub fn assert_redirect(&self, location: &str) {
        assert_eq!(
            (self.status, self.location()),
            (StatusCode::SEE_OTHER, Some(location)),
            "expected a redirect to {location}; body: {}",
            self.body
        );
    }

    /// Asserts the status, showing the body when it is wrong.
    #[track_caller]
    pub fn assert_status(&self, status: StatusCode) -> &Self {
        assert_eq!(
            self.status, status,
            "unexpected status; body: {}",
            self.body
        );
        self
    }

    pub fn has(&self, needle: &str) -> bool {
        self.body.contains(needle)
    }

    /// The whole `Set-Cookie` header that sets cookie `name`.
    pub fn set_cookie(&self, name: &str) -> Option<String> {
        self.headers
            .get_all("set-cookie")
            .iter()
            .map(|v| v.to_str().unwrap().to_owned())
            .find(|c| c.split('=').next() == Some(name))
    }

    /// The text of the first element with `role="alert"`.
    pub fn alert(&self) -> Option<String> {
        let at = self.body.find("role=\"alert\"")?;
        let rest = &self.body[at..];
        let start = rest.find('>')? + 1;
        let end = rest[start..].find("</")? + start;
        Some(html_unescape(&rest[start..end]))
    }

    /// The fields the form posting to `action` sends as it stands, as a browser sends
    /// them: text inputs and textareas with their values, checked checkboxes, the selected
    /// (or else the first) option of each select.
    #[track_caller]
    pub fn form(&self, action: &str) -> Vec<(String, String)> {
        let html = form_html(&self.body, action)
            .unwrap_or_else(|| panic!("no form posting to {action}; body: {}", self.body));
        form_fields(html)
    }

    /// The value the form posting to `action` sends for `field`.
    #[track_caller]
    pub fn field(&self, action: &str, field: &str) -> Option<String> {
        self.form(action)
            .into_iter()
            .find(|(name, _)| name == field)
            .map(|(_, value)| value)
    }

    /// The opening tags of every `<form>` of the page.
    pub fn form_tags(&self) -> Vec<String> {
        self.body
            .match_indices("<form")
            .map(|(i, _)| {
                let end = self.body[i..].find('>').unwrap() + i;
                self.body[i..=end].to_owned()
            })
            .collect()
    }

    /// The page's session CSRF token (every signed-in page has it in the sign-out form).
    pub fn csrf(&self) -> Option<String> {
        let at = self.body.find("name=\"csrf\" value=\"")? + "name=\"csrf\" value=\"".len();
        let end = self.body[at..].find('"')? + at;
        Some(html_unescape(&self.body[at..end]))
    }

    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.body))
    }
}

/// The HTML of the first form whose action is `action`.
fn form_html<'a>(body: &'a str, action: &str) -> Option<&'a str> {
    body.match_indices("<form").find_map(|(i, _)| {
        let open_end = body[i..].find('>')? + i;
        let attrs = tag_attributes(&body[i + "<form".len()..open_end]);
        let matches = attrs
            .iter()
            .any(|(k, v)| k == "action" && v.as_deref() == Some(action));
        let end = body[i..].find("</form>")? + i;
        matches.then(|| &body[i..end])
    })
}

/// `name="value"` and bare attributes of a tag (the text between its name and `>`).
fn tag_attributes(tag: &str) -> Vec<(String, Option<String>)> {
    let mut attrs = Vec::new();
    let mut rest = tag.trim_start();
    while !rest.is_empty() && !rest.starts_with('>') && !rest.starts_with('/') {
        let name_end = rest
            .find(|c: char| c == '=' || c.is_whitespace() || c == '>')
            .unwrap_or(rest.len());
        let name = rest[..name_end].to_ascii_lowercase();
        rest = &rest[name_end..];
        if let Some(after_eq) = rest.strip_prefix('=') {
            let (value, after) = if let Some(quoted) = after_eq.strip_prefix('"') {
                let end = quoted.find('"').unwrap_or(quoted.len());
                (&quoted[..end], &quoted[(end + 1).min(quoted.len())..])
            } else {
                let end = after_eq
                    .find(|c: char| c.is_whitespace() || c == '>')
                    .unwrap_or(after_eq.len());
                (&after_eq[..end], &after_eq[end..])
            };
            attrs.push((name, Some(html_unescape(value))));
            rest = after;
        } else {
            attrs.push((name, None));
        }
        rest = rest.trim_start();
    }
    attrs
}

fn attribute<'a>(attrs: &'a [(String, Option<String>)], name: &str) -> Option<&'a str> {
    attrs
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_deref().unwrap_or(""))
}

/// What a browser submits for this form's HTML.
fn form_fields(html: &str) -> Vec<(String, String)> {
    let mut fields = Vec::new();
    let mut at = 0;
    while let Some(offset) = html[at..].find('<') {
        let start = at + offset;
        let tag_end = match html[start..].find('>') {
            Some(e) => start + e,
            None => break,
        };
        let tag = &html[start + 1..tag_end];
        let kind = tag
            .split(|c: char| c.is_whitespace())
            .next()
            .unwrap_or("")
            .to_ascii_lowercase();
        let attrs = tag_attributes(&tag[kind.len()..]);
        let name = attribute(&attrs, "name").map(str::to_owned);
        at = tag_end + 1;
        match (kind.as_str(), name) {
            ("input", Some(name)) => {
                let value = attribute(&attrs, "value").unwrap_or("").to_owned();
                match attribute(&attrs, "type").unwrap_or("text") {
                    "checkbox" | "radio" => {
                        if attribute(&attrs, "checked").is_some() {
                            let value = attribute(&attrs, "value").unwrap_or("on").to_owned();
                            fields.push((name, value));
                        }
                    }
                    "submit" | "button" | "reset" | "image" => {}
                    _ => fields.push((name, value)),
                }
            }
            ("textarea", Some(name)) => {
                let end = html[at..]
                    .find("</textarea>")
                    .map_or(html.len(), |e| at + e);
                let text = html[at..end].strip_prefix('\n').unwrap_or(&html[at..end]);
                fields.push((name, html_unescape(text)));
                at = end;
            }
            ("select", Some(name)) => {
                let end = html[at..].find("</select>").map_or(html.len(), |e| at + e);
                let options: Vec<Vec<(String, Option<String>)>> = html[at..end]
                    .match_indices("<option")
                    .map(|(i, _)| {
                        let o = at + i + "<option".len();
                        let close = html[o..].find('>').map_or(end, |e| o + e);
                        tag_attributes(&html[o..close])
                    })
                    .collect();
                let chosen = options
                    .iter()
                    .find(|o| attribute(o, "selected").is_some())
                    .or(options.first());
                if let Some(option) = chosen {
                    fields.push((name, attribute(option, "value").unwrap_or("").to_owned()));
                }
                at = end;
            }
            _ => {}
        }
    }
    fields
}

/// Undoes HTML escaping: named entities askama and browsers use, and numeric ones.
pub fn html_unescape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(amp) = rest.find('&') {
        out.push_str(&rest[..amp]);
        rest = &rest[amp..];
        let Some(semi) = rest.find(';').filter(|&i| i <= 10) else {
            out.push('&');
            rest = &rest[1..];
            continue;
        };
        let entity = &rest[1..semi];
        let decoded = match entity {
            "amp" => Some('&'),
            "lt" => Some('<'),
            "gt" => Some('>'),
            "quot" => Some('"'),
            "apos" => Some('\''),
            _ => entity
                .strip_prefix("#x")
                .or_else(|| entity.strip_prefix("#X"))
                .and_then(|h| u32::from_str_radix(h, 16).ok())
                .or_else(|| entity.strip_prefix('#').and_then(|d| d.parse().ok()))
                .and_then(char::from_u32),
        };
        match decoded {
            Some(c) => {
                out.push(c);
                rest = &rest[semi + 1..];
            }
            None => {
                out.push('&');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// `application/x-www-form-urlencoded`, as a browser encodes a form.
pub fn form_encode<K: AsRef<str>, V: AsRef<str>>(fields: &[(K, V)]) -> String {
    fields
        .iter()
        .map(|(k, v)| {
            format!(
                "{}={}",
                percent_encode(k.as_ref()),
                percent_encode(v.as_ref())
            )
        })
        .collect::<Vec<_>>()
        .join("&")
}

/// Percent-encodes everything but unreserved characters.
pub fn percent_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// A browser on the console: a cookie jar of its own, redirects not followed, and the
/// signed-in session's CSRF token added to the forms it posts.
#[derive(Clone)]
pub struct Browser {
    address: String,
    client: reqwest::Client,
    cookies: std::collections::BTreeMap<String, String>,
    /// The session's CSRF token, once a page showed it.
    csrf: Option<String>,
    /// Sends `X-Forwarded-Proto: https`, as a TLS-terminating proxy in front would.
    pub behind_tls: bool,
}

impl TestApp {
    /// A browser that has not signed in.
    pub fn browser(&self) -> Browser {
        Browser {
            address: self.address.clone(),
            client: reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .unwrap(),
            cookies: Default::default(),
            csrf: None,
            behind_tls: false,
        }
    }

    /// A browser signed in as `username` with the test password.
    pub async fn sign_in(&self, username: &str) -> Browser {
        self.sign_in_with(username, PASSWORD).await
    }

    /// A browser signed in as the bootstrap admin. Its first password is random (printed
    /// once at start), so it is set to the test password first, as an operator would.
    pub async fn sign_in_as_admin(&self) -> Browser {
        self.core()
            .await
            .control
            .reset_password(&Actor::operator(), "admin", SecretString::from(PASSWORD))
            .await
            .expect("the admin's password is set");
        self.sign_in("admin").await
    }

    pub async fn sign_in_with(&self, username: &str, password: &str) -> Browser {
        let mut browser = self.browser();
        let page = browser.try_sign_in(username, password).await;
        page.assert_redirect("/apps");
        browser
    }

    /// Every audit event, counted as the admin sees them.
    pub async fn audit_count(&self) -> usize {
        let mut count = 0;
        for page in 1.. {
            let events = self.audit(&format!("?page={page}")).await.len();
            count += events;
            if events < 50 {
                break;
            }
        }
        count
    }
}

impl Browser {
    pub fn cookie(&self, name: &str) -> Option<&str> {
        self.cookies.get(name).map(String::as_str)
    }

    /// Puts a cookie in the jar, as if another page (or an attacker) had set it.
    pub fn set_cookie(&mut self, name: &str, value: &str) {
        self.cookies.insert(name.to_owned(), value.to_owned());
    }

    pub fn forget_cookie(&mut self, name: &str) {
        self.cookies.remove(name);
    }

    async fn send(&mut self, request: reqwest::RequestBuilder) -> Page {
        let mut request = request;
        if !self.cookies.is_empty() {
            let header = self
                .cookies
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join("; ");
            request = request.header("cookie", header);
        }
        if self.behind_tls {
            request = request.header("x-forwarded-proto", "https");
        }
        let response = request.send().await.expect("request sent");
        for set in response.headers().get_all("set-cookie") {
            let set = set.to_str().unwrap();
            let pair = set.split(';').next().unwrap();
            let (name, value) = pair.split_once('=').unwrap();
            let expired = set.to_ascii_lowercase().contains("max-age=0");
            if expired || value.is_empty() {
                self.cookies.remove(name.trim());
            } else {
                self.cookies
                    .insert(name.trim().to_owned(), value.trim().to_owned());
            }
        }
        let page = Page {
            status: response.status(),
            headers: response.headers().clone(),
            body: response.text().await.unwrap(),
        };
        if let Some(csrf) = page.csrf()
            && page.status.is_success()
            && page.has("id=\"logout\"")
        {
            self.csrf = Some(csrf);
        }
        page
    }

    pub async fn get(&mut self, path: &str) -> Page {
        let request = self.client.get(format!("{}{path}", self.address));
        self.send(request).await
    }

    /// POSTs exactly these fields (nothing added).
    pub async fn post_raw<K: AsRef<str>, V: AsRef<str>>(
        &mut self,
        path: &str,
        fields: &[(K, V)],
    ) -> Page {
        let request = self
            .client
            .post(format!("{}{path}", self.address))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(form_encode(fields));
        self.send(request).await
    }

    /// The session's CSRF token, read from a page when not known yet.
    pub async fn session_csrf(&mut self) -> String {
        if self.csrf.is_none() {
            self.get("/account").await.assert_status(StatusCode::OK);
        }
        self.csrf
            .clone()
            .expect("a signed-in page shows the CSRF token")
    }

    /// POSTs a form with the session's CSRF token, as the console's own forms do.
    pub async fn post_form(&mut self, path: &str, fields: &[(&str, &str)]) -> Page {
        let csrf = self.session_csrf().await;
        self.post_with_csrf(path, fields, Some(&csrf)).await
    }

    /// POSTs a form with this CSRF token, or with none: a forged or stale form.
    pub async fn post_with_csrf(
        &mut self,
        path: &str,
        fields: &[(&str, &str)],
        csrf: Option<&str>,
    ) -> Page {
        let mut all: Vec<(&str, &str)> = fields.to_vec();
        if let Some(csrf) = csrf {
            all.push(("csrf", csrf));
        }
        self.post_raw(path, &all).await
    }

    /// Submits the form of `page` that posts to `action`, as the browser would, with
    /// `changes` typed into it.
    pub async fn submit(&mut self, page: &Page, action: &str, changes: &[(&str, &str)]) -> Page {
        let mut fields = page.form(action);
        for (name, value) in changes {
            match fields.iter_mut().find(|(n, _)| n == name) {
                Some(field) => field.1 = (*value).to_owned(),
                None => fields.push(((*name).to_owned(), (*value).to_owned())),
            }
        }
        self.post_raw(action, &fields).await
    }

    /// Fills in and sends the sign-in form; the answer to the POST.
    pub async fn try_sign_in(&mut self, username: &str, password: &str) -> Page {
        let form = self.get("/login").await;
        form.assert_status(StatusCode::OK);
        let page = self
            .submit(
                &form,
                "/login",
                &[("username", username), ("password", password)],
            )
            .await;
        if page.status == StatusCode::SEE_OTHER {
            self.csrf = None;
        }
        page
    }

    /// Whether the browser's session still works: a page behind sign-in answers 200, or
    /// 303 to the sign-in page.
    pub async fn is_signed_in(&mut self) -> bool {
        let page = self.get("/account").await;
        match page.status {
            StatusCode::OK => true,
            StatusCode::SEE_OTHER => {
                assert!(page.location().unwrap().starts_with("/login"));
                false
            }
            other => panic!("GET /account answered {other}: {}", page.body),
        }
    }
}
