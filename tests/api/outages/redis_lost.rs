//! Redis not there at start, restarted empty, or having lost a policy's key: the server
//! knows its keys and policies from SQL, answers by failure mode meanwhile, and puts a
//! lost policy back within the very request that finds it missing.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_started_while_redis_is_down_knows_its_keys_and_policies() {
    let mut redis = RedisProcess::start().await;
    let (app, shop, _) = shop_and_other(&redis.url(), 100).await;
    redis.stop();

    // A second server on the same database starts while Redis is down.
    let second = spawn_app_with(app.settings.clone()).await;
    let (status, body) = acquire(&second, &shop, "closed.p").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "not 401: {body}");
    let (status, body) = acquire(&second, &shop, "open.p").await;
    assert_eq!((status, &body["degraded"]), (StatusCode::OK, &json!(true)));
    let (status, body) = readyz(&second).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(
        (&body["sql"], &body["redis"]),
        (&json!("ok"), &json!("unreachable"))
    );
    assert!(
        body["redis_error"].as_str().is_some_and(|e| !e.is_empty()),
        "{body}"
    );

    // Redis comes: decided by Redis, the policy put back from the snapshot.
    redis.start_again().await;
    let (status, body) = acquire(&second, &shop, "closed.p").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["remaining"], 999);
    assert_eq!(readyz(&second).await.0, StatusCode::OK);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_acquire_after_a_redis_restart_is_decided() {
    let mut redis = RedisProcess::start().await;
    let (app, shop, _) = shop_and_other(&redis.url(), 500).await;
    for _ in 0..3 {
        assert_eq!(acquire(&app, &shop, "closed.p").await.0, StatusCode::OK);
    }
    assert_eq!(readyz(&app).await.0, StatusCode::OK);

    // Restarted without persistence: every connection broken, every key gone.
    redis.stop();
    redis.start_again().await;

    // The very first acquire on the broken connection is decided, on a full bucket.
    let (status, body) = acquire(&app, &shop, "closed.p").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        body["remaining"], 999,
        "a new bucket: the old one went with Redis"
    );
    assert_eq!(readyz(&app).await.0, StatusCode::OK);
    let policy: std::collections::HashMap<String, String> = redis::cmd("HGETALL")
        .arg(app.policy_key("closed.p"))
        .query_async(&mut app.redis.clone())
        .await
        .unwrap();
    assert_eq!(policy.get("max_permits").map(String::as_str), Some("1000"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_whose_key_redis_lost_is_put_back_by_the_request_that_finds_it_missing() {
    let redis = RedisProcess::start().await;
    let (app, shop, other) = shop_and_other(&redis.url(), 500).await;
    let mut conn = app.redis.clone();
    for name in ["closed.p", "open.p"] {
        assert_eq!(acquire(&app, &shop, name).await.0, StatusCode::OK);
    }

    // Lost one by one (deleted, evicted), then all at once (FLUSHALL).
    let _: i64 = redis::cmd("DEL")
        .arg(app.policy_key("closed.p"))
        .query_async(&mut conn)
        .await
        .unwrap();
    let (status, body) = acquire(&app, &shop, "closed.p").await;
    assert_eq!(status, StatusCode::OK, "not 404: {body}");
    let _: () = redis::cmd("FLUSHALL").query_async(&mut conn).await.unwrap();
    for name in ["closed.p", "open.p"] {
        let (status, body) = acquire(&app, &shop, name).await;
        assert_eq!(
            (status, &body["degraded"]),
            (StatusCode::OK, &Value::Null),
            "{body}"
        );
    }
    // Put back as it is in SQL: still only shop may use it.
    let _: () = redis::cmd("FLUSHALL").query_async(&mut conn).await.unwrap();
    assert_eq!(
        acquire(&app, &other, "open.p").await.0,
        StatusCode::FORBIDDEN
    );
    // A policy nobody ever made is still no policy.
    assert_eq!(
        acquire(&app, &shop, "no.such.p").await.0,
        StatusCode::NOT_FOUND
    );
    drop(redis);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_that_lost_the_functions_gets_them_again_from_the_acquire_that_finds_them_missing()
{
    let redis = RedisProcess::start().await;
    let (app, shop, _) = shop_and_other(&redis.url(), 500).await;
    assert_eq!(acquire(&app, &shop, "closed.p").await.0, StatusCode::OK);
    let mut conn = app.redis.clone();
    let _: () = redis::cmd("FUNCTION")
        .arg("FLUSH")
        .query_async(&mut conn)
        .await
        .unwrap();

    // Only the functions went: decided by Redis again, not by the failure mode.
    let (status, body) = acquire(&app, &shop, "closed.p").await;
    assert_eq!(
        (status, &body["degraded"]),
        (StatusCode::OK, &Value::Null),
        "{body}"
    );
    let libraries: Vec<redis::Value> = redis::cmd("FUNCTION")
        .arg("LIST")
        .arg("LIBRARYNAME")
        .arg("ratekeeper_*")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(libraries.len(), 1, "{libraries:?}");
    drop(redis);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_while_redis_was_away_are_shown_once_it_is_back() {
    let mut redis = RedisProcess::start().await;
    let (app, shop, _) = shop_and_other(&redis.url(), 100).await;
    redis.stop();
    for _ in 0..3 {
        let (status, body) = acquire(&app, &shop, "closed.p").await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    }
    // The flushes that failed meanwhile held the refusals; the first that reaches Redis
    // again stores them.
    redis.start_again().await;
    let mut admin = app.sign_in_as_admin().await;
    let words = "0 granted, 0 denied, 3 refused with 503: Redis unreachable";
    let shown = eventually(std::time::Duration::from_secs(20), || {
        let mut admin = admin.clone();
        async move { admin.get("/apps/shop").await.has(words) }
    })
    .await;
    let page = admin.get("/apps/shop").await;
    assert!(shown, "{}", page.body);
    assert!(
        page.has(">Unavailable: 100% refused</span>"),
        "{}",
        page.body
    );
    assert!(
        page.has("1 refusing (503: Redis unreachable)"),
        "{}",
        page.body
    );
    let apps = admin.get("/apps").await;
    assert!(apps.has(words), "{}", apps.body);
    // The policy's own page counts them over the hour, the day and the week.
    let policy = admin.get("/policies/closed.p").await;
    assert_eq!(
        policy
            .body
            .matches("<span data-total=\"unavailable\">3</span> refused with 503")
            .count(),
        3,
        "{}",
        policy.body
    );
}
