//! One decision path for both protocols: the same per_key bucket taken by either, shadow
//! mode counted the same, gRPC callers among the policy's top callers, and the decisions
//! counted by protocol.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_and_http_take_from_the_same_per_key_bucket() {
    let (app, key) = shop_over_grpc().await;
    app.create_policy(
        json!({"name": "per.user", "owner_app": "shop", "scope": "per_key",
                             "rate": 0.001, "max_permits": 4}),
    )
    .await;
    let ann = || vec![descriptor(&[("generic_key", "per.user"), ("user", "ann")])];
    // gRPC takes, HTTP sees it.
    assert_eq!(ask(&app, &key, ann()).await.statuses[0].limit_remaining, 3);
    let (status, body) = http_acquire_keyed(&app, &key, "per.user", "ann").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["remaining"], 2);
    // HTTP takes, gRPC sees it.
    http_acquire_keyed(&app, &key, "per.user", "ann").await;
    assert_eq!(ask(&app, &key, ann()).await.statuses[0].limit_remaining, 0);
    // Spent for both.
    assert_eq!(overall(&ask(&app, &key, ann()).await), Code::OverLimit);
    let (status, _) = http_acquire_keyed(&app, &key, "per.user", "ann").await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
    // Another key's bucket is full.
    let (status, body) = http_acquire_keyed(&app, &key, "per.user", "bob").await;
    assert_eq!((status, &body["remaining"]), (StatusCode::OK, &json!(3)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shadow_policy_answers_ok_and_counts_the_would_be_denial() {
    let (app, key) = shop_over_grpc().await;
    app.create_policy(
        json!({"name": "watch.p", "owner_app": "shop", "rate": 0.001,
                             "max_permits": 1, "mode": "shadow"}),
    )
    .await;
    let named = || vec![descriptor(&[("generic_key", "watch.p")])];
    assert_eq!(overall(&ask(&app, &key, named()).await), Code::Ok);
    let would_deny = ask(&app, &key, named()).await;
    assert_eq!(overall(&would_deny), Code::Ok, "{would_deny:?}");
    assert!(
        would_deny.response_headers_to_add.is_empty(),
        "no RateLimit headers in shadow mode, as on HTTP: {would_deny:?}"
    );
    assert_eq!(
        app.metric("ratekeeper_decisions_total{outcome=\"shadow_denied\",protocol=\"grpc\"}")
            .await,
        Some(1.0)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_callers_are_among_the_top_callers_and_counted_by_protocol() {
    let (app, key) = shop_over_grpc().await;
    app.create_policy(
        json!({"name": "top.p", "owner_app": "shop", "scope": "per_key",
                             "rate": 0.001, "max_permits": 2}),
    )
    .await;
    for _ in 0..3 {
        ask(
            &app,
            &key,
            vec![descriptor(&[("generic_key", "top.p"), ("user", "heavy")])],
        )
        .await;
    }
    ask(
        &app,
        &key,
        vec![descriptor(&[("generic_key", "top.p"), ("user", "light")])],
    )
    .await;
    // The tallies reach Redis with the next flush.
    let flushed = eventually(std::time::Duration::from_secs(20), || async {
        top_callers(&app, "denied")
            .await
            .as_array()
            .is_some_and(|a| !a.is_empty())
    })
    .await;
    assert!(flushed, "the gRPC decisions are flushed");
    let granted = top_callers(&app, "granted").await;
    let denied = top_callers(&app, "denied").await;
    let count = |list: &Value, caller: &str| {
        list.as_array()
            .unwrap()
            .iter()
            .find(|c| c["key"] == caller)
            .map(|c| c["count"].as_u64().unwrap())
    };
    assert_eq!(count(&granted, "heavy"), Some(2), "{granted}");
    assert_eq!(count(&granted, "light"), Some(1), "{granted}");
    assert_eq!(count(&denied, "heavy"), Some(1), "{denied}");

    assert_eq!(
        app.metric("ratekeeper_decisions_total{outcome=\"granted\",protocol=\"grpc\"}")
            .await,
        Some(3.0)
    );
    assert_eq!(
        app.metric("ratekeeper_decisions_total{outcome=\"granted\",protocol=\"http\"}")
            .await,
        Some(0.0)
    );
    assert_eq!(
        app.metric("ratekeeper_grpc_request_seconds_count").await,
        Some(4.0)
    );
}

/// The policy top.p's top callers by `outcome`, over the last five minutes.
async fn top_callers(app: &TestApp, outcome: &str) -> Value {
    let path = "/api/v1/policies/top.p/top?minutes=5";
    let top = expect_status(app.get(path, &app.admin_token).await, StatusCode::OK).await;
    top[outcome].clone()
}
