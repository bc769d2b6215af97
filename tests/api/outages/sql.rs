//! The SQL database cut off (a TCP proxy in front of PostgreSQL, which the test cuts):
//! the admin API and the console answer 503 at once (after the pool's short wait), not a
//! 500 after 30 s; `/readyz` says why; acquires go on from the in-memory snapshot; the
//! log says so in a line, never with a backtrace; the error page of someone signed out
//! shows no navigation.

use std::io::BufRead;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::*;

/// A server (in this process) on a database behind a proxy, with a short database wait.
async fn app_behind_a_proxy() -> (TcpProxy, TestApp) {
    let direct = fresh_database(Db::Postgres).await;
    let (proxy, url) = TcpProxy::in_front_of_database(&direct).await;
    let mut s = settings(&url, &redis_url(), &test_prefix("sql"));
    s.database_timeout_ms = 300;
    (proxy, spawn_app_with(s).await)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_sql_outage_answers_503_with_reasons_and_acquires_go_on() {
    let (mut proxy, app) = app_behind_a_proxy().await;
    let key = app.shop_with_policy("orders.create", 1000.0, 1000).await;
    let mut browser = app.sign_in_as_admin().await;

    proxy.cut().await;

    let problem = expect_problem(
        app.get("/api/v1/apps", &app.admin_token).await,
        StatusCode::SERVICE_UNAVAILABLE,
    )
    .await;
    assert_eq!(problem["type"], "urn:ratekeeper:problem:unavailable");
    assert!(
        problem["detail"].as_str().unwrap().contains("database"),
        "{problem}"
    );

    let page = browser.get("/apps").await;
    page.assert_status(StatusCode::SERVICE_UNAVAILABLE);
    assert!(page.has("Database unavailable"), "{}", page.body);
    assert!(
        page.has(r#"href="/apps""#) && page.has(r#"href="/audit""#),
        "navigation"
    );

    let (status, body) = readyz(&app).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(
        (&body["sql"], &body["redis"]),
        (&json!("unreachable"), &json!("ok"))
    );
    assert!(
        body["sql_error"].as_str().is_some_and(|e| !e.is_empty()),
        "{body}"
    );

    let r = app.acquire(&key, "orders.create", 1).await;
    assert_eq!(r.status(), StatusCode::OK, "acquires need no SQL");

    proxy.restore().await;
    let back = eventually(Duration::from_secs(10), || async {
        app.get("/api/v1/apps", &app.admin_token).await.status() == StatusCode::OK
    })
    .await;
    assert!(
        back,
        "the admin API answers again once the database is back"
    );
    assert_eq!(readyz(&app).await.0, StatusCode::OK);
    browser.get("/apps").await.assert_status(StatusCode::OK);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_error_page_of_someone_signed_out_shows_no_navigation() {
    let (mut proxy, app) = app_behind_a_proxy().await;
    proxy.cut().await;

    // Signing in needs the database: 503, in the sign-in page's own chrome.
    let mut browser = app.browser();
    let page = browser.try_sign_in("admin", PASSWORD).await;
    page.assert_status(StatusCode::SERVICE_UNAVAILABLE);
    assert!(page.has("Database unavailable"), "{}", page.body);
    assert!(!page.has("<nav aria-label=\"Main\">"), "{}", page.body);
    assert!(!page.has(r#"href="/audit""#), "{}", page.body);
    assert!(
        page.has(r#"href="/login""#),
        "a way back to sign in: {}",
        page.body
    );

    // A session cookie that cannot be checked now: the navigation without a name.
    browser.set_cookie("rk_session", "not-checked");
    let page = browser.get("/apps").await;
    page.assert_status(StatusCode::SERVICE_UNAVAILABLE);
    assert!(page.has("<nav aria-label=\"Main\">"), "{}", page.body);
    assert!(!page.has("id=\"logout\""), "{}", page.body);
}

/// `ratekeeper serve` as an operator runs it, with `RUST_BACKTRACE=1`, on `database_url`:
/// the child, its address, and its log (stderr) as it grows.
fn serve_with_backtraces(database_url: &str) -> (std::process::Child, String, Arc<Mutex<String>>) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_ratekeeper"))
        .arg("serve")
        .env("RATEKEEPER_DATABASE_URL", database_url)
        .env("RATEKEEPER_LISTEN", "127.0.0.1:0")
        .env("RATEKEEPER_REDIS_URL", redis_url())
        .env("RATEKEEPER_REDIS_PREFIX", test_prefix("sql"))
        .env("RATEKEEPER_DATABASE_TIMEOUT_MS", "300")
        .env("RUST_BACKTRACE", "1")
        .env("RUST_LOG", "info")
        .env_remove("RUST_LIB_BACKTRACE")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let log = Arc::new(Mutex::new(String::new()));
    let (address_tx, address_rx) = std::sync::mpsc::channel();
    let stderr = child.stderr.take().unwrap();
    let written = log.clone();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            if line.contains("ratekeeper listening")
                && let Some(at) = line.split("address=").nth(1)
            {
                let _ = address_tx.send(at.split_whitespace().next().unwrap().to_owned());
            }
            let mut log = written.lock().unwrap();
            log.push_str(&line);
            log.push('\n');
        }
    });
    let address = address_rx
        .recv_timeout(Duration::from_secs(60))
        .unwrap_or_else(|_| panic!("the server did not start: {}", log.lock().unwrap()));
    (child, format!("http://{address}"), log)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_sql_outage_is_logged_in_lines_without_backtraces() {
    // As `spawn_app` does for the tests' own clients (reqwest here names no provider).
    let _ = rustls::crypto::ring::default_provider().install_default();
    let direct = fresh_database(Db::Postgres).await;
    let (mut proxy, url) = TcpProxy::in_front_of_database(&direct).await;
    let (mut child, address, log) = serve_with_backtraces(&url);
    proxy.cut().await;

    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    for _ in 0..5 {
        // A console page of a session, a sign-in, and the admin API: each asks SQL.
        let r = client
            .get(format!("{address}/apps"))
            .header("cookie", "rk_session=some-session")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE);
        let r = client
            .post(format!("{address}/login"))
            .header("cookie", "rk_login_csrf=same")
            .header("content-type", "application/x-www-form-urlencoded")
            .body("username=admin&password=wrong+password&csrf=same")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE);
        let r = client
            .get(format!("{address}/api/v1/apps"))
            .bearer_auth("rk_pat_unknown")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE);
    }
    // Every line a request wrote is in the pipe by the time its answer came back.
    let _ = child.kill();
    let _ = child.wait();
    let log = log.lock().unwrap().clone();
    assert!(
        !log.to_lowercase().contains("stack backtrace"),
        "a backtrace in the log: {log}"
    );
    assert!(
        !log.lines().any(|l| l.starts_with("   0: ")),
        "a backtrace in the log: {log}"
    );
    assert!(
        log.lines()
            .any(|l| l.contains("WARN") && l.contains("the database is unavailable")),
        "the outage is logged: {log}"
    );
}

