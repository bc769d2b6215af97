//! When what ratekeeper depends on fails: Redis stalled, stopped, restarted empty or
//! flushed; a Redis Cluster not there yet at start; the SQL database cut off. Each test
//! takes down a server of its own (see `helpers::processes`), never the shared ones.
//! What clients should see is in the README, "When things fail".

mod cluster;
mod redis_lost;
mod redis_stalled;
mod sentinel;
mod sql;

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::helpers::*;

/// A server on `redis_url` with app "shop" (and a key), app "other" (and a key), and two
/// policies of shop's that only shop may use: "closed.p" (fails closed) and "open.p"
/// (fails open). Returns the app and the two keys.
async fn shop_and_other(redis_url: &str, timeout_ms: u64) -> (TestApp, String, String) {
    let db = fresh_database(Db::Sqlite).await;
    let mut s = settings(&db, redis_url, &test_prefix("outage"));
    s.redis_timeout_ms = timeout_ms;
    let app = spawn_app_with(s).await;
    app.create_app("shop").await;
    app.create_app("other").await;
    let shop = app.create_key("shop").await;
    let other = app.create_key("other").await;
    for (name, mode) in [("closed.p", "closed"), ("open.p", "open")] {
        app.create_policy(json!({
            "name": name, "owner_app": "shop", "rate": 1000, "max_permits": 1000,
            "failure_mode": mode
        }))
        .await;
    }
    (app, shop, other)
}

/// The status and body of an acquire of one permit.
async fn acquire(app: &TestApp, key: &str, resource: &str) -> (StatusCode, Value) {
    let r = app.acquire(key, resource, 1).await;
    let status = r.status();
    (status, r.json().await.unwrap_or(Value::Null))
}

async fn readyz(app: &TestApp) -> (StatusCode, Value) {
    let r = app.client.get(app.url("/readyz")).send().await.unwrap();
    (r.status(), r.json().await.unwrap())
}
