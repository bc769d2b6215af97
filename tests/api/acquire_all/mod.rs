//! Several limits in one acquire (`POST /v1/acquire` with `all`), checks (`permits: 0`)
//! and refunds (`POST /v1/refund`), against the real server and Redis (and a local Redis
//! Cluster for items on several slots): a denied call leaves every bucket exactly as it
//! was, a check takes nothing, a refund never fills a bucket above its capacity nor a
//! window below 0, and every bad input is a problem naming `all[i]`.

mod all_or_nothing;
mod check;
mod cluster;
mod inputs;
mod outage;
mod refund;

use reqwest::{Response, StatusCode};
use serde_json::{Value, json};

use crate::helpers::*;

const ALGORITHMS: [&str; 6] = [
    "token_bucket",
    "fixed_window",
    "sliding_log",
    "sliding_window",
    "concurrency",
    "gcra",
];

/// A policy of `algorithm` and `scope` with capacity `max`, slow enough not to refill
/// noticeably during the test (a permit per 1,000 s; windows and leases of a day).
fn policy(name: &str, algorithm: &str, scope: &str, max: i64) -> Value {
    let mut body = json!({"name": name, "owner_app": "shop", "algorithm": algorithm,
                          "scope": scope, "max_permits": max});
    match algorithm {
        "token_bucket" | "gcra" => body["rate"] = json!(0.001),
        "concurrency" => body["lease_ttl_ms"] = json!(86_400_000),
        _ => body["window_ms"] = json!(86_400_000),
    }
    body
}

/// A server with the app "shop" and its API key.
async fn shop(app: &TestApp) -> String {
    app.create_app("shop").await;
    app.create_key("shop").await
}

/// The key an item of `scope` names: "ann" for per_key, none otherwise.
fn key_of(scope: &str) -> Option<&'static str> {
    (scope == "per_key").then_some("ann")
}

/// One item of `all`.
fn item(resource: &str, permits: i64, key: Option<&str>) -> Value {
    let mut item = json!({"resource": resource, "permits": permits});
    if let Some(key) = key {
        item["key"] = json!(key);
    }
    item
}

async fn acquire_all(app: &TestApp, api_key: &str, items: Vec<Value>) -> Response {
    app.post("/v1/acquire", api_key, json!({ "all": items }))
        .await
}

/// The permits an acquire could take now from the bucket an item of `scope` draws on (the
/// caller "ann" for per_key, the app "shop" for per_app), as the owner's state API tells.
async fn permits_now(app: &TestApp, name: &str, scope: &str) -> f64 {
    let path = match scope {
        "per_key" => format!("/api/v1/policies/{name}/state?key=ann"),
        "per_app" => format!("/api/v1/policies/{name}/state?key=shop"),
        _ => format!("/api/v1/policies/{name}/state"),
    };
    let state = expect_status(app.get(&path, &app.admin_token).await, StatusCode::OK).await;
    state["current_permits"]
        .as_f64()
        .unwrap_or_else(|| panic!("{name}: {state}"))
}

/// Whether two readings of a bucket are the same bucket: equal but for what refills in the
/// time between them (less than a hundredth of a permit at a permit per 1,000 s).
fn same(before: f64, after: f64) -> bool {
    (after - before).abs() < 0.01
}
