//! With Redis away, an all-call, a check and a refund answer by each policy's failure
//! mode after every check that needs no Redis; with Redis back empty, the policies it lost
//! are put back and the call decided at once.

use std::time::Duration;

use super::*;

/// A server on a Redis of the test's own, with a fail-open and a fail-closed policy.
async fn on_own_redis(redis: &RedisProcess) -> (TestApp, String) {
    let db = fresh_database(Db::Sqlite).await;
    let mut s = settings(&db, &redis.url(), &test_prefix("all-outage"));
    s.redis_timeout_ms = 100;
    let app = spawn_app_with(s).await;
    let shop = shop(&app).await;
    for (name, mode) in [("open.p", "open"), ("closed.p", "closed")] {
        let mut body = policy(name, "sliding_window", "per_key", 5);
        body["failure_mode"] = json!(mode);
        app.create_policy(body).await;
    }
    (app, shop)
}

/// Waits until the server decides in Redis again (a check of a keyed bucket, which puts
/// nothing back: no policy hash is needed for it).
async fn redis_answers(app: &TestApp, shop: &str) {
    let decided = eventually(Duration::from_secs(10), || async {
        let r = acquire_all(app, shop, vec![item("open.p", 0, Some("probe"))]).await;
        let body: Value = r.json().await.unwrap_or(Value::Null);
        body["results"][0]["remaining"].is_i64()
    })
    .await;
    assert!(decided, "redis answers again");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_redis_away_each_item_answers_by_its_failure_mode() {
    let mut redis = RedisProcess::start().await;
    let (app, shop) = on_own_redis(&redis).await;
    let open = || item("open.p", 1, Some("ann"));
    let closed = || item("closed.p", 1, Some("ann"));
    expect_status(
        acquire_all(&app, &shop, vec![open(), closed()]).await,
        StatusCode::OK,
    )
    .await;

    redis.stop();
    let r = acquire_all(&app, &shop, vec![open(), item("open.p", 0, Some("bob"))]).await;
    let body = expect_status(r, StatusCode::OK).await;
    assert_eq!(body["results"][0]["degraded"], true, "{body}");
    assert_eq!(body["results"][1]["degraded"], true, "{body}");
    let r = acquire_all(&app, &shop, vec![open(), closed()]).await;
    let problem = expect_problem(r, StatusCode::SERVICE_UNAVAILABLE).await;
    assert!(
        problem["detail"].as_str().unwrap().starts_with("all[1]: "),
        "{problem}"
    );
    // Checks needing no Redis come first: a missing key is still a 422 naming the item.
    let r = acquire_all(&app, &shop, vec![open(), item("closed.p", 1, None)]).await;
    let problem = expect_problem(r, StatusCode::UNPROCESSABLE_ENTITY).await;
    assert_eq!(problem["field"], "all[1].key");
    let refund = |name: &str| {
        app.post(
            "/v1/refund",
            &shop,
            json!({"resource": name, "permits": 1, "key": "ann"}),
        )
    };
    let body = expect_status(refund("open.p").await, StatusCode::OK).await;
    assert_eq!(body["degraded"], true, "{body}");
    expect_problem(refund("closed.p").await, StatusCode::SERVICE_UNAVAILABLE).await;

    // Back, empty: the buckets start afresh; the call is decided by Redis again.
    redis.start_again().await;
    redis_answers(&app, &shop).await;
    let body = expect_status(
        acquire_all(&app, &shop, vec![open(), closed()]).await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(body["results"][1]["remaining"], 4, "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_global_policy_redis_lost_is_put_back_by_an_all_call_and_a_refund() {
    let mut redis = RedisProcess::start().await;
    let (app, shop) = on_own_redis(&redis).await;
    app.create_policy(policy("g", "fixed_window", "global", 5))
        .await;
    app.create_policy(policy("h", "gcra", "global", 5)).await;
    expect_status(
        acquire_all(&app, &shop, vec![item("g", 1, None)]).await,
        StatusCode::OK,
    )
    .await;
    redis.stop();
    redis.start_again().await;
    redis_answers(&app, &shop).await;
    let r = acquire_all(&app, &shop, vec![item("g", 2, None), item("h", 1, None)]).await;
    let body = expect_status(r, StatusCode::OK).await;
    assert_eq!(body["results"][0]["remaining"], 3, "{body}");
    assert_eq!(body["results"][0].get("degraded"), None, "{body}");
    redis.stop();
    redis.start_again().await;
    let r = app
        .post("/v1/refund", &shop, json!({"resource": "g", "permits": 1}))
        .await;
    let body = expect_status(r, StatusCode::OK).await;
    assert_eq!(body["remaining"], 5, "{body}");
}
