//! On a Redis Cluster the items of one call sit on several hash slots: one call per slot,
//! and the slots that granted give back when another denied. A denied call leaves every
//! bucket, on every master, as it was.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_denied_call_across_slots_leaves_every_bucket_as_it_was() {
    let cluster = LocalCluster::start().await;
    let db = fresh_database(Db::Sqlite).await;
    let app = spawn_app_with(settings(&db, &cluster.url(), &test_prefix("all"))).await;
    let shop = shop(&app).await;
    // Policies of every algorithm, global and per_key: their keys spread over the slots.
    let mut items = Vec::new();
    for algorithm in ALGORITHMS {
        for scope in ["global", "per_key"] {
            let name = format!("{scope}.{algorithm}");
            app.create_policy(policy(&name, algorithm, scope, 5)).await;
            items.push((name, scope));
        }
    }
    app.create_policy(policy("tight", "fixed_window", "per_key", 1))
        .await;
    let asked = |permits: i64, with_tight: bool| {
        let mut all: Vec<Value> = items
            .iter()
            .map(|(name, scope)| item(name, permits, key_of(scope)))
            .collect();
        if with_tight {
            all.push(item("tight", 1, Some("ann")));
        }
        all
    };
    expect_status(
        acquire_all(&app, &shop, asked(1, true)).await,
        StatusCode::OK,
    )
    .await;
    let mut before = Vec::new();
    for (name, scope) in &items {
        before.push(permits_now(&app, name, scope).await);
    }
    for _ in 0..3 {
        let r = acquire_all(&app, &shop, asked(2, true)).await;
        let denied = expect_status(r, StatusCode::TOO_MANY_REQUESTS).await;
        for (i, (name, _)) in items.iter().enumerate() {
            assert_eq!(denied["results"][i]["remaining"], 4, "{name}: {denied}");
        }
    }
    for ((name, scope), before) in items.iter().zip(before) {
        let after = permits_now(&app, name, scope).await;
        assert!(same(before, after), "{name}: {before} then {after}");
    }
    // Without the item that denies, every slot grants.
    let granted = expect_status(
        acquire_all(&app, &shop, asked(2, false)).await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(granted["results"][0]["remaining"], 2, "{granted}");
}