/// Whether Redis holds an open episode of `member` ("<webhook> <policy>").
async fn episode_open(app: &TestApp, member: &str) -> bool {
    let mut conn = app.redis.clone();
    let key = format!("{}:{{notify}}:episodes", app.settings.redis_prefix);
    let score: Option<f64> = redis::cmd("ZSCORE")
        .arg(key)
        .arg(member)
        .query_async(&mut conn)
        .await
        .unwrap();
    score.is_some()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_episode_that_starts_while_the_database_is_away_is_sent_when_it_is_back() {
    let (mut proxy, app) = app_behind_a_proxy().await;
    let key = app.shop_with_policy("orders.create", 0.001, 1).await;
    let receiver = Receiver::start(0).await;
    let hook = app
        .post(
            "/api/v1/apps/shop/webhooks",
            &app.admin_token,
            json!({"url": receiver.url, "events": ["policy.denying", "policy.recovered"],
                   "quiet_period_s": 1}),
        )
        .await;
    let hook = expect_status(hook, StatusCode::CREATED).await;
    let member = format!("{} orders.create", hook["id"].as_str().unwrap());

    // A first episode, start and end: the watcher knows the webhook.
    assert_eq!(
        app.acquire(&key, "orders.create", 1).await.status(),
        StatusCode::OK
    );
    assert_eq!(
        app.acquire(&key, "orders.create", 1).await.status(),
        StatusCode::TOO_MANY_REQUESTS
    );
    let got = receiver.wait_for(2, Duration::from_secs(60)).await;
    let types: Vec<Value> = got.iter().map(|r| r.json()["type"].clone()).collect();
    assert_eq!(types, [json!("policy.denying"), json!("policy.recovered")]);

    // The database goes; a second episode starts in Redis meanwhile.
    proxy.cut().await;
    assert_eq!(
        app.acquire(&key, "orders.create", 1).await.status(),
        StatusCode::TOO_MANY_REQUESTS
    );
    assert!(
        eventually(Duration::from_secs(60), || episode_open(&app, &member)).await,
        "the episode started in Redis"
    );
    // Back: its event is written and sent (its end, a second later, may come first).
    proxy.restore().await;
    let mut got = receiver.wait_for(3, Duration::from_secs(60)).await;
    if got[2].json()["type"] != "policy.denying" {
        got = receiver.wait_for(4, Duration::from_secs(60)).await;
    }
    let later: Vec<Value> = got[2..].iter().map(|r| r.json()["type"].clone()).collect();
    assert!(later.contains(&json!("policy.denying")), "{later:?}");
    receiver.stop().await;
}
