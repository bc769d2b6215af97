//! Redis behind Sentinel (`redis+sentinel://`): the server finds the master through the
//! sentinels, and after a failover (asked for, or the master killed) every part of it moves
//! to the new master by itself: the acquire path, the sync's writes and the readiness
//! check. During the switch each policy answers by its failure mode.

use std::time::Duration;

use super::*;

fn exists(port: u16, key: &str) -> bool {
    redis_cli(port, &["exists", key]).trim() == "1"
}

/// Whether an acquire of `resource` is decided by Redis now (not by the failure mode).
async fn decided(app: &TestApp, key: &str, resource: &str) -> bool {
    let (status, body) = acquire(app, key, resource).await;
    status == StatusCode::OK && body["degraded"].is_null() && body["remaining"].is_i64()
}

/// Whether acquires of `resource` come to be decided by Redis within 30 s.
async fn eventually_decided(app: &TestApp, key: &str, resource: &str) -> bool {
    eventually(Duration::from_secs(30), || decided(app, key, resource)).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_failover_every_part_of_the_server_uses_the_new_master() {
    let sentinel = LocalSentinel::start().await;
    let (app, shop, _) = shop_and_other(&sentinel.url(), 500).await;
    let old = sentinel.master_port();
    assert!(decided(&app, &shop, "closed.p").await);
    assert!(
        exists(old, &app.policy_key("closed.p")),
        "written to the master"
    );
    assert_eq!(readyz(&app).await.0, StatusCode::OK);

    let new = sentinel.fail_over().await;
    assert_ne!(new, old);
    // The old master is told it is a replica a moment after the sentinels promote the new
    // one; from then on it refuses writes.
    assert!(
        eventually(Duration::from_secs(30), || async move {
            redis_cli(old, &["role"]).starts_with("slave")
        })
        .await,
        "the old master became a replica"
    );
    assert!(
        eventually_decided(&app, &shop, "closed.p").await,
        "acquires decided on the new master"
    );
    // A policy made after the switch reaches the new master (the sync's connection moved
    // too), and is decided there.
    app.create_policy(json!({
        "name": "after.p", "owner_app": "shop", "rate": 1, "max_permits": 2,
        "failure_mode": "closed"
    }))
    .await;
    assert!(
        exists(new, &app.policy_key("after.p")),
        "written to the new master"
    );
    let (status, body) = acquire(&app, &shop, "after.p").await;
    assert_eq!((status, &body["remaining"]), (StatusCode::OK, &json!(1)));
    assert_eq!(readyz(&app).await.0, StatusCode::OK);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn when_the_master_dies_the_policies_answer_by_failure_mode_until_the_replica_takes_over() {
    let mut sentinel = LocalSentinel::start().await;
    let (app, shop, _) = shop_and_other(&sentinel.url(), 500).await;
    assert!(decided(&app, &shop, "closed.p").await);
    let old = sentinel.master_port();
    sentinel.kill_data_node(old);

    // Until the sentinels agree the master is down and promote the replica, each policy
    // answers by its failure mode: the one that fails open grants, the closed one refuses.
    let (status, body) = acquire(&app, &shop, "open.p").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, body) = acquire(&app, &shop, "closed.p").await;
    assert!(
        status == StatusCode::OK || status == StatusCode::SERVICE_UNAVAILABLE,
        "{status} {body}"
    );

    let new = sentinel.wait_for_master_other_than(old).await;
    assert!(
        eventually_decided(&app, &shop, "closed.p").await,
        "acquires decided on the promoted replica"
    );
    assert!(exists(new, &app.policy_key("closed.p")));
    assert_eq!(readyz(&app).await.0, StatusCode::OK);
}
