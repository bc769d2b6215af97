//! A keyed bucket's life: it expires once idle long enough to be full, keeps its state
//! through an edit of rate or capacity (clamped, never refilled), starts afresh with a new
//! algorithm or scope, and a deleted policy leaves no bucket without an expiry.

use std::time::Duration;

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_bucket_expires_when_it_would_be_full_again() {
    let (app, shop, _) = two_apps(Db::Sqlite).await;
    app.create_policy(
        json!({"name": "fast", "owner_app": "shop", "scope": "per_key",
                             "rate": 10, "max_permits": 10}),
    )
    .await;
    assert_eq!(
        acquire_for(&app, &shop, "fast", 10, Some("ann"))
            .await
            .status(),
        StatusCode::OK
    );
    let buckets = keyed_buckets(&app).await;
    assert_eq!(buckets.len(), 1);
    let ttl = buckets[0].1;
    // Ten permits at 10 a second: full again within a second, and so gone within two (its
    // expiry is held ahead, at twice the time to full: lua/lib/keyed_token_bucket.lua;
    // not less than 1 ms: a loaded machine may take a while to ask for the TTL).
    assert!((1..=2002).contains(&ttl), "ttl {ttl} ms");
    let gone = eventually(Duration::from_secs(15), || async {
        keyed_buckets(&app).await.is_empty()
    })
    .await;
    assert!(gone, "the idle bucket went by itself");
    // And the next acquire finds it full.
    let body = expect_status(
        acquire_for(&app, &shop, "fast", 1, Some("ann")).await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(body["remaining"], 9);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edit_of_rate_or_capacity_keeps_each_bucket_and_never_refills_it() {
    let (app, shop, _) = two_apps(Db::Sqlite).await;
    app.create_policy(
        json!({"name": "orders", "owner_app": "shop", "scope": "per_key",
                             "rate": 0.001, "max_permits": 5}),
    )
    .await;
    assert_eq!(
        acquire_for(&app, &shop, "orders", 4, Some("ann"))
            .await
            .status(),
        StatusCode::OK
    );
    let patch = |body: Value| {
        app.send(
            "PATCH",
            "/api/v1/policies/orders",
            &app.admin_token,
            Some(body),
        )
    };
    expect_status(patch(json!({"rate": 0.002})).await, StatusCode::OK).await;
    let body = expect_status(
        acquire_for(&app, &shop, "orders", 1, Some("ann")).await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(
        body["remaining"], 0,
        "one was left, not a refilled bucket: {body}"
    );
    // A capacity raised keeps what is left; lowered, it clamps.
    expect_status(patch(json!({"max_permits": 50})).await, StatusCode::OK).await;
    assert_eq!(
        status_for(&app, &shop, "orders", Some("ann")).await,
        StatusCode::TOO_MANY_REQUESTS
    );
    // Other keys see the new capacity, full.
    let body = expect_status(
        acquire_for(&app, &shop, "orders", 1, Some("bob")).await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(
        (&body["limit"], &body["remaining"]),
        (&json!(50), &json!(49))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_algorithm_or_scope_starts_every_bucket_afresh() {
    let (app, shop, _) = two_apps(Db::Sqlite).await;
    app.create_policy(
        json!({"name": "orders", "owner_app": "shop", "scope": "per_key",
                             "rate": 0.001, "max_permits": 2}),
    )
    .await;
    assert_eq!(
        acquire_for(&app, &shop, "orders", 2, Some("ann"))
            .await
            .status(),
        StatusCode::OK
    );
    assert_eq!(
        status_for(&app, &shop, "orders", Some("ann")).await,
        StatusCode::TOO_MANY_REQUESTS
    );
    let patch = |body: Value| {
        app.send(
            "PATCH",
            "/api/v1/policies/orders",
            &app.admin_token,
            Some(body),
        )
    };
    expect_status(patch(json!({"algorithm": "gcra"})).await, StatusCode::OK).await;
    assert_eq!(
        status_for(&app, &shop, "orders", Some("ann")).await,
        StatusCode::OK,
        "a new gcra bucket"
    );
    assert_eq!(
        acquire_for(&app, &shop, "orders", 1, Some("ann"))
            .await
            .status(),
        StatusCode::OK
    );
    expect_status(patch(json!({"scope": "per_app"})).await, StatusCode::OK).await;
    let body = expect_status(
        acquire_for(&app, &shop, "orders", 1, None).await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(body["remaining"], 1, "a new bucket for shop");
    expect_status(patch(json!({"scope": "global"})).await, StatusCode::OK).await;
    let body = expect_status(
        acquire_for(&app, &shop, "orders", 1, None).await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(body["remaining"], 1, "the policy's one bucket, new");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_policy_leaves_no_keyed_state_without_an_expiry() {
    let (app, shop, _) = two_apps(Db::Sqlite).await;
    for (name, algorithm, param) in [
        ("tb", "token_bucket", json!({"rate": 0.001})),
        ("fw", "fixed_window", json!({"window_ms": 3_600_000})),
        ("sl", "sliding_log", json!({"window_ms": 3_600_000})),
        ("sw", "sliding_window", json!({"window_ms": 3_600_000})),
        ("cc", "concurrency", json!({"lease_ttl_ms": 3_600_000})),
        ("gc", "gcra", json!({"rate": 0.001})),
    ] {
        let mut body = json!({"name": name, "owner_app": "shop", "algorithm": algorithm,
                              "scope": "per_key", "max_permits": 3});
        body.as_object_mut()
            .unwrap()
            .extend(param.as_object().unwrap().clone());
        app.create_policy(body).await;
        for key in ["ann", "bob", "cy"] {
            assert_eq!(
                status_for(&app, &shop, name, Some(key)).await,
                StatusCode::OK,
                "{name}"
            );
        }
        let r = app
            .send(
                "DELETE",
                &format!("/api/v1/policies/{name}"),
                &app.admin_token,
                None,
            )
            .await;
        expect_status(r, StatusCode::NO_CONTENT).await;
    }
    let buckets = keyed_buckets(&app).await;
    assert_eq!(buckets.len(), 18);
    assert!(
        buckets.iter().all(|(_, ttl)| *ttl > 0),
        "every bucket expires: {buckets:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_keyed_policys_hash_is_never_decided_as_one_global_bucket() {
    let (app, _, _) = two_apps(Db::Sqlite).await;
    app.create_policy(
        json!({"name": "orders", "owner_app": "shop", "scope": "per_key",
                             "rate": 1, "max_permits": 5}),
    )
    .await;
    // A server that does not know the policy yet tries Redis' global script: it answers
    // "no such policy" for a keyed hash, rather than deciding on one shared bucket.
    let core = app.core().await;
    let outcome = ratekeeper_limiter::Batcher::new(core.limiter.clone())
        .acquire(
            &ratekeeper::domain::PolicyName::parse("orders").unwrap(),
            ratekeeper::domain::Algorithm::TokenBucket,
            ratekeeper::domain::Permits::parse(1).unwrap(),
            &ratekeeper::domain::AppSlug::parse("shop").unwrap(),
            None,
        )
        .await
        .unwrap();
    assert_eq!(outcome, ratekeeper_limiter::AcquireOutcome::NoSuchPolicy);
    let state = app
        .get("/api/v1/policies/orders/state", &app.admin_token)
        .await;
    invalid(state, "key").await;
}
