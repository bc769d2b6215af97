//! Each caller's bucket is its own: one app (or key) draining its bucket leaves the
//! others' full.

use futures_util::StreamExt;

use super::*;

async fn per_app_isolation(db: Db) {
    let (app, shop, other) = two_apps(db).await;
    app.create_policy(json!({
        "name": "search", "owner_app": "shop", "scope": "per_app", "rate": 0.001,
        "max_permits": 3, "allowed_apps": ["shop", "other"]
    }))
    .await;
    for _ in 0..3 {
        assert_eq!(
            status_for(&app, &shop, "search", None).await,
            StatusCode::OK
        );
    }
    assert_eq!(
        status_for(&app, &shop, "search", None).await,
        StatusCode::TOO_MANY_REQUESTS,
        "shop drained its own bucket"
    );
    let r = acquire_for(&app, &other, "search", 1, None).await;
    let ratelimit = r.headers()["ratelimit"].to_str().unwrap().to_owned();
    let body = expect_status(r, StatusCode::OK).await;
    assert_eq!(body["remaining"], 2, "other's bucket is full: {body}");
    assert!(
        ratelimit.ends_with(";pk=:b3RoZXI=:"),
        "other's bucket: {ratelimit}"
    );
}
crate::on_every_backend!(per_app, per_app_isolation);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_keys_each_have_a_bucket_of_their_own() {
    let (app, shop, other) = two_apps(Db::Sqlite).await;
    app.create_policy(json!({
        "name": "orders", "owner_app": "shop", "scope": "per_key", "rate": 0.001,
        "max_permits": 2, "allowed_apps": ["shop", "other"]
    }))
    .await;
    let keys: Vec<String> = (0..1000).map(|i| format!("user-{i}")).collect();
    let firsts: Vec<Response> = futures_util::stream::iter(&keys)
        .map(|k| acquire_for(&app, &shop, "orders", 2, Some(k)))
        .buffer_unordered(32)
        .collect()
        .await;
    assert!(
        firsts.iter().all(|r| r.status() == StatusCode::OK),
        "every key's bucket is full"
    );
    let seconds: Vec<Response> = futures_util::stream::iter(&keys)
        .map(|k| acquire_for(&app, &other, "orders", 1, Some(k)))
        .buffer_unordered(32)
        .collect()
        .await;
    assert!(
        seconds
            .iter()
            .all(|r| r.status() == StatusCode::TOO_MANY_REQUESTS),
        "and each is drained by its own acquire, whichever app asks (keys are shared)"
    );
    let r = acquire_for(&app, &shop, "orders", 1, Some("user-1000")).await;
    let ratelimit = r.headers()["ratelimit"].to_str().unwrap().to_owned();
    assert_eq!(r.status(), StatusCode::OK);
    assert!(ratelimit.contains(";pk=:dXNlci0xMDAw:"), "{ratelimit}");
    assert_eq!(keyed_buckets(&app).await.len(), 1001);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thirty_two_clients_on_one_key_never_get_more_than_the_bucket_allows() {
    let (app, shop, _) = two_apps(Db::Sqlite).await;
    app.create_policy(json!({
        "name": "hot", "owner_app": "shop", "scope": "per_key", "rate": 20,
        "max_permits": 10
    }))
    .await;
    let started = std::time::Instant::now();
    let clients = (0..32).map(|_| async {
        let mut granted = 0;
        for _ in 0..20 {
            if status_for(&app, &shop, "hot", Some("the-one")).await == StatusCode::OK {
                granted += 1;
            }
        }
        granted
    });
    let granted: i64 = futures_util::future::join_all(clients)
        .await
        .into_iter()
        .sum();
    // The test's clock runs at least as long as Redis' between the first and last
    // decision: the bound below can only be generous, never too tight.
    let elapsed = started.elapsed().as_secs_f64();
    let allowed = 10.0 + 20.0 * elapsed;
    assert!(
        granted as f64 <= allowed,
        "{granted} granted, at most {allowed:.1} allowed"
    );
    assert!(granted >= 10, "the full bucket at least: {granted}");
}
