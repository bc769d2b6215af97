//! The six limiting algorithms as their users meet them over HTTP (DESIGN.md sections 4, 5
//! and 8): each policy kind with exactly its own parameters through the admin API, its
//! acquires and their replies, concurrency leases given back with `POST /v1/release`, a
//! change of algorithm or a deletion discarding the old state in Redis, the live state,
//! and the console's policy form.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use ratekeeper::domain::{Algorithm, AppSlug, MaxPermits, Millis, PolicyName};
use ratekeeper::limiter::{LeaseId, PolicyConfig, ReleaseOutcome};
use ratekeeper::startup::Core;
use reqwest::{Response, StatusCode};
use serde_json::{Value, json};

use crate::helpers::*;
use crate::on_every_backend;

// ---------------------------------------------------------------------------------------
// Helpers of this module
// ---------------------------------------------------------------------------------------

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
const COMMON_FIELDS: [&str; 11] = [
    "name",
    "owner_app",
    "algorithm",
    "max_permits",
    "allowed_apps",
    "failure_mode",
    "enabled",
    "description",
    "version",
    "created_at",
    "updated_at",
];

/// The fields of an acquire's reply, the same for every algorithm.
const REPLY_FIELDS: [&str; 6] = [
    "allowed",
    "remaining",
    "limit",
    "retry_after_ms",
    "reset_after_ms",
    "policy_version",
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

/// The parameters an algorithm does not use.
fn foreign_parameters(algorithm: &str) -> Vec<&'static str> {
    ["rate", "window_ms", "lease_ttl_ms"]
        .into_iter()
        .filter(|p| *p != own_parameter(algorithm))
        .collect()
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

/// Takes the 3 permits of `name` one by one (remaining 2, 1, 0), then is denied; the
/// lease ids of the grants (concurrency only).
async fn take_all_three(app: &TestApp, key: &str, name: &str) -> Vec<String> {
    let mut leases = Vec::new();
    for remaining in [2, 1, 0] {
        let body = expect_status(app.acquire(key, name, 1).await, StatusCode::OK).await;
        assert_eq!(body["remaining"], remaining, "{name}: {body}");
        if let Some(lease) = body["lease_id"].as_str() {
            leases.push(lease.to_owned());
        }
    }
    let body = expect_status(
        app.acquire(key, name, 1).await,
        StatusCode::TOO_MANY_REQUESTS,
    )
    .await;
    assert_eq!(body["remaining"], 0, "{name}: {body}");
    leases
}

fn state_key(app: &TestApp, name: &str, suffix: &str) -> String {
    format!("{}:{suffix}", app.policy_key(name))
}

/// Whether Redis holds the state that `algorithm` keeps of policy `name`: a key of its
/// own beside the policy's hash, or fields of the hash.
async fn has_state(app: &TestApp, name: &str, algorithm: &str) -> bool {
    let hash = app.policy_key(name);
    let fields: &[&str] = match algorithm {
        "fixed_window" => return app.redis_exists(&state_key(app, name, "fw")).await,
        "sliding_log" => return app.redis_exists(&state_key(app, name, "log")).await,
        "concurrency" => return app.redis_exists(&state_key(app, name, "leases")).await,
        "token_bucket" => &["curr_permits", "last_mill_second"],
        "sliding_window" => &["sw_start", "sw_curr", "sw_prev"],
        "gcra" => &["tat"],
        other => panic!("no algorithm {other}"),
    };
    for field in fields {
        if app.redis_field(&hash, field).await.is_some() {
            return true;
        }
    }
    false
}

/// Every key of policy `name` in Redis: its hash and the three state keys.
fn all_keys(app: &TestApp, name: &str) -> [String; 4] {
    [
        app.policy_key(name),
        state_key(app, name, "fw"),
        state_key(app, name, "log"),
        state_key(app, name, "leases"),
    ]
}

async fn release(app: &TestApp, key: &str, resource: &str, lease: &str) -> Response {
    app.post(
        "/v1/release",
        key,
        json!({"resource": resource, "lease_id": lease}),
    )
    .await
}

/// A 404 saying the lease is not held.
async fn expect_not_held(response: Response) {
    let problem = expect_problem(response, StatusCode::NOT_FOUND).await;
    assert_eq!(
        problem["type"], "urn:ratekeeper:problem:lease-not-held",
        "{problem}"
    );
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

// ---------------------------------------------------------------------------------------
// Each algorithm with exactly its parameters, through the admin API
// ---------------------------------------------------------------------------------------

async fn a_policy_of_each_algorithm_round_trips(db: Db) {
    let app = spawn_app(db).await;
    app.create_app("shop").await;
    let bodies = [
        json!({"name": "p.token_bucket", "owner_app": "shop", "algorithm": "token_bucket",
               "rate": 0.2, "max_permits": 5}),
        json!({"name": "p.fixed_window", "owner_app": "shop", "algorithm": "fixed_window",
               "window_ms": 60_000, "max_permits": 5}),
        json!({"name": "p.sliding_log", "owner_app": "shop", "algorithm": "sliding_log",
               "window_ms": 1, "max_permits": 10}),
        json!({"name": "p.sliding_window", "owner_app": "shop", "algorithm": "sliding_window",
               "window_ms": DAY_MS, "max_permits": 1000}),
        json!({"name": "p.concurrency", "owner_app": "shop", "algorithm": "concurrency",
               "lease_ttl_ms": 30_000, "max_permits": 8}),
        json!({"name": "p.gcra", "owner_app": "shop", "algorithm": "gcra",
               "rate": 2.5, "max_permits": 4}),
    ];
    let mut created = Vec::new();
    for body in bodies {
        let algorithm = body["algorithm"].as_str().unwrap();
        let name = body["name"].as_str().unwrap();
        let policy = app.create_policy(body.clone()).await;
        assert_eq!(
            field_names(&policy),
            policy_fields(algorithm),
            "{algorithm}: exactly its own fields: {policy}"
        );
        for (field, value) in body.as_object().unwrap() {
            assert_eq!(policy[field], *value, "{algorithm}: {field} as given");
        }
        assert_eq!(policy["version"], 1);
        assert_eq!(policy["allowed_apps"], json!(["shop"]));

        // Read back from the store: the same.
        assert_eq!(
            admin_reads(&app, &policy_path(name)).await,
            policy,
            "{algorithm}"
        );
        // Sent again as it is, it changes nothing: the stored row parses back to the
        // very same policy (a float rate included).
        let mut again = body.clone();
        again.as_object_mut().unwrap().remove("name");
        again.as_object_mut().unwrap().remove("owner_app");
        let same = expect_status(patch(&app, name, again).await, StatusCode::OK).await;
        assert_eq!(same, policy, "{algorithm}: a change to the same values");

        // Redis holds the same configuration.
        let hash = app.policy_key(name);
        // The default algorithm is not stored (a missing field means token_bucket).
        let stored = app.redis_field(&hash, "algorithm").await;
        assert_eq!(
            stored.as_deref().unwrap_or("token_bucket"),
            algorithm,
            "{algorithm}"
        );
        assert_eq!(stored.is_none(), algorithm == "token_bucket");
        let parameter = own_parameter(algorithm);
        if parameter != "rate" {
            assert_eq!(
                app.redis_field(&hash, parameter).await,
                Some(body[parameter].to_string()),
                "{algorithm}: {parameter} in redis"
            );
        }
        created.push(policy);
    }
    created.sort_by_key(|p| p["name"].as_str().unwrap().to_owned());
    let mut listed = admin_reads(&app, "/api/v1/policies?app=shop")
        .await
        .as_array()
        .unwrap()
        .clone();
    listed.sort_by_key(|p| p["name"].as_str().unwrap().to_owned());
    assert_eq!(listed, created);
}
on_every_backend!(
    each_algorithm_round_trips,
    a_policy_of_each_algorithm_round_trips
);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_algorithm_refuses_the_parameters_it_does_not_use() {
    let app = spawn_app(Db::Sqlite).await;
    app.create_app("shop").await;
    for algorithm in ALGORITHMS {
        for foreign in foreign_parameters(algorithm) {
            let mut body = three_permits("p", algorithm);
            body[foreign] = value_of(foreign);
            let r = app
                .post("/api/v1/policies", &app.admin_token, body.clone())
                .await;
            let problem = expect_invalid(r, foreign, &format!("is not used by {algorithm}")).await;
            assert_eq!(
                problem["errors"].as_array().unwrap().len(),
                1,
                "only the foreign parameter is wrong: {body} -> {problem}"
            );
        }
    }
    assert_eq!(admin_reads(&app, "/api/v1/policies").await, json!([]));
    assert!(!app.redis_exists(&app.policy_key("p")).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_algorithm_requires_its_parameter() {
    let app = spawn_app(Db::Sqlite).await;
    app.create_app("shop").await;
    for algorithm in ALGORITHMS {
        let parameter = own_parameter(algorithm);
        let mut body = three_permits("p", algorithm);
        body.as_object_mut().unwrap().remove(parameter);
        let r = app.post("/api/v1/policies", &app.admin_token, body).await;
        expect_invalid(r, parameter, &format!("is required for {algorithm}")).await;
    }
    // No algorithm named: a token bucket, which needs a rate.
    let r = app
        .post(
            "/api/v1/policies",
            &app.admin_token,
            json!({"name": "p", "owner_app": "shop", "max_permits": 3}),
        )
        .await;
    expect_invalid(r, "rate", "is required for token_bucket").await;

    // A lease lifetime where a window is wanted: both mistakes are named.
    let r = app
        .post(
            "/api/v1/policies",
            &app.admin_token,
            json!({"name": "p", "owner_app": "shop", "algorithm": "sliding_log",
                   "max_permits": 3, "lease_ttl_ms": 1000}),
        )
        .await;
    let problem = expect_invalid(r, "window_ms", "is required for sliding_log").await;
    assert!(
        problem["errors"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["field"] == "lease_ttl_ms"
                && e["message"]
                    .as_str()
                    .unwrap()
                    .contains("is not used by sliding_log")),
        "{problem}"
    );
    assert_eq!(admin_reads(&app, "/api/v1/policies").await, json!([]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn windows_and_lease_lifetimes_run_from_a_millisecond_to_a_day() {
    let app = spawn_app(Db::Sqlite).await;
    app.create_app("shop").await;
    let cases = [
        ("fixed_window", "window_ms"),
        ("sliding_log", "window_ms"),
        ("sliding_window", "window_ms"),
        ("concurrency", "lease_ttl_ms"),
    ];
    for (algorithm, parameter) in cases {
        let before = admin_reads(&app, "/api/v1/policies").await;
        for bad in [json!(0), json!(-1), json!(-60_000), json!(DAY_MS + 1)] {
            let mut body = three_permits("p", algorithm);
            body[parameter] = bad.clone();
            let r = app.post("/api/v1/policies", &app.admin_token, body).await;
            expect_invalid(r, parameter, "from 1 to 86400000").await;
        }
        // Not a whole number at all: refused naming the field too.
        for bad in [json!(1.5), json!("60000"), json!(1e30)] {
            let mut body = three_permits("p", algorithm);
            body[parameter] = bad.clone();
            let r = app.post("/api/v1/policies", &app.admin_token, body).await;
            expect_invalid(r, parameter, "").await;
        }
        assert_eq!(
            admin_reads(&app, "/api/v1/policies").await,
            before,
            "nothing refused was created"
        );

        // The bounds themselves are fine.
        for (suffix, good) in [("min", 1), ("max", DAY_MS)] {
            let name = format!("{algorithm}.{suffix}");
            let mut body = three_permits(&name, algorithm);
            body[parameter] = json!(good);
            let policy = app.create_policy(body).await;
            assert_eq!(policy[parameter], good);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_algorithm_is_refused_listing_the_choices() {
    let app = spawn_app(Db::Sqlite).await;
    app.create_app("shop").await;
    for bad in [
        json!("leaky_bucket"),
        json!("Token_Bucket"),
        json!("fixed window"),
        json!(""),
    ] {
        let r = app
            .post(
                "/api/v1/policies",
                &app.admin_token,
                json!({"name": "p", "owner_app": "shop", "algorithm": bad,
                       "rate": 1, "max_permits": 3}),
            )
            .await;
        let problem = expect_invalid(r, "algorithm", "must be one of").await;
        let message = problem["errors"][0]["message"].as_str().unwrap();
        for choice in ALGORITHMS {
            assert!(message.contains(choice), "{choice} listed: {message}");
        }
    }
    // Not even a string.
    let r = app
        .post(
            "/api/v1/policies",
            &app.admin_token,
            json!({"name": "p", "owner_app": "shop", "algorithm": 3,
                   "rate": 1, "max_permits": 3}),
        )
        .await;
    expect_invalid(r, "algorithm", "").await;
    assert_eq!(admin_reads(&app, "/api/v1/policies").await, json!([]));
}

// ---------------------------------------------------------------------------------------
// Acquiring, whatever the algorithm
// ---------------------------------------------------------------------------------------

async fn three_grants_then_429_with_the_same_reply(algorithm: &str) {
    let app = spawn_app(Db::Sqlite).await;
    let key = shop_with_key(&app).await;
    app.create_policy(three_permits("limited", algorithm)).await;

    // More than the policy ever allows at once.
    let problem = expect_problem(
        app.acquire(&key, "limited", 4).await,
        StatusCode::UNPROCESSABLE_ENTITY,
    )
    .await;
    assert_eq!(problem["field"], "permits");

    let mut leases = BTreeSet::new();
    for remaining in [2, 1, 0] {
        let r = app.acquire(&key, "limited", 1).await;
        assert_eq!(r.headers()["ratelimit-policy"], "\"limited\";q=3");
        let ratelimit = r.headers()["ratelimit"].to_str().unwrap().to_owned();
        assert!(r.headers().get("retry-after").is_none());
        let body = expect_status(r, StatusCode::OK).await;
        let mut shape = names(&REPLY_FIELDS);
        if algorithm == "concurrency" {
            shape.insert("lease_id".to_owned());
            let lease = body["lease_id"].as_str().unwrap();
            assert!(is_lease_id(lease), "32 hex digits: {lease}");
            leases.insert(lease.to_owned());
        }
        assert_eq!(field_names(&body), shape, "{body}");
        assert_eq!(body["allowed"], true);
        assert_eq!(body["remaining"], remaining, "{body}");
        assert_eq!(body["limit"], 3);
        assert_eq!(body["retry_after_ms"], 0);
        assert_eq!(body["policy_version"], 1);
        let reset = body["reset_after_ms"].as_i64().unwrap();
        assert!(reset > 0, "{body}");
        assert_eq!(
            ratelimit,
            format!("\"limited\";r={remaining};t={}", (reset + 999) / 1000)
        );
    }
    if algorithm == "concurrency" {
        assert_eq!(leases.len(), 3, "every lease has its own id");
    }

    for _ in 0..2 {
        let r = app.acquire(&key, "limited", 1).await;
        let retry_after = r.headers()["retry-after"].to_str().unwrap().to_owned();
        let ratelimit = r.headers()["ratelimit"].to_str().unwrap().to_owned();
        assert_eq!(r.headers()["ratelimit-policy"], "\"limited\";q=3");
        let body = expect_status(r, StatusCode::TOO_MANY_REQUESTS).await;
        assert_eq!(field_names(&body), names(&REPLY_FIELDS), "{body}");
        assert_eq!(body["allowed"], false);
        assert_eq!(body["remaining"], 0);
        assert_eq!(body["limit"], 3);
        assert_eq!(body["policy_version"], 1);
        let retry = body["retry_after_ms"].as_i64().unwrap();
        assert!((1..=2 * DAY_MS).contains(&retry), "{body}");
        let seconds = (retry + 999) / 1000;
        assert_eq!(
            retry_after,
            seconds.to_string(),
            "whole seconds, rounded up"
        );
        assert_eq!(ratelimit, format!("\"limited\";r=0;t={seconds}"));
        assert!(body["reset_after_ms"].as_i64().unwrap() > 0, "{body}");
    }
}
for_each_algorithm!(
    three_grants_then_429,
    three_grants_then_429_with_the_same_reply
);

// ---------------------------------------------------------------------------------------
// Concurrency leases
// ---------------------------------------------------------------------------------------

/// shop with a key and policy "jobs": `max` leases at once, each living `ttl_ms`.
async fn jobs(app: &TestApp, max: i64, ttl_ms: i64) -> String {
    let key = shop_with_key(app).await;
    app.create_policy(json!({
        "name": "jobs", "owner_app": "shop", "algorithm": "concurrency",
        "max_permits": max, "lease_ttl_ms": ttl_ms
    }))
    .await;
    key
}

async fn granted_lease(app: &TestApp, key: &str, permits: i64) -> String {
    let body = expect_status(app.acquire(key, "jobs", permits).await, StatusCode::OK).await;
    let lease = body["lease_id"]
        .as_str()
        .unwrap_or_else(|| panic!("a grant has a lease: {body}"))
        .to_owned();
    assert!(is_lease_id(&lease), "32 hex digits: {lease}");
    lease
}

async fn denied(app: &TestApp, key: &str) -> Value {
    let body = expect_status(
        app.acquire(key, "jobs", 1).await,
        StatusCode::TOO_MANY_REQUESTS,
    )
    .await;
    assert!(
        body.get("lease_id").is_none(),
        "a denial has no lease: {body}"
    );
    body
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_released_lease_frees_its_permit_at_once() {
    let app = spawn_app(Db::Sqlite).await;
    let key = jobs(&app, 2, 3_600_000).await;

    let first = granted_lease(&app, &key, 1).await;
    let second = granted_lease(&app, &key, 1).await;
    assert_ne!(first, second);
    denied(&app, &key).await;

    let r = release(&app, &key, "jobs", &first).await;
    assert_eq!(
        expect_status(r, StatusCode::OK).await,
        json!({"released": true, "permits": 1, "remaining": 1})
    );
    // Granted at once: a concurrency denial is never answered from memory.
    let third = granted_lease(&app, &key, 1).await;
    denied(&app, &key).await;

    // A lease is given back once.
    expect_not_held(release(&app, &key, "jobs", &first).await).await;
    denied(&app, &key).await;

    for (lease, remaining) in [(&second, 1), (&third, 2)] {
        let r = release(&app, &key, "jobs", lease).await;
        assert_eq!(
            expect_status(r, StatusCode::OK).await,
            json!({"released": true, "permits": 1, "remaining": remaining})
        );
    }
    // A lease of two permits gives both back.
    let both = granted_lease(&app, &key, 2).await;
    denied(&app, &key).await;
    let r = release(&app, &key, "jobs", &both).await;
    assert_eq!(
        expect_status(r, StatusCode::OK).await,
        json!({"released": true, "permits": 2, "remaining": 2})
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_application_cannot_release_a_lease() {
    let app = spawn_app(Db::Sqlite).await;
    let shop = shop_with_key(&app).await;
    app.create_app("blog").await;
    let blog = app.create_key("blog").await;
    app.create_policy(json!({
        "name": "jobs", "owner_app": "shop", "algorithm": "concurrency",
        "max_permits": 2, "lease_ttl_ms": 3_600_000, "allowed_apps": ["shop", "blog"]
    }))
    .await;

    let first = granted_lease(&app, &shop, 1).await;
    granted_lease(&app, &shop, 1).await;

    // blog may acquire on jobs, but shop's lease is not blog's to give back.
    expect_not_held(release(&app, &blog, "jobs", &first).await).await;
    // The lease still holds, for everyone.
    denied(&app, &shop).await;
    denied(&app, &blog).await;
    let state = admin_reads(&app, "/api/v1/policies/jobs/state").await;
    assert_eq!(state["current_permits"], 0.0, "{state}");

    let r = release(&app, &shop, "jobs", &first).await;
    expect_status(r, StatusCode::OK).await;
    let blogs = granted_lease(&app, &blog, 1).await;
    expect_not_held(release(&app, &shop, "jobs", &blogs).await).await;
    denied(&app, &shop).await;
    let r = release(&app, &blog, "jobs", &blogs).await;
    assert_eq!(
        expect_status(r, StatusCode::OK).await,
        json!({"released": true, "permits": 1, "remaining": 1})
    );

    // An application taken off the policy may still give back what it holds.
    let held = granted_lease(&app, &blog, 1).await;
    let r = patch(&app, "jobs", json!({"allowed_apps": ["shop"]})).await;
    expect_status(r, StatusCode::OK).await;
    expect_problem(app.acquire(&blog, "jobs", 1).await, StatusCode::FORBIDDEN).await;
    let r = release(&app, &blog, "jobs", &held).await;
    assert_eq!(
        expect_status(r, StatusCode::OK).await,
        json!({"released": true, "permits": 1, "remaining": 1})
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_of_many_permits_is_given_back_whole() {
    let app = spawn_app(Db::Sqlite).await;
    let key = jobs(&app, 300, 3_600_000).await;
    // The script removes a lease's members in batches of 100: around the edges.
    for permits in [99, 100, 101, 200, 300] {
        let lease = granted_lease(&app, &key, permits).await;
        let r = release(&app, &key, "jobs", &lease).await;
        assert_eq!(
            expect_status(r, StatusCode::OK).await,
            json!({"released": true, "permits": permits, "remaining": 300}),
            "{permits} permits"
        );
    }
    let lease = granted_lease(&app, &key, 300).await;
    denied(&app, &key).await;
    expect_status(release(&app, &key, "jobs", &lease).await, StatusCode::OK).await;
    assert!(!app.redis_exists(&state_key(&app, "jobs", "leases")).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_not_released_expires_by_itself() {
    let app = spawn_app(Db::Sqlite).await;
    const TTL_MS: u64 = 300;
    let key = jobs(&app, 1, TTL_MS as i64).await;

    let started = Instant::now();
    let lease = granted_lease(&app, &key, 1).await;
    let r = app.acquire(&key, "jobs", 1).await;
    if r.status() == StatusCode::TOO_MANY_REQUESTS {
        let body = expect_status(r, StatusCode::TOO_MANY_REQUESTS).await;
        let retry = body["retry_after_ms"].as_i64().unwrap();
        assert!(
            (1..=TTL_MS as i64).contains(&retry),
            "free when the lease expires: {body}"
        );
    } else {
        // A slow machine: the lease had expired already.
        assert!(started.elapsed() >= Duration::from_millis(TTL_MS));
        expect_status(r, StatusCode::OK).await;
    }

    // Nobody gives it back: it expires, and the permit is free again.
    let granted_again = eventually(Duration::from_secs(10), || {
        let (app, key) = (&app, &key);
        async move { app.acquire(key, "jobs", 1).await.status() == StatusCode::OK }
    })
    .await;
    assert!(granted_again, "the expired lease's permit is free again");
    assert!(
        started.elapsed() >= Duration::from_millis(TTL_MS),
        "not before the lease's lifetime: {:?}",
        started.elapsed()
    );
    // Expired is not held: there is nothing to give back.
    expect_not_held(release(&app, &key, "jobs", &lease).await).await;

    // An idle policy leaves no lease set behind once its last lease expires.
    let leases = state_key(&app, "jobs", "leases");
    assert!(
        eventually(Duration::from_secs(10), || {
            let (app, leases) = (&app, &leases);
            async move { !app.redis_exists(leases).await }
        })
        .await,
        "the lease set expires with its last lease"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_disabled_concurrency_policy_grants_without_leases() {
    let app = spawn_app(Db::Sqlite).await;
    let key = jobs(&app, 1, 3_600_000).await;
    let held = granted_lease(&app, &key, 1).await;
    let r = patch(&app, "jobs", json!({"enabled": false})).await;
    expect_status(r, StatusCode::OK).await;

    for _ in 0..3 {
        let body = expect_status(app.acquire(&key, "jobs", 1).await, StatusCode::OK).await;
        assert_eq!(body["enforced"], false, "{body}");
        assert!(
            body.get("lease_id").is_none(),
            "nothing to give back: {body}"
        );
    }
    // Switched on again, the lease taken before still holds.
    let r = patch(&app, "jobs", json!({"enabled": true})).await;
    expect_status(r, StatusCode::OK).await;
    denied(&app, &key).await;
    let r = release(&app, &key, "jobs", &held).await;
    expect_status(r, StatusCode::OK).await;
    granted_lease(&app, &key, 1).await;
}

/// Another instance turns token bucket `name` into a concurrency limit of one lease at a
/// time, in SQL and in Redis, as its `policy_saved` does; its change notice is lost (the
/// subscriber was reconnecting), so this server learns of it only at its next reconcile
/// pass, up to one sync interval later (DESIGN.md: "a lost message costs at most one sync
/// interval, never correctness"). Returns the other instance.
async fn made_concurrency_elsewhere_unannounced(app: &TestApp, name: &str) -> Core {
    let other = app.core().await;
    let mut tx = other.store.begin().await.unwrap();
    let current = tx
        .policy_by_name_for_update(name)
        .await
        .unwrap()
        .expect("the policy");
    let mut spec = current.spec.clone();
    spec.algorithm = Algorithm::Concurrency;
    spec.rate = None;
    spec.max_permits = MaxPermits::parse_field("max_permits", 1).unwrap();
    spec.lease_ttl_ms = Some(Millis::parse_field("lease_ttl_ms", 3_600_000).unwrap());
    let updated = tx.update_policy(&current, &spec).await.unwrap().unwrap();
    tx.commit().await.unwrap();
    let config = PolicyConfig::new(&updated.spec, updated.created_ms, updated.version);
    assert!(other.limiter.push_policy(&config).await.unwrap());
    other
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_granted_before_this_instance_heard_of_the_change_can_be_released() {
    let app = spawn_app(Db::Sqlite).await;
    let key = shop_with_key(&app).await;
    app.create_policy(three_permits("jobs", "token_bucket"))
        .await;
    made_concurrency_elsewhere_unannounced(&app, "jobs").await;

    // The acquire path finds the right algorithm in Redis: a lease is granted.
    let lease = granted_lease(&app, &key, 1).await;
    // Giving it back must work too (or at worst fail with a retryable status), not be
    // refused as if the policy handed out no leases.
    let r = release(&app, &key, "jobs", &lease).await;
    assert_eq!(
        expect_status(r, StatusCode::OK).await,
        json!({"released": true, "permits": 1, "remaining": 1})
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_concurrency_denial_is_never_answered_from_memory_even_before_the_snapshot_knows() {
    let app = spawn_app(Db::Sqlite).await;
    let key = shop_with_key(&app).await;
    app.create_policy(three_permits("jobs", "token_bucket"))
        .await;
    let other = made_concurrency_elsewhere_unannounced(&app, "jobs").await;

    let lease = granted_lease(&app, &key, 1).await;
    denied(&app, &key).await;
    // The client gives the lease back through the instance that knows the policy.
    let released = other
        .limiter
        .release(
            &PolicyName::parse("jobs").unwrap(),
            &AppSlug::parse("shop").unwrap(),
            LeaseId::parse(&lease).unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(
        released,
        ReleaseOutcome::Released {
            remaining: 1,
            permits: 1
        }
    );
    // The permit is free in Redis: this instance must ask Redis, not repeat the denial.
    granted_lease(&app, &key, 1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_concurrency_policies_take_a_release() {
    let app = spawn_app(Db::Sqlite).await;
    let key = shop_with_key(&app).await;
    let lease = "0123456789abcdef0123456789abcdef";
    for algorithm in ALGORITHMS.into_iter().filter(|a| *a != "concurrency") {
        app.create_policy(three_permits(algorithm, algorithm)).await;
        expect_status(app.acquire(&key, algorithm, 1).await, StatusCode::OK).await;
        let problem = expect_problem(
            release(&app, &key, algorithm, lease).await,
            StatusCode::CONFLICT,
        )
        .await;
        assert_eq!(
            problem["type"], "urn:ratekeeper:problem:not-a-lease-policy",
            "{algorithm}: {problem}"
        );
        assert!(
            problem["detail"].as_str().unwrap().contains(algorithm),
            "{problem}"
        );
    }
    // No policy of that name at all.
    let problem = expect_problem(
        release(&app, &key, "nothing", lease).await,
        StatusCode::NOT_FOUND,
    )
    .await;
    assert_eq!(problem["type"], "urn:ratekeeper:problem:not-found");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_release_is_refused() {
    let app = spawn_app(Db::Sqlite).await;
    let key = jobs(&app, 2, 3_600_000).await;
    let lease = granted_lease(&app, &key, 1).await;

    for bad in [
        "xyz".to_owned(),
        String::new(),
        "abc".to_owned(),
        lease[..31].to_owned(),
        format!("{lease}00"),
        "g".repeat(32),
        format!("{{{lease}}}"),
    ] {
        let problem = expect_problem(
            release(&app, &key, "jobs", &bad).await,
            StatusCode::BAD_REQUEST,
        )
        .await;
        assert_eq!(problem["field"], "lease_id", "{bad:?}: {problem}");
    }
    let r = app
        .post("/v1/release", &key, json!({"resource": "jobs"}))
        .await;
    assert_eq!(
        expect_problem(r, StatusCode::BAD_REQUEST).await["field"],
        "lease_id"
    );
    let r = app
        .post("/v1/release", &key, json!({"lease_id": lease}))
        .await;
    assert_eq!(
        expect_problem(r, StatusCode::BAD_REQUEST).await["field"],
        "resource"
    );
    let r = release(&app, &key, "bad name", &lease).await;
    assert_eq!(
        expect_problem(r, StatusCode::BAD_REQUEST).await["field"],
        "resource"
    );
    let r = app
        .client
        .post(app.url("/v1/release"))
        .bearer_auth(&key)
        .body("{not json")
        .send()
        .await
        .unwrap();
    expect_problem(r, StatusCode::BAD_REQUEST).await;
    // A field the endpoint does not know.
    let r = app
        .post(
            "/v1/release",
            &key,
            json!({"resource": "jobs", "lease_id": lease, "permits": 1}),
        )
        .await;
    assert_eq!(
        expect_problem(r, StatusCode::UNPROCESSABLE_ENTITY).await["field"],
        "permits"
    );
    // No key, or an unknown one.
    let r = app
        .client
        .post(app.url("/v1/release"))
        .json(&json!({"resource": "jobs", "lease_id": lease}))
        .send()
        .await
        .unwrap();
    expect_problem(r, StatusCode::UNAUTHORIZED).await;
    expect_problem(
        release(&app, "rk_key_nope", "jobs", &lease).await,
        StatusCode::UNAUTHORIZED,
    )
    .await;

    // None of it touched the lease.
    let r = release(&app, &key, "jobs", &lease).await;
    assert_eq!(
        expect_status(r, StatusCode::OK).await,
        json!({"released": true, "permits": 1, "remaining": 2})
    );
}

// ---------------------------------------------------------------------------------------
// Changing the algorithm, deleting: the old state goes
// ---------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changing_a_sliding_log_to_a_fixed_window_discards_the_log() {
    let app = spawn_app(Db::Sqlite).await;
    let key = shop_with_key(&app).await;
    app.create_policy(three_permits("search", "sliding_log"))
        .await;
    take_all_three(&app, &key, "search").await;
    let log = state_key(&app, "search", "log");
    assert!(app.redis_exists(&log).await, "the log holds the grants");

    // The window is kept: a fixed window uses one too.
    let changed = expect_status(
        patch(&app, "search", json!({"algorithm": "fixed_window"})).await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(changed["algorithm"], "fixed_window");
    assert_eq!(changed["window_ms"], DAY_MS);
    assert_eq!(changed["version"], 2);
    assert_eq!(field_names(&changed), policy_fields("fixed_window"));
    assert_eq!(admin_reads(&app, &policy_path("search")).await, changed);

    assert!(!app.redis_exists(&log).await, "the log is gone");
    let state = admin_reads(&app, "/api/v1/policies/search/state").await;
    assert_eq!(state["current_permits"], 3.0, "{state}");
    take_all_three(&app, &key, "search").await;
    assert!(app.redis_exists(&state_key(&app, "search", "fw")).await);
    assert!(!app.redis_exists(&log).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changing_a_concurrency_policy_to_a_token_bucket_discards_the_leases() {
    let app = spawn_app(Db::Sqlite).await;
    let key = shop_with_key(&app).await;
    app.create_policy(three_permits("jobs", "concurrency"))
        .await;
    let held = take_all_three(&app, &key, "jobs").await;
    assert_eq!(held.len(), 3);
    let leases = state_key(&app, "jobs", "leases");
    assert!(app.redis_exists(&leases).await, "three leases are held");

    let changed = expect_status(
        patch(
            &app,
            "jobs",
            json!({"algorithm": "token_bucket", "rate": 0.001}),
        )
        .await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(field_names(&changed), policy_fields("token_bucket"));
    assert_eq!(changed["rate"], 0.001);
    assert_eq!(changed["version"], 2);

    assert!(!app.redis_exists(&leases).await, "the leases are gone");
    let leases_now = take_all_three(&app, &key, "jobs").await;
    assert!(leases_now.is_empty(), "a token bucket hands out no leases");
    // The old leases cannot be given back: the policy takes none now.
    let problem = expect_problem(
        release(&app, &key, "jobs", &held[0]).await,
        StatusCode::CONFLICT,
    )
    .await;
    assert_eq!(problem["type"], "urn:ratekeeper:problem:not-a-lease-policy");

    // And back to leases: the lifetime was not kept, so it must be given again.
    let r = patch(&app, "jobs", json!({"algorithm": "concurrency"})).await;
    expect_invalid(r, "lease_ttl_ms", "is required for concurrency").await;
}

/// What to send to change a policy to `algorithm`.
fn change_to(algorithm: &str) -> Value {
    let parameter = own_parameter(algorithm);
    let mut body = json!({"algorithm": algorithm});
    body[parameter] = value_of(parameter);
    body
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_change_of_algorithm_starts_from_a_full_limit() {
    let app = spawn_app(Db::Sqlite).await;
    let key = shop_with_key(&app).await;
    app.create_policy(three_permits("p", "token_bucket")).await;
    let order = [
        "token_bucket",
        "fixed_window",
        "sliding_log",
        "sliding_window",
        "concurrency",
        "gcra",
        "token_bucket",
    ];
    for (version, pair) in (2..).zip(order.windows(2)) {
        let (from, to) = (pair[0], pair[1]);
        take_all_three(&app, &key, "p").await;
        assert!(has_state(&app, "p", from).await, "{from} keeps state");

        let changed = expect_status(patch(&app, "p", change_to(to)).await, StatusCode::OK).await;
        assert_eq!(changed["version"], version);
        assert_eq!(
            field_names(&changed),
            policy_fields(to),
            "{from} -> {to}: {changed}"
        );
        assert!(
            !has_state(&app, "p", from).await,
            "{from} -> {to}: the state of {from} is gone"
        );
        assert_eq!(
            app.redis_field(&app.policy_key("p"), "version").await,
            Some(version.to_string())
        );
        let state = admin_reads(&app, "/api/v1/policies/p/state").await;
        assert_eq!(state["current_permits"], 3.0, "{from} -> {to}: {state}");
    }
    // The last one, a token bucket again, starts full too.
    take_all_three(&app, &key, "p").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_of_algorithm_checks_the_parameters_of_the_new_one() {
    let app = spawn_app(Db::Sqlite).await;
    let key = shop_with_key(&app).await;
    let created = app
        .create_policy(json!({"name": "p", "owner_app": "shop", "rate": 0.001, "max_permits": 3}))
        .await;

    // The rate the token bucket had is dropped; the window is missing.
    let r = patch(&app, "p", json!({"algorithm": "fixed_window"})).await;
    let problem = expect_invalid(r, "window_ms", "is required for fixed_window").await;
    assert_eq!(problem["errors"].as_array().unwrap().len(), 1, "{problem}");
    // A rate sent along is named too, first.
    let r = patch(
        &app,
        "p",
        json!({"algorithm": "fixed_window", "rate": 0.001}),
    )
    .await;
    let problem = expect_invalid(r, "rate", "is not used by fixed_window").await;
    assert!(
        problem["errors"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["field"] == "window_ms"),
        "{problem}"
    );
    let r = patch(
        &app,
        "p",
        json!({"algorithm": "fixed_window", "window_ms": 60_000, "rate": 1}),
    )
    .await;
    expect_invalid(r, "rate", "is not used by fixed_window").await;
    assert_eq!(
        admin_reads(&app, &policy_path("p")).await,
        created,
        "unchanged"
    );

    let changed = expect_status(
        patch(
            &app,
            "p",
            json!({"algorithm": "fixed_window", "window_ms": 60_000}),
        )
        .await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(field_names(&changed), policy_fields("fixed_window"));
    assert_eq!(changed["window_ms"], 60_000);

    // A fixed window takes no rate, and its window stays bounded.
    let r = patch(&app, "p", json!({"rate": 2})).await;
    expect_invalid(r, "rate", "is not used by fixed_window").await;
    let r = patch(&app, "p", json!({"window_ms": 0})).await;
    expect_invalid(r, "window_ms", "from 1 to 86400000").await;
    let r = patch(&app, "p", json!({"lease_ttl_ms": 1000})).await;
    expect_invalid(r, "lease_ttl_ms", "is not used by fixed_window").await;
    assert_eq!(admin_reads(&app, &policy_path("p")).await, changed);
    expect_status(app.acquire(&key, "p", 1).await, StatusCode::OK).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unrelated_change_and_a_reconcile_pass_keep_the_state() {
    let app = spawn_app(Db::Sqlite).await;
    let key = shop_with_key(&app).await;
    for algorithm in ALGORITHMS {
        app.create_policy(three_permits(algorithm, algorithm)).await;
        for _ in 0..2 {
            expect_status(app.acquire(&key, algorithm, 1).await, StatusCode::OK).await;
        }
    }
    // A change of the description only: a new version, the same limit.
    for algorithm in ALGORITHMS {
        let changed = expect_status(
            patch(&app, algorithm, json!({"description": "renamed"})).await,
            StatusCode::OK,
        )
        .await;
        assert_eq!(changed["version"], 2);
    }
    // A full reconcile pass of another instance finds everything mirrored already.
    let report = app.core().await.sync.reconcile_once().await.unwrap();
    assert!(report.full);
    assert_eq!(report.rewritten, 0, "{report:?}");
    assert_eq!(report.swept, 0, "{report:?}");
    for algorithm in ALGORITHMS {
        let state = admin_reads(&app, &format!("/api/v1/policies/{algorithm}/state")).await;
        let current = state["current_permits"].as_f64().unwrap();
        assert!((1.0..1.01).contains(&current), "{algorithm}: {state}");
        assert_eq!(state["version"], 2, "{algorithm}: {state}");
        let body = expect_status(app.acquire(&key, algorithm, 1).await, StatusCode::OK).await;
        assert_eq!(body["remaining"], 0, "{algorithm}: {body}");
        assert_eq!(body["policy_version"], 2, "{algorithm}: {body}");
        expect_status(
            app.acquire(&key, algorithm, 1).await,
            StatusCode::TOO_MANY_REQUESTS,
        )
        .await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_policy_of_any_kind_deletes_its_state() {
    let app = spawn_app(Db::Sqlite).await;
    let key = shop_with_key(&app).await;
    for algorithm in ALGORITHMS {
        app.create_policy(three_permits(algorithm, algorithm)).await;
        take_all_three(&app, &key, algorithm).await;
        assert!(has_state(&app, algorithm, algorithm).await, "{algorithm}");
    }
    for algorithm in ALGORITHMS {
        let r = delete(&app, algorithm).await;
        expect_status(r, StatusCode::NO_CONTENT).await;
        for redis_key in all_keys(&app, algorithm) {
            assert!(
                !app.redis_exists(&redis_key).await,
                "{algorithm}: {redis_key} is gone"
            );
        }
    }
    // Created again under the same names: nothing of before is left.
    for algorithm in ALGORITHMS {
        app.create_policy(three_permits(algorithm, algorithm)).await;
        take_all_three(&app, &key, algorithm).await;
    }
}

// ---------------------------------------------------------------------------------------
// The live state
// ---------------------------------------------------------------------------------------

async fn the_state_shows_the_permits_left(algorithm: &str) {
    let app = spawn_app(Db::Sqlite).await;
    let key = shop_with_key(&app).await;
    app.create_policy(three_permits("p", algorithm)).await;
    let rate = if own_parameter(algorithm) == "rate" {
        0.001
    } else {
        0.0
    };

    let fresh = admin_reads(&app, "/api/v1/policies/p/state").await;
    assert_eq!(fresh["current_permits"], 3.0, "{fresh}");
    assert_eq!(fresh["full_in_ms"], 0, "{fresh}");
    assert_eq!(fresh["max_permits"], 3);
    assert_eq!(fresh["version"], 1);
    assert_eq!(fresh["rate"], rate, "{fresh}");

    for _ in 0..2 {
        expect_status(app.acquire(&key, "p", 1).await, StatusCode::OK).await;
    }
    let state = admin_reads(&app, "/api/v1/policies/p/state").await;
    let current = state["current_permits"].as_f64().unwrap();
    if algorithm == "token_bucket" {
        // A token bucket refills continuously: a hair above 1 at 1 per 1000 s.
        assert!((1.0..1.01).contains(&current), "{state}");
    } else {
        assert_eq!(current, 1.0, "{state}");
    }
    let full_in = state["full_in_ms"].as_i64().unwrap();
    assert!((1..=2 * DAY_MS).contains(&full_in), "{state}");
    assert_eq!(state["max_permits"], 3);
    assert_eq!(state["version"], 1);
    assert_eq!(state["rate"], rate, "{state}");
}
for_each_algorithm!(state_after_two_of_three, the_state_shows_the_permits_left);

/// The text of one cell of a policy's row on the application page.
fn cell(page: &Page, policy: &str, column: &str) -> String {
    let row = page
        .body
        .find(&format!("<tr data-policy=\"{policy}\""))
        .unwrap_or_else(|| panic!("no row of {policy}: {}", page.body));
    let row = &page.body[row..];
    let row = &row[..row.find("</tr>").unwrap()];
    let at = row
        .find(&format!("data-col=\"{column}\""))
        .unwrap_or_else(|| panic!("no cell {column} in the row of {policy}"));
    let open = row[at..].find('>').unwrap() + at + 1;
    let close = row[open..].find("</td>").unwrap() + open;
    html_unescape(row[open..close].trim())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_live_view_shows_the_permits_left_of_every_algorithm() {
    let app = spawn_app(Db::Sqlite).await;
    let key = shop_with_key(&app).await;
    for algorithm in ALGORITHMS {
        app.create_policy(three_permits(algorithm, algorithm)).await;
    }
    app.create_user("vic", Some(("shop", "viewer"))).await;
    let mut vic = app.sign_in("vic").await;
    let of = |live: &Page, name: &str| {
        live.json()["policies"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("{name} is listed: {}", live.body))
    };

    let live = vic.get("/apps/shop/live").await;
    live.assert_status(StatusCode::OK);
    for algorithm in ALGORITHMS {
        let policy = of(&live, algorithm);
        assert_eq!(policy["current"], "3", "{policy}");
        assert_eq!(policy["max_permits"], 3, "{policy}");
        assert_eq!(policy["full_in"], "full", "{policy}");
    }

    for algorithm in ALGORITHMS {
        for _ in 0..2 {
            expect_status(app.acquire(&key, algorithm, 1).await, StatusCode::OK).await;
        }
    }
    let live = vic.get("/apps/shop/live").await;
    let page = vic.get("/apps/shop").await;
    page.assert_status(StatusCode::OK);
    for algorithm in ALGORITHMS {
        let policy = of(&live, algorithm);
        assert_eq!(policy["current"], "1", "{policy}");
        assert_eq!(policy["max_permits"], 3, "{policy}");
        let full_in = policy["full_in"].as_str().unwrap();
        assert!(full_in.starts_with("in "), "{policy}");
        assert_eq!(cell(&page, algorithm, "current"), "1", "{algorithm}");
        assert!(
            cell(&page, algorithm, "full-in").starts_with("in "),
            "{algorithm}"
        );
        assert_eq!(cell(&page, algorithm, "algorithm"), algorithm);
    }
}

// ---------------------------------------------------------------------------------------
// The console's policy form
// ---------------------------------------------------------------------------------------

/// What a browser running the console's script sends for a form: the inputs of the
/// groups the chosen algorithm does not use are disabled, and so not sent.
fn as_the_script_sends(fields: Vec<(String, String)>) -> Vec<(String, String)> {
    let algorithm = fields
        .iter()
        .find(|(name, _)| name == "algorithm")
        .map(|(_, value)| value.clone())
        .expect("the form has an algorithm");
    let groups: [(&[&str], &[&str]); 3] = [
        (&["rate", "rate_unit"], &["token_bucket", "gcra"]),
        (
            &["window_ms"],
            &["fixed_window", "sliding_log", "sliding_window"],
        ),
        (&["lease_ttl_ms"], &["concurrency"]),
    ];
    fields
        .into_iter()
        .filter(|(name, _)| {
            groups.iter().all(|(inputs, users)| {
                !inputs.contains(&name.as_str()) || users.contains(&algorithm.as_str())
            })
        })
        .collect()
}

/// The form of `page` posting to `action` with `changes` typed in, as the script sends it.
fn filled_in(page: &Page, action: &str, changes: &[(&str, &str)]) -> Vec<(String, String)> {
    let mut fields = page.form(action);
    for (name, value) in changes {
        match fields.iter_mut().find(|(n, _)| n == name) {
            Some(field) => field.1 = (*value).to_owned(),
            None => fields.push(((*name).to_owned(), (*value).to_owned())),
        }
    }
    as_the_script_sends(fields)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_owner_makes_a_fixed_window_then_a_concurrency_limit_in_the_console() {
    let app = spawn_app(Db::Sqlite).await;
    let key = shop_with_key(&app).await;
    app.create_user("olga", Some(("shop", "owner"))).await;
    let mut olga = app.sign_in("olga").await;

    let form = olga.get("/apps/shop/policies/new").await;
    form.assert_status(StatusCode::OK);
    for algorithm in ALGORITHMS {
        assert!(
            form.has(&format!("<option value=\"{algorithm}\"")),
            "{algorithm} is offered"
        );
    }
    assert!(form.has("data-algorithms=\"token_bucket gcra\""));
    assert!(form.has("data-algorithms=\"fixed_window sliding_log sliding_window\""));
    assert!(form.has("data-algorithms=\"concurrency\""));
    assert_eq!(
        form.field("/apps/shop/policies", "rate").as_deref(),
        Some("")
    );

    // Typed in a browser without the script: the rate is left empty, so not taken.
    olga.submit(
        &form,
        "/apps/shop/policies",
        &[
            ("name", "exports"),
            ("algorithm", "fixed_window"),
            ("window_ms", "60000"),
            ("max_permits", "5"),
        ],
    )
    .await
    .assert_redirect("/apps/shop?done=policy-created");
    let policy = admin_reads(&app, &policy_path("exports")).await;
    assert_eq!(field_names(&policy), policy_fields("fixed_window"));
    assert_eq!(policy["algorithm"], "fixed_window");
    assert_eq!(policy["window_ms"], 60_000);
    assert_eq!(policy["max_permits"], 5);

    let page = olga.get("/apps/shop").await;
    assert_eq!(cell(&page, "exports", "rate"), "5 per minute");
    assert_eq!(cell(&page, "exports", "algorithm"), "fixed_window");
    assert_eq!(cell(&page, "exports", "current"), "5");

    // Edited to a concurrency limit, with the script hiding the window.
    let form = olga.get("/policies/exports/edit").await;
    form.assert_status(StatusCode::OK);
    let action = "/policies/exports/edit";
    assert_eq!(
        form.field(action, "algorithm").as_deref(),
        Some("fixed_window")
    );
    assert_eq!(form.field(action, "window_ms").as_deref(), Some("60000"));
    assert_eq!(form.field(action, "rate").as_deref(), Some(""));
    let fields = filled_in(
        &form,
        action,
        &[("algorithm", "concurrency"), ("lease_ttl_ms", "30000")],
    );
    assert!(fields.iter().all(|(name, _)| name != "window_ms"));
    olga.post_raw(action, &fields)
        .await
        .assert_redirect("/apps/shop?done=policy-updated");
    let policy = admin_reads(&app, &policy_path("exports")).await;
    assert_eq!(field_names(&policy), policy_fields("concurrency"));
    assert_eq!(policy["lease_ttl_ms"], 30_000);
    assert_eq!(policy["max_permits"], 5);
    assert_eq!(policy["version"], 2);

    let page = olga.get("/apps/shop").await;
    assert_eq!(
        cell(&page, "exports", "rate"),
        "5 at once (leases up to 30 s)"
    );
    assert_eq!(cell(&page, "exports", "algorithm"), "concurrency");
    // In force at once: the grants are leases now.
    let body = expect_status(app.acquire(&key, "exports", 1).await, StatusCode::OK).await;
    assert!(is_lease_id(body["lease_id"].as_str().unwrap()), "{body}");
    assert_eq!(body["remaining"], 4);

    // The edit form shows the lease lifetime, and no window.
    let form = olga.get("/policies/exports/edit").await;
    assert_eq!(
        form.field(action, "algorithm").as_deref(),
        Some("concurrency")
    );
    assert_eq!(form.field(action, "lease_ttl_ms").as_deref(), Some("30000"));
    assert_eq!(form.field(action, "window_ms").as_deref(), Some(""));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_script_a_window_left_in_the_form_is_shown_next_to_its_field() {
    let app = spawn_app(Db::Sqlite).await;
    app.create_app("shop").await;
    app.create_policy(json!({
        "name": "exports", "owner_app": "shop", "algorithm": "fixed_window",
        "window_ms": 60_000, "max_permits": 5
    }))
    .await;
    app.create_user("olga", Some(("shop", "owner"))).await;
    let mut olga = app.sign_in("olga").await;
    let before = admin_reads(&app, &policy_path("exports")).await;
    let events = app.audit_count().await;

    let action = "/policies/exports/edit";
    let form = olga.get(action).await;
    let page = olga
        .submit(
            &form,
            action,
            &[("algorithm", "concurrency"), ("lease_ttl_ms", "30000")],
        )
        .await;
    page.assert_status(StatusCode::UNPROCESSABLE_ENTITY);
    assert!(page.has("id=\"window_ms-error\""), "{}", page.body);
    assert!(page.has("is not used by concurrency"));
    assert_eq!(
        page.field(action, "algorithm").as_deref(),
        Some("concurrency")
    );
    assert_eq!(page.field(action, "lease_ttl_ms").as_deref(), Some("30000"));
    assert_eq!(admin_reads(&app, &policy_path("exports")).await, before);
    assert_eq!(app.audit_count().await, events);

    // Emptied, it is not sent, and the change goes through.
    olga.submit(&page, action, &[("window_ms", "")])
        .await
        .assert_redirect("/apps/shop?done=policy-updated");
    let policy = admin_reads(&app, &policy_path("exports")).await;
    assert_eq!(policy["algorithm"], "concurrency");
    assert_eq!(policy["lease_ttl_ms"], 30_000);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rate_on_a_sliding_log_comes_back_next_to_its_field() {
    let app = spawn_app(Db::Sqlite).await;
    app.create_app("shop").await;
    app.create_user("olga", Some(("shop", "owner"))).await;
    let mut olga = app.sign_in("olga").await;
    let events = app.audit_count().await;

    let action = "/apps/shop/policies";
    let form = olga.get("/apps/shop/policies/new").await;
    let page = olga
        .submit(
            &form,
            action,
            &[
                ("name", "search"),
                ("algorithm", "sliding_log"),
                ("rate", "5"),
                ("window_ms", "1000"),
                ("max_permits", "10"),
            ],
        )
        .await;
    page.assert_status(StatusCode::UNPROCESSABLE_ENTITY);
    assert!(page.has("id=\"rate-error\""), "{}", page.body);
    assert!(page.has("is not used by sliding_log"));
    assert!(page.has("aria-invalid=\"true\""));
    // Everything typed is kept.
    assert_eq!(page.field(action, "rate").as_deref(), Some("5"));
    assert_eq!(
        page.field(action, "algorithm").as_deref(),
        Some("sliding_log")
    );
    assert_eq!(page.field(action, "window_ms").as_deref(), Some("1000"));
    assert_eq!(page.field(action, "name").as_deref(), Some("search"));
    assert_eq!(
        admin_reads(&app, "/api/v1/policies?app=shop").await,
        json!([])
    );
    assert_eq!(app.audit_count().await, events);

    // Without its window, the window is what is missing.
    let page = olga
        .submit(&page, action, &[("rate", ""), ("window_ms", "")])
        .await;
    page.assert_status(StatusCode::UNPROCESSABLE_ENTITY);
    assert!(page.has("id=\"window_ms-error\""), "{}", page.body);
    assert!(page.has("is required for sliding_log"));
    assert!(!page.has("id=\"rate-error\""));

    olga.submit(&page, action, &[("window_ms", "1000")])
        .await
        .assert_redirect("/apps/shop?done=policy-created");
    let policy = admin_reads(&app, &policy_path("search")).await;
    assert_eq!(field_names(&policy), policy_fields("sliding_log"));
    assert_eq!(policy["window_ms"], 1000);
    let page = olga.get("/apps/shop").await;
    assert_eq!(cell(&page, "search", "rate"), "10 per second");
}
