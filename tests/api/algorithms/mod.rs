//! The six limiting algorithms as their users meet them over HTTP (README, "Algorithms"
//! and the acquire API): each policy kind with exactly its own parameters through the admin API, its
//! acquires and their replies, concurrency leases given back with `POST /v1/release`, a
//! change of algorithm or a deletion discarding the old state in Redis, the live state,
//! and the console's policy form.
//!
//! One file per area: `parameters` (each algorithm with exactly its own, through the
//! admin API), `acquire` (the replies, whatever the algorithm), `leases` (concurrency
//! leases and `POST /v1/release`), `changes` (a change of algorithm or a deletion discards
//! the old state), `live_state` and `console_form`. The helpers below are shared by them.

use std::collections::BTreeSet;

use reqwest::{Response, StatusCode};
use serde_json::{Value, json};

use crate::helpers::*;

mod acquire;
mod changes;
mod console_form;
mod leases;
mod live_state;
mod parameters;

const ALGORITHMS: [&str; 6] = [
    "token_bucket",
    "fixed_window",
    "sliding_log",
    "sliding_window",
    "concurrency",
    "gcra",
];

/// The longest window or lease lifetime a policy may have.
const DAY_MS: i64 = 86_400_000;

/// The fields every policy has in JSON, whatever its algorithm.
const COMMON_FIELDS: [&str; 15] = [
    "name",
    "owner_app",
    "algorithm",
    "max_permits",
    "allowed_apps",
    "failure_mode",
    "enabled",
    "mode",
    "description",
    "scope",
    "overrides",
    "descriptors",
    "version",
    "created_at",
    "updated_at",
];

/// The parameter of its own that an algorithm takes besides `max_permits`.
fn own_parameter(algorithm: &str) -> &'static str {
    match algorithm {
        "token_bucket" | "gcra" => "rate",
        "fixed_window" | "sliding_log" | "sliding_window" => "window_ms",
        "concurrency" => "lease_ttl_ms",
        other => panic!("no algorithm {other}"),
    }
}

/// A valid value of a parameter.
fn value_of(parameter: &str) -> Value {
    match parameter {
        "rate" => json!(0.001),
        "window_ms" => json!(DAY_MS),
        "lease_ttl_ms" => json!(3_600_000),
        other => panic!("no parameter {other}"),
    }
}

/// A policy of shop with 3 permits that gives none back during a test: one permit per
/// 1000 s, a day-long window, leases of an hour.
fn three_permits(name: &str, algorithm: &str) -> Value {
    let mut policy = json!({
        "name": name, "owner_app": "shop", "algorithm": algorithm, "max_permits": 3
    });
    let parameter = own_parameter(algorithm);
    policy[parameter] = value_of(parameter);
    policy
}

fn field_names(value: &Value) -> BTreeSet<String> {
    value
        .as_object()
        .unwrap_or_else(|| panic!("not an object: {value}"))
        .keys()
        .cloned()
        .collect()
}

fn names(list: &[&str]) -> BTreeSet<String> {
    list.iter().map(|s| (*s).to_owned()).collect()
}

/// The fields a policy of `algorithm` has in JSON: the common ones and its own parameter.
fn policy_fields(algorithm: &str) -> BTreeSet<String> {
    let mut fields = names(&COMMON_FIELDS);
    fields.insert(own_parameter(algorithm).to_owned());
    fields
}

fn policy_path(name: &str) -> String {
    format!("/api/v1/policies/{name}")
}

async fn patch(app: &TestApp, name: &str, body: Value) -> Response {
    app.send("PATCH", &policy_path(name), &app.admin_token, Some(body))
        .await
}

async fn delete(app: &TestApp, name: &str) -> Response {
    app.send("DELETE", &policy_path(name), &app.admin_token, None)
        .await
}

async fn admin_reads(app: &TestApp, path: &str) -> Value {
    expect_status(app.get(path, &app.admin_token).await, StatusCode::OK).await
}

/// A 422 naming `field` first, whose message for `field` contains `words`.
async fn expect_invalid(response: Response, field: &str, words: &str) -> Value {
    let problem = expect_problem(response, StatusCode::UNPROCESSABLE_ENTITY).await;
    assert!(
        problem["type"].as_str().unwrap().ends_with(":validation"),
        "{problem}"
    );
    assert_eq!(problem["field"], field, "problem: {problem}");
    let message = problem["errors"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["field"] == field)
        .unwrap_or_else(|| panic!("no error of {field}: {problem}"))["message"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        message.contains(words),
        "the message of {field} should say {words:?}: {problem}"
    );
    problem
}

/// An app "shop" with an API key.
async fn shop_with_key(app: &TestApp) -> String {
    app.create_app("shop").await;
    app.create_key("shop").await
}

fn state_key(app: &TestApp, name: &str, suffix: &str) -> String {
    format!("{}:{suffix}", app.policy_key(name))
}

async fn release(app: &TestApp, key: &str, resource: &str, lease: &str) -> Response {
    app.post(
        "/v1/release",
        key,
        json!({"resource": resource, "lease_id": lease}),
    )
    .await
}

fn is_lease_id(text: &str) -> bool {
    text.len() == 32
        && text
            .chars()
            .all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c))
}

/// Runs one test body once per algorithm, as separate tests named after them.
macro_rules! for_each_algorithm {
    ($name:ident, $body:path) => {
        mod $name {
            use super::*;
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn token_bucket() {
                $body("token_bucket").await
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn fixed_window() {
                $body("fixed_window").await
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sliding_log() {
                $body("sliding_log").await
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sliding_window() {
                $body("sliding_window").await
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn concurrency() {
                $body("concurrency").await
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn gcra() {
                $body("gcra").await
            }
        }
    };
}
// By path too, for the area's files (their `mod` lines come before this definition).
use for_each_algorithm;
