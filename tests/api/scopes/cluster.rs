//! On a Redis Cluster, one per_key policy's buckets spread over every master: a policy
//! with millions of users is not one hot shard.

use futures_util::StreamExt;

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_policys_buckets_land_on_every_master() {
    let cluster = LocalCluster::start().await;
    let db = fresh_database(Db::Sqlite).await;
    let app = spawn_app_with(settings(&db, &cluster.url(), "spread")).await;
    app.create_app("shop").await;
    let shop = app.create_key("shop").await;
    app.create_policy(
        json!({"name": "orders", "owner_app": "shop", "scope": "per_key",
                             "rate": 0.001, "max_permits": 5}),
    )
    .await;
    let keys: Vec<String> = (0..3000).map(|i| format!("user-{i}")).collect();
    let answers: Vec<StatusCode> = futures_util::stream::iter(&keys)
        .map(|k| status_for(&app, &shop, "orders", Some(k)))
        .buffer_unordered(32)
        .collect()
        .await;
    assert!(answers.iter().all(|s| *s == StatusCode::OK));
    let mut per_master = Vec::new();
    for port in cluster.ports() {
        let out = std::process::Command::new("redis-cli")
            .args(["-p", &port.to_string(), "--scan", "--pattern", "spread:k:*"])
            .output()
            .unwrap();
        per_master.push(String::from_utf8_lossy(&out.stdout).lines().count());
    }
    eprintln!("keyed buckets per master: {per_master:?}");
    assert_eq!(per_master.iter().sum::<usize>(), 3000, "{per_master:?}");
    assert!(
        per_master.iter().all(|n| *n >= 600),
        "each master holds at least 20%: {per_master:?}"
    );

    // The policy's page looks one caller's bucket up (another slot than the policy's)
    // alongside its usage and top callers.
    let mut admin = app.sign_in_as_admin().await;
    let page = admin.get("/policies/orders/overview?key=user-7").await;
    page.assert_status(StatusCode::OK);
    assert!(page.has("data-fact=\"current\">4 of 5"), "{}", page.body);
    assert!(page.has("id=\"usage\""));
}
