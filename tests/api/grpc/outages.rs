//! Redis stalled: each descriptor answers by its policy's own failure mode (Envoy's global
//! `failure_mode_deny` never comes into play, the call is answered); and a Redis Cluster,
//! with buckets on every slot.

use super::*;

/// gRPC over a Redis of the test's own, with a fail-open, a fail-closed and a shadow
/// (fail-closed) policy.
async fn three_failure_modes(redis_url: &str) -> (TestApp, String) {
    let db = fresh_database(Db::Sqlite).await;
    let mut s = grpc_settings(&db, redis_url, &test_prefix("grpc-outage"));
    s.redis_timeout_ms = 100;
    let app = spawn_app_with(s).await;
    app.create_app("shop").await;
    let key = app.create_key("shop").await;
    for (name, failure_mode, mode) in [
        ("open.p", "open", "enforce"),
        ("closed.p", "closed", "enforce"),
        ("shadow.p", "closed", "shadow"),
    ] {
        app.create_policy(json!({"name": name, "owner_app": "shop", "rate": 1000,
                                 "max_permits": 1000, "failure_mode": failure_mode,
                                 "mode": mode}))
            .await;
    }
    (app, key)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_redis_answers_each_descriptor_by_its_policys_failure_mode() {
    let redis = RedisProcess::start().await;
    let (app, key) = three_failure_modes(&redis.url()).await;
    let named = |name: &str| vec![descriptor(&[("generic_key", name)])];
    for name in ["open.p", "closed.p", "shadow.p"] {
        assert_eq!(
            overall(&ask(&app, &key, named(name)).await),
            Code::Ok,
            "{name}"
        );
    }

    redis.stall();
    let open = ask(&app, &key, named("open.p")).await;
    assert_eq!(overall(&open), Code::Ok, "fails open: {open:?}");
    assert_eq!(
        open.statuses[0]
            .current_limit
            .as_ref()
            .map(|l| l.name.as_str()),
        Some("open.p")
    );
    assert_eq!(
        header(&open, "ratelimit-policy"),
        Some(r#""open.p";q=1000"#)
    );
    let closed = ask(&app, &key, named("closed.p")).await;
    assert_eq!(
        overall(&closed),
        Code::OverLimit,
        "fails closed: {closed:?}"
    );
    assert_eq!(code(&closed.statuses[0]), Code::OverLimit);
    let shadow = ask(&app, &key, named("shadow.p")).await;
    assert_eq!(
        overall(&shadow),
        Code::Ok,
        "shadow mode never refuses: {shadow:?}"
    );
    // Beside an unknown descriptor, only the failing-closed one is over the limit.
    let mixed = ask(
        &app,
        &key,
        vec![
            descriptor(&[("remote_address", "10.0.0.1")]),
            descriptor(&[("generic_key", "closed.p")]),
        ],
    )
    .await;
    assert_eq!(
        (code(&mixed.statuses[0]), code(&mixed.statuses[1])),
        (Code::Ok, Code::OverLimit)
    );
    // Several policies at once (all or nothing): each descriptor by its own failure mode.
    let together = ask(
        &app,
        &key,
        vec![
            descriptor(&[("generic_key", "open.p")]),
            descriptor(&[("generic_key", "closed.p")]),
            descriptor(&[("generic_key", "shadow.p")]),
        ],
    )
    .await;
    assert_eq!(
        together.statuses.iter().map(code).collect::<Vec<_>>(),
        vec![Code::Ok, Code::OverLimit, Code::Ok],
        "{together:?}"
    );
    assert!(
        app.metric("ratekeeper_decisions_total{outcome=\"unavailable\",protocol=\"grpc\"}")
            .await
            .is_some_and(|n| n >= 2.0),
        "counted as gRPC decisions"
    );

    redis.resume();
    let decided = eventually(std::time::Duration::from_secs(10), || async {
        overall(&ask(&app, &key, named("closed.p")).await) == Code::Ok
    })
    .await;
    assert!(decided, "decided by Redis again once it answers");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_redis_cluster_grpc_and_http_share_buckets_on_every_slot() {
    let cluster = LocalCluster::start().await;
    let db = fresh_database(Db::Sqlite).await;
    let app = spawn_app_with(grpc_settings(&db, &cluster.url(), "grpc-cluster")).await;
    app.create_app("shop").await;
    let key = app.create_key("shop").await;
    app.create_policy(
        json!({"name": "users", "owner_app": "shop", "scope": "per_key",
                             "rate": 0.001, "max_permits": 3}),
    )
    .await;
    app.create_policy(
        json!({"name": "whole.site", "owner_app": "shop", "rate": 0.001,
                             "max_permits": 1000}),
    )
    .await;
    let users: Vec<String> = (0..60).map(|i| format!("user-{i}")).collect();
    for user in &users {
        let reply = ask(
            &app,
            &key,
            vec![descriptor(&[("generic_key", "users"), ("user", user)])],
        )
        .await;
        assert_eq!(reply.statuses[0].limit_remaining, 2, "{user}: {reply:?}");
        // HTTP reaches the same bucket, on whichever master holds it.
        let (status, body) = http_acquire_keyed(&app, &key, "users", user).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        assert_eq!(body["remaining"], 1, "{user}: {body}");
    }
    let reply = ask(&app, &key, vec![descriptor(&[("resource", "whole.site")])]).await;
    assert_eq!(reply.statuses[0].limit_remaining, 999);
    let mut per_master = Vec::new();
    for port in cluster.ports() {
        let out = std::process::Command::new("redis-cli")
            .args([
                "-p",
                &port.to_string(),
                "--scan",
                "--pattern",
                "grpc-cluster:k:*",
            ])
            .output()
            .unwrap();
        per_master.push(String::from_utf8_lossy(&out.stdout).lines().count());
    }
    assert_eq!(
        per_master.iter().sum::<usize>(),
        users.len(),
        "{per_master:?}"
    );
    assert!(
        per_master.iter().all(|n| *n > 0),
        "buckets on every master: {per_master:?}"
    );
}
