//! Redis stalled or stopped while the server runs: every check that needs no Redis is
//! still made (API key, allowed app, permits, enabled), and only then the policy's
//! failure mode answers; metrics do not grow with what clients send meanwhile.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_redis_answers_by_failure_mode_after_every_other_check() {
    let redis = RedisProcess::start().await;
    let (app, shop, other) = shop_and_other(&redis.url(), 100).await;
    // A disabled policy, and a fail-open one that allows shop only.
    app.create_policy(json!({
        "name": "off.p", "owner_app": "shop", "rate": 1, "max_permits": 5,
        "enabled": false, "failure_mode": "closed"
    }))
    .await;
    // A shadow policy that fails closed: shadow mode never refuses.
    app.create_policy(json!({
        "name": "shadow.p", "owner_app": "shop", "rate": 1, "max_permits": 5,
        "mode": "shadow", "failure_mode": "closed"
    }))
    .await;
    assert_eq!(acquire(&app, &shop, "open.p").await.0, StatusCode::OK);
    assert_eq!(
        acquire(&app, &other, "open.p").await.0,
        StatusCode::FORBIDDEN
    );

    redis.stall();
    // Not allowed: 403 with or without Redis (the snapshot knows the allowed apps).
    let (status, body) = acquire(&app, &other, "open.p").await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    // Allowed, fails open: granted, degraded, with the policy's quota in the headers.
    let r = app.acquire(&shop, "open.p", 1).await;
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(
        r.headers()
            .get("ratelimit-policy")
            .and_then(|v| v.to_str().ok()),
        Some(r#""open.p";q=1000"#)
    );
    let body: Value = r.json().await.unwrap();
    assert_eq!(
        (&body["allowed"], &body["degraded"], &body["limit"]),
        (&json!(true), &json!(true), &json!(1000))
    );
    // Allowed, fails closed: 503, its time observed like any answer's.
    let observed = app.metric("ratekeeper_acquire_seconds_count").await;
    let (status, body) = acquire(&app, &shop, "closed.p").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert_eq!(
        app.metric("ratekeeper_acquire_seconds_count").await,
        observed.map(|n| n + 1.0)
    );
    // In shadow mode, failing closed or not: granted, degraded.
    let (status, body) = acquire(&app, &shop, "shadow.p").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        (&body["allowed"], &body["degraded"]),
        (&json!(true), &json!(true))
    );
    // More permits than the policy holds: 422, Redis or not.
    let r = app.acquire(&shop, "closed.p", 1001).await;
    expect_problem(r, StatusCode::UNPROCESSABLE_ENTITY).await;
    // Disabled: granted unenforced, whatever the failure mode.
    let (status, body) = acquire(&app, &shop, "off.p").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        (&body["enforced"], &body["degraded"]),
        (&json!(false), &json!(true))
    );
    // A policy this server does not know: fails closed.
    let (status, _) = acquire(&app, &shop, "no.such.p").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    // A bad key is still a bad key.
    assert_eq!(
        acquire(&app, "rk_key_nope", "open.p").await.0,
        StatusCode::UNAUTHORIZED
    );

    redis.resume();
    let decided = eventually(std::time::Duration::from_secs(10), || async {
        acquire(&app, &shop, "closed.p").await.0 == StatusCode::OK
    })
    .await;
    assert!(decided, "decided by Redis again once it answers");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_stay_flat_whatever_resource_names_clients_send_during_an_outage() {
    let mut redis = RedisProcess::start().await;
    let (app, shop, _) = shop_and_other(&redis.url(), 100).await;
    assert_eq!(acquire(&app, &shop, "open.p").await.0, StatusCode::OK);
    redis.stop();
    assert_eq!(acquire(&app, &shop, "open.p").await.0, StatusCode::OK);
    let before = app.metrics_text().await;

    let names: Vec<String> = (0..500)
        .map(|i| format!("made.up.{i}.{}", random_suffix()))
        .collect();
    let answers =
        futures_util::future::join_all(names.iter().map(|name| app.acquire(&shop, name, 1))).await;
    assert!(
        answers
            .iter()
            .all(|r| r.status() == StatusCode::SERVICE_UNAVAILABLE)
    );

    let after = app.metrics_text().await;
    assert!(
        !after.contains("made.up."),
        "no metric label comes from a request"
    );
    let series = |text: &str| {
        text.lines()
            .filter(|l| l.starts_with("ratekeeper_decisions_total"))
            .count()
    };
    assert_eq!(
        series(&before),
        series(&after),
        "no new series: every outcome's is there from the start"
    );
    assert!(
        after.contains("ratekeeper_decisions_total{outcome=\"unavailable\",protocol=\"http\"} 500"),
        "the refusals counted under their outcome: {after}"
    );
    assert!(series(&after) <= 6, "the six outcomes at most: {after}");
    assert!(
        after.len() < before.len() + 200,
        "{} -> {} bytes",
        before.len(),
        after.len()
    );
}

/// Sign-in attempts are still limited while Redis is stalled (counted in the server's
/// memory), and a right password still signs in: an outage neither locks the admins out
/// nor leaves guessing unlimited.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sign_in_attempts_are_limited_while_redis_is_stalled() {
    let redis = RedisProcess::start().await;
    let (app, _, _) = shop_and_other(&redis.url(), 100).await;
    app.create_user("rita", None).await;
    redis.stall();
    app.sign_in("rita").await;
    let mut guesser = app.browser();
    let mut statuses = Vec::new();
    for _ in 0..12 {
        statuses.push(guesser.try_sign_in("rita", "a wrong guess").await.status);
    }
    assert_eq!(
        statuses,
        [
            vec![StatusCode::UNAUTHORIZED; 10],
            vec![StatusCode::TOO_MANY_REQUESTS; 2]
        ]
        .concat()
    );
    // The same limit holds for the right password, as it does with Redis.
    guesser
        .try_sign_in("rita", "a long password")
        .await
        .assert_status(StatusCode::TOO_MANY_REQUESTS);
}
