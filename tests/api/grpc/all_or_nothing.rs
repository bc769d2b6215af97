//! Several descriptors naming policies are decided all or nothing, and `hits_addend` 0 is
//! a check (`grpc::decide_all`, on the all-or-nothing acquire).

use super::*;

/// A global policy's live permits, as the admin API reads them.
async fn permits(app: &TestApp, policy: &str) -> i64 {
    let path = format!("/api/v1/policies/{policy}/state");
    let state = expect_status(app.get(&path, &app.admin_token).await, StatusCode::OK).await;
    state["current_permits"].as_f64().unwrap().floor() as i64
}

/// Two global policies and a per_key one, none refilling during the test.
async fn three_policies() -> (TestApp, String) {
    let (app, key) = shop_over_grpc().await;
    for (name, max, scope) in [
        ("burst", 5, "global"),
        ("daily", 2, "global"),
        ("per.user", 3, "per_key"),
    ] {
        app.create_policy(json!({"name": name, "owner_app": "shop", "rate": 0.0001,
                                 "max_permits": max, "scope": scope}))
            .await;
    }
    (app, key)
}

fn all_three() -> Vec<RateLimitDescriptor> {
    vec![
        descriptor(&[("generic_key", "burst")]),
        descriptor(&[("generic_key", "daily")]),
        descriptor(&[("generic_key", "per.user"), ("user", "ann")]),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn several_descriptors_are_decided_all_or_nothing() {
    let (app, key) = three_policies().await;
    for _ in 0..2 {
        let reply = ask(&app, &key, all_three()).await;
        assert_eq!(overall(&reply), Code::Ok, "{reply:?}");
        assert!(reply.statuses.iter().all(|s| code(s) == Code::Ok));
    }
    // "daily" is spent: the call is denied, and nothing is taken from the others.
    let reply = ask(&app, &key, all_three()).await;
    assert_eq!(overall(&reply), Code::OverLimit, "{reply:?}");
    assert_eq!(code(&reply.statuses[1]), Code::OverLimit);
    assert_eq!(reply.statuses.len(), 3);
    assert_eq!(permits(&app, "burst").await, 3);
    assert_eq!(permits(&app, "daily").await, 0);
    assert_eq!(bucket_permits(&app, "per.user", "ann").await.floor(), 1.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_denied_call_leaves_every_bucket_as_it_was() {
    let (app, key) = three_policies().await;
    // Asking more than "daily" holds, beside the others: denied, nothing taken anywhere.
    let mut descriptors = all_three();
    descriptors[1] = with_hits(descriptor(&[("generic_key", "daily")]), 2);
    ask(&app, &key, descriptors.clone()).await;
    let reply = ask(&app, &key, descriptors).await;
    assert_eq!(overall(&reply), Code::OverLimit, "{reply:?}");
    assert_eq!(permits(&app, "burst").await, 4);
    assert_eq!(permits(&app, "daily").await, 0);
    assert_eq!(bucket_permits(&app, "per.user", "ann").await.floor(), 2.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hits_addend_zero_is_a_check_that_consumes_nothing() {
    let (app, key) = three_policies().await;
    let check = || vec![with_hits(descriptor(&[("generic_key", "daily")]), 0)];
    for _ in 0..3 {
        let reply = ask(&app, &key, check()).await;
        assert_eq!(overall(&reply), Code::Ok, "{reply:?}");
        assert_eq!(reply.statuses[0].limit_remaining, 2);
    }
    assert_eq!(permits(&app, "daily").await, 2);
    ask(
        &app,
        &key,
        vec![with_hits(descriptor(&[("generic_key", "daily")]), 2)],
    )
    .await;
    let reply = ask(&app, &key, check()).await;
    assert_eq!(
        overall(&reply),
        Code::OverLimit,
        "a check of a spent bucket"
    );
    assert_eq!(permits(&app, "daily").await, 0);
}
