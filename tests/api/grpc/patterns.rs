//! Policies found by their own Envoy-style descriptor patterns, as a config of
//! envoyproxy/ratelimit names its limits: an exact `key=value` beats a bare `key`, a bare
//! key's value is the bucket's key (the bucket HTTP reaches with that `key`), and another
//! domain's descriptor matches nothing.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn descriptor_patterns_name_policies_with_envoys_precedence() {
    let (app, key) = shop_over_grpc().await;
    app.create_policy(
        json!({"name": "users.db", "owner_app": "shop", "rate": 0.0001,
                             "max_permits": 2,
                             "descriptors": [{"domain": "edge", "entries": ["database=users"]}]}),
    )
    .await;
    app.create_policy(
        json!({"name": "any.db", "owner_app": "shop", "rate": 0.0001,
                             "max_permits": 3, "scope": "per_key",
                             "descriptors": [{"domain": "edge", "entries": ["database"]}]}),
    )
    .await;

    // The exact pattern wins for its value: the global policy users.db.
    let users = ask(&app, &key, vec![descriptor(&[("database", "users")])]).await;
    assert_eq!(overall(&users), Code::Ok, "{users:?}");
    let limit = users.statuses[0].current_limit.as_ref().expect("a limit");
    assert_eq!(limit.name, "users.db");
    assert_eq!(users.statuses[0].limit_remaining, 1);

    // Any other value: the per_key policy any.db, one bucket per value, shared with HTTP.
    let orders = ask(&app, &key, vec![descriptor(&[("database", "orders")])]).await;
    let limit = orders.statuses[0].current_limit.as_ref().expect("a limit");
    assert_eq!(limit.name, "any.db");
    assert_eq!(orders.statuses[0].limit_remaining, 2);
    let (status, body) = http_acquire_keyed(&app, &key, "any.db", "orders").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        body["remaining"], 1,
        "the bucket the descriptor took from: {body}"
    );
    assert_eq!(bucket_permits(&app, "any.db", "orders").await.floor(), 1.0);

    // The patterns are of domain "edge": another domain's descriptor names no policy.
    let mut elsewhere = tonic::Request::new(RateLimitRequest {
        domain: "internal".into(),
        descriptors: vec![descriptor(&[("database", "users")])],
        hits_addend: 0,
    });
    elsewhere.metadata_mut().insert(
        "authorization",
        format!("Bearer {key}").parse().expect("ascii metadata"),
    );
    let reply = client(&app)
        .await
        .should_rate_limit(elsewhere)
        .await
        .expect("answered")
        .into_inner();
    assert_eq!(overall(&reply), Code::Ok);
    assert!(reply.statuses[0].current_limit.is_none(), "{reply:?}");
    assert_eq!(
        bucket_permits(&app, "any.db", "users").await.floor(),
        3.0,
        "nothing taken"
    );
}

/// A wildcard value (envoyproxy/ratelimit's `*`): each matching value its own bucket, or,
/// written `shared`, one bucket for every matching value (Envoy's `share_threshold`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wildcard_patterns_count_per_value_or_shared() {
    let (app, key) = shop_over_grpc().await;
    app.create_policy(json!({"name": "files", "owner_app": "shop", "rate": 0.0001,
                             "max_permits": 1, "scope": "per_key",
                             "descriptors": [{"domain": "edge", "entries": ["file=f*.pdf"]}]}))
        .await;
    app.create_policy(json!({"name": "docs", "owner_app": "shop", "rate": 0.0001,
                             "max_permits": 2,
                             "descriptors": [{"domain": "edge", "entries": ["shared doc=d*"]}]}))
        .await;
    let once = |entries: &'static [(&'static str, &'static str)]| {
        let (app, key) = (&app, &key);
        async move { ask(app, key, vec![descriptor(entries)]).await }
    };

    let first = once(&[("file", "fa.pdf")]).await;
    assert_eq!(overall(&first), Code::Ok, "{first:?}");
    let limit = first.statuses[0].current_limit.as_ref().expect("a limit");
    assert_eq!(limit.name, "files");
    assert_eq!(overall(&once(&[("file", "fa.pdf")]).await), Code::OverLimit);
    let other = once(&[("file", "fb.pdf")]).await;
    assert_eq!(overall(&other), Code::Ok, "its own bucket: {other:?}");
    assert_eq!(bucket_permits(&app, "files", "fb.pdf").await.floor(), 0.0);
    let unmatched = once(&[("file", "fa.csv")]).await;
    assert!(
        unmatched.statuses[0].current_limit.is_none(),
        "{unmatched:?}"
    );

    let a = once(&[("doc", "da")]).await;
    assert_eq!(
        a.statuses[0].current_limit.as_ref().expect("a limit").name,
        "docs"
    );
    assert_eq!(a.statuses[0].limit_remaining, 1);
    assert_eq!(once(&[("doc", "db")]).await.statuses[0].limit_remaining, 0);
    let c = once(&[("doc", "dc")]).await;
    assert_eq!(overall(&c), Code::OverLimit, "one bucket for all: {c:?}");
}
