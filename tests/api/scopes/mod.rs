//! Limits per caller: `per_app` policies (a bucket per calling application) and `per_key`
//! policies (a bucket per key the client names), their overrides, and every algorithm in
//! each, against real Redis (and a local Redis Cluster for how buckets spread).

mod algorithms;
mod cluster;
mod inputs;
mod isolation;
mod lifecycle;
mod overrides;
mod support;
mod top;

use reqwest::{Response, StatusCode};
use serde_json::{Value, json};

use crate::helpers::*;

/// A server with apps "shop" and "other" and an API key for each.
async fn two_apps(db: Db) -> (TestApp, String, String) {
    let app = spawn_app(db).await;
    app.create_app("shop").await;
    app.create_app("other").await;
    let shop = app.create_key("shop").await;
    let other = app.create_key("other").await;
    (app, shop, other)
}

/// An acquire naming `caller` as its key (or no key).
async fn acquire_for(
    app: &TestApp,
    api_key: &str,
    resource: &str,
    permits: i64,
    caller: Option<&str>,
) -> Response {
    let mut body = json!({"resource": resource, "permits": permits});
    if let Some(caller) = caller {
        body["key"] = json!(caller);
    }
    app.post("/v1/acquire", api_key, body).await
}

/// The status of an acquire of one permit for `caller`.
async fn status_for(
    app: &TestApp,
    api_key: &str,
    resource: &str,
    caller: Option<&str>,
) -> StatusCode {
    acquire_for(app, api_key, resource, 1, caller)
        .await
        .status()
}

/// The keyed buckets this test's server has in Redis, with their TTLs in ms.
async fn keyed_buckets(app: &TestApp) -> Vec<(String, i64)> {
    let mut conn = app.redis.clone();
    let pattern = format!("{}:k:*", app.settings.redis_prefix);
    let mut keys: Vec<String> = Vec::new();
    let mut cursor: u64 = 0;
    loop {
        let (next, batch): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(&pattern)
            .arg("COUNT")
            .arg(1000)
            .query_async(&mut conn)
            .await
            .unwrap();
        keys.extend(batch);
        if next == 0 {
            break;
        }
        cursor = next;
    }
    let mut out = Vec::new();
    for key in keys {
        let ttl: i64 = redis::cmd("PTTL")
            .arg(&key)
            .query_async(&mut conn)
            .await
            .unwrap();
        out.push((key, ttl));
    }
    out
}

/// A 422 problem naming `field` first.
async fn invalid(response: Response, field: &str) -> Value {
    let problem = expect_problem(response, StatusCode::UNPROCESSABLE_ENTITY).await;
    assert_eq!(problem["field"], field, "{problem}");
    problem
}
