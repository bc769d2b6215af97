//! Changing the algorithm, or deleting the policy: the old state in Redis goes.

use reqwest::StatusCode;
use serde_json::{Value, json};

use super::{
    ALGORITHMS, DAY_MS, admin_reads, delete, expect_invalid, field_names, own_parameter, patch,
    policy_fields, policy_path, release, shop_with_key, state_key, three_permits, value_of,
};
use crate::helpers::*;

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

/// Whether Redis holds the state that `algorithm` keeps of policy `name`: a key of its
/// own beside the policy's hash, or fields of the hash.
async fn has_state(app: &TestApp, name: &str, algorithm: &str) -> bool {
    let hash = app.policy_key(name);
    let fields: &[&str] = match algorithm {
        "fixed_window" => return app.redis_exists(&state_key(app, name, "fw")).await,
        "sliding_log" => return app.redis_exists(&state_key(app, name, "log")).await,
        "concurrency" => return app.redis_exists(&state_key(app, name, "leases")).await,
        "token_bucket" => return app.redis_exists(&state_key(app, name, "tb")).await,
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

/// Every key of policy `name` in Redis: its hash and the four state keys.
fn all_keys(app: &TestApp, name: &str) -> [String; 5] {
    [
        app.policy_key(name),
        state_key(app, name, "tb"),
        state_key(app, name, "fw"),
        state_key(app, name, "log"),
        state_key(app, name, "leases"),
    ]
}

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
