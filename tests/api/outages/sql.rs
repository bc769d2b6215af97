//! The SQL database cut off (a TCP proxy in front of PostgreSQL, which the test cuts):
//! the admin API and the console answer 503 at once (after the pool's short wait), not a
//! 500 after 30 s; `/readyz` says why; acquires go on from the in-memory snapshot.

use std::net::ToSocketAddrs;
use std::time::Duration;

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_sql_outage_answers_503_with_reasons_and_acquires_go_on() {
    let direct = fresh_database(Db::Postgres).await;
    let mut url = url::Url::parse(&direct).unwrap();
    let target = (url.host_str().unwrap(), url.port().unwrap_or(5432))
        .to_socket_addrs()
        .unwrap()
        .next()
        .unwrap();
    let mut proxy = TcpProxy::start(target).await;
    url.set_host(Some("127.0.0.1")).unwrap();
    url.set_port(Some(proxy.port)).unwrap();
    let mut s = settings(
        url.as_str(),
        &redis_url(),
        &format!("rksql-{}", random_suffix()),
    );
    s.database_timeout_ms = 300;
    let app = spawn_app_with(s).await;
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
