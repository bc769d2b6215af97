//! A key works on every instance from the moment it is shown: the instance that creates
//! it announces it in Redis, and another instance that has not reloaded its keys yet
//! accepts it from there (src/acquire/new_keys.rs). Here the other instance is a core
//! that never hears a change notice nor reconciles on its own, so only the announcement
//! can tell it of a key.

use ratekeeper::acquire::{Acquirer, KeyRefused, Protocol};
use ratekeeper::startup::Core;
use reqwest::StatusCode;
use serde_json::json;

use crate::helpers::*;

fn acquirer_of(core: &Core) -> Acquirer {
    Acquirer::new(
        core.limiter.clone(),
        core.snapshot.clone(),
        core.denials.clone(),
        core.metrics.clone(),
        core.tallies.for_worker(),
        Protocol::Http,
    )
}

/// An instance that read its keys before the test's keys were made, and then no more.
async fn deaf_instance(app: &TestApp) -> (Core, Acquirer) {
    let core = app.core().await;
    core.sync.reconcile_once().await.expect("first pass");
    let acquirer = acquirer_of(&core);
    (core, acquirer)
}

async fn announced_keys(app: &TestApp) -> Vec<(String, String)> {
    let mut conn = app.redis.clone();
    redis::cmd("HGETALL")
        .arg(format!("{}:new_keys", app.settings.redis_prefix))
        .query_async(&mut conn)
        .await
        .unwrap()
}

/// The id of the application's first key.
async fn first_key_id(app: &TestApp) -> String {
    let r = app.get("/api/v1/apps/shop", &app.admin_token).await;
    let shop = expect_status(r, StatusCode::OK).await;
    shop["keys"][0]["id"].as_str().unwrap().to_owned()
}

async fn revoke_first_key(app: &TestApp) {
    let id = first_key_id(app).await;
    let path = format!("/api/v1/apps/shop/keys/{id}");
    let r = app.send("DELETE", &path, &app.admin_token, None).await;
    expect_status(r, StatusCode::NO_CONTENT).await;
}

#[tokio::test]
async fn a_new_or_rotated_key_is_accepted_by_an_instance_that_has_not_reloaded() {
    let app = spawn_app(Db::Sqlite).await;
    app.create_app("shop").await;
    let (_core, other) = deaf_instance(&app).await;

    let key = app.create_key("shop").await;
    assert!(
        matches!(other.client(&key), Err(KeyRefused::Unknown)),
        "the other instance's snapshot does not hold the key"
    );
    let entry = other.announced_client(&key).await.expect("accepted");
    assert_eq!(entry.app.as_str(), "shop");
    // Now it is in the snapshot: the next request reads no Redis.
    assert!(other.client(&key).is_ok());

    let id = first_key_id(&app).await;
    let rotated = app
        .post(
            &format!("/api/v1/apps/shop/keys/{id}/rotate"),
            &app.admin_token,
            json!({"old_key_expires_at": "now"}),
        )
        .await;
    let new_key = expect_status(rotated, StatusCode::CREATED).await["key"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(other.announced_client(&new_key).await.is_ok());
}

#[tokio::test]
async fn a_revoked_key_is_not_accepted_from_its_announcement() {
    let app = spawn_app(Db::Sqlite).await;
    app.create_app("shop").await;
    let (_core, other) = deaf_instance(&app).await;
    let key = app.create_key("shop").await;
    assert_eq!(announced_keys(&app).await.len(), 1, "the key was announced");

    revoke_first_key(&app).await;
    assert!(
        announced_keys(&app).await.is_empty(),
        "revoking drops the announcements"
    );
    assert!(matches!(
        other.announced_client(&key).await,
        Err(KeyRefused::Unknown)
    ));
}

#[tokio::test]
async fn an_announcement_from_before_the_last_read_of_the_keys_is_refused() {
    // As if dropping the announcements had failed when the key was revoked (Redis away):
    // an instance that read the keys after the announcement knows better than it.
    let app = spawn_app(Db::Sqlite).await;
    app.create_app("shop").await;
    let (core, other) = deaf_instance(&app).await;
    let key = app.create_key("shop").await;
    let kept = announced_keys(&app).await;
    revoke_first_key(&app).await;
    let mut conn = app.redis.clone();
    let _: () = redis::cmd("HSET")
        .arg(format!("{}:new_keys", app.settings.redis_prefix))
        .arg(&kept[0].0)
        .arg(&kept[0].1)
        .query_async(&mut conn)
        .await
        .unwrap();

    // Announced after this instance last read its keys: taken at its word for now...
    assert!(other.announced_client(&key).await.is_ok());
    // ...but not once it has read SQL again (where the key is revoked), although the
    // announcement is still there: here a read that began just past the 1 s allowed
    // between instances' clocks after the announcement.
    let announced_ms: i64 = kept[0].1.rsplit(' ').next().unwrap().parse().unwrap();
    core.snapshot.replace_keys(Vec::new(), announced_ms + 1_001);
    assert!(matches!(
        other.announced_client(&key).await,
        Err(KeyRefused::Unknown)
    ));
    // A read that began within the allowance leaves the announcement its word.
    core.snapshot.replace_keys(Vec::new(), announced_ms + 999);
    assert!(other.announced_client(&key).await.is_ok());
}

#[tokio::test]
async fn an_acquire_is_served_with_an_announced_key_over_http() {
    // The HTTP API takes the same road on a key its snapshot lacks: an announcement
    // written by hand for a key SQL never held shows that the road is Redis.
    let app = spawn_app(Db::Sqlite).await;
    let _ = app.shop_with_policy("orders.create", 100.0, 100).await;
    let key = "rk_made_up_for_this_test";
    let digest = hex::encode(ratekeeper::auth::digest_secret(key));
    let announced_ms = chrono::Utc::now().timestamp_millis() + 5_000;
    let mut conn = app.redis.clone();
    let _: () = redis::cmd("HSET")
        .arg(format!("{}:new_keys", app.settings.redis_prefix))
        .arg(&digest)
        .arg(format!("0123456789abcdef shop - {announced_ms}"))
        .query_async(&mut conn)
        .await
        .unwrap();
    expect_status(app.acquire(key, "orders.create", 1).await, StatusCode::OK).await;
    expect_problem(
        app.acquire("rk_never_announced", "orders.create", 1).await,
        StatusCode::UNAUTHORIZED,
    )
    .await;
}
