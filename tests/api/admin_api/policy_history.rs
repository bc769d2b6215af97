//! A policy's saved versions and rolling back to one (README, "History and rollback"): every
//! save is a version with its author; a rollback is a new version equal to the old one,
//! audited, pushed to Redis, refused when stale or by a viewer.

use reqwest::StatusCode;
use serde_json::{Value, json};

use super::{admin_reads, expect_invalid, newest_event, observe, patch, refused_without_trace};
use crate::helpers::*;
use crate::on_every_backend;

const VERSIONS: &str = "/api/v1/policies/orders.create/versions";
const ROLLBACK: &str = "/api/v1/policies/orders.create/rollback";

/// A policy on "shop" saved three times: rate 10, then 5 with max 20, then 1 with max 20.
async fn three_versions(app: &TestApp) -> String {
    let key = app.shop_with_policy("orders.create", 10.0, 10).await;
    for (rate, version) in [(5, 1), (1, 2)] {
        let r = patch(
            app,
            "/api/v1/policies/orders.create",
            &app.admin_token,
            json!({"rate": rate, "max_permits": 20, "version": version}),
        )
        .await;
        expect_status(r, StatusCode::OK).await;
    }
    key
}

fn field(versions: &Value, i: usize, path: &[&str]) -> Value {
    path.iter().fold(&versions[i], |v, k| &v[*k]).clone()
}

async fn every_save_is_a_version_with_its_author(db: Db) {
    let app = spawn_app(db).await;
    three_versions(&app).await;
    let versions = admin_reads(&app, VERSIONS).await;
    assert_eq!(versions.as_array().unwrap().len(), 3, "{versions}");
    // Newest first, each the whole policy as saved.
    for (i, (version, action, rate, max)) in [
        (3, "update", 1, 20),
        (2, "update", 5, 20),
        (1, "create", 10, 10),
    ]
    .into_iter()
    .enumerate()
    {
        assert_eq!(field(&versions, i, &["version"]), version);
        assert_eq!(field(&versions, i, &["action"]), action);
        assert_eq!(field(&versions, i, &["author"]), "admin");
        assert_eq!(field(&versions, i, &["policy", "version"]), version);
        assert_eq!(
            field(&versions, i, &["policy", "rate"]).as_f64(),
            Some(f64::from(rate))
        );
        assert_eq!(field(&versions, i, &["policy", "max_permits"]), max);
        assert_eq!(field(&versions, i, &["policy", "owner_app"]), "shop");
    }
    assert!(versions[0]["at"].as_str().unwrap().ends_with('Z'));
    // The newest is the policy as it is.
    let now = admin_reads(&app, "/api/v1/policies/orders.create").await;
    for f in [
        "rate",
        "max_permits",
        "allowed_apps",
        "scope",
        "overrides",
        "version",
    ] {
        assert_eq!(versions[0]["policy"][f], now[f], "{f}");
    }
    // A change that changes nothing is no version.
    let r = patch(
        &app,
        "/api/v1/policies/orders.create",
        &app.admin_token,
        json!({"rate": 1}),
    )
    .await;
    expect_status(r, StatusCode::OK).await;
    assert_eq!(
        admin_reads(&app, VERSIONS).await.as_array().unwrap().len(),
        3
    );
    // A viewer reads them too; paging goes back from `before`.
    let viewer = app.create_user("vera", Some(("shop", "viewer"))).await;
    let older = expect_status(
        app.get(&format!("{VERSIONS}?before=3"), &viewer).await,
        StatusCode::OK,
    )
    .await;
    let listed: Vec<i64> = older
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["version"].as_i64().unwrap())
        .collect();
    assert_eq!(listed, [2, 1]);
    expect_problem(
        app.get("/api/v1/policies/nope/versions", &app.admin_token)
            .await,
        StatusCode::NOT_FOUND,
    )
    .await;
}
on_every_backend!(versions_are_listed, every_save_is_a_version_with_its_author);

async fn a_rollback_is_a_new_version_equal_to_the_old_one(db: Db) {
    let app = spawn_app(db).await;
    let key = three_versions(&app).await;
    let owner = app.create_user("olga", Some(("shop", "owner"))).await;
    let r = app
        .post(ROLLBACK, &owner, json!({"to_version": 1, "version": 3}))
        .await;
    let rolled = expect_status(r, StatusCode::OK).await;
    assert_eq!(rolled["version"], 4);
    assert_eq!(rolled["rate"].as_f64(), Some(10.0));
    assert_eq!(rolled["max_permits"], 10);

    let versions = admin_reads(&app, VERSIONS).await;
    assert_eq!(versions[0]["version"], 4);
    assert_eq!(versions[0]["action"], "rollback");
    assert_eq!(versions[0]["restored_version"], 1);
    assert_eq!(versions[0]["author"], "olga");
    for f in [
        "rate",
        "max_permits",
        "allowed_apps",
        "failure_mode",
        "enabled",
        "scope",
    ] {
        assert_eq!(versions[0]["policy"][f], versions[3]["policy"][f], "{f}");
    }

    // Audited as a rollback naming the version, with the policy before and after.
    let event = newest_event(&app).await;
    assert_eq!(event["action"], "rollback");
    assert_eq!(event["actor"], "olga");
    assert_eq!(event["entity_id"], "orders.create");
    assert_eq!(event["after"]["restored_version"], 1);
    assert_eq!(event["before"]["rate"].as_f64(), Some(1.0));
    assert_eq!(event["after"]["rate"].as_f64(), Some(10.0));

    // Redis has it, and acquires follow it: a capacity of 10 again, not 20.
    let redis_key = app.policy_key("orders.create");
    assert_eq!(
        app.redis_field(&redis_key, "version").await.as_deref(),
        Some("4")
    );
    let r = app.acquire(&key, "orders.create", 11).await;
    expect_problem(r, StatusCode::UNPROCESSABLE_ENTITY).await;
    let r = app.acquire(&key, "orders.create", 1).await;
    let granted = expect_status(r, StatusCode::OK).await;
    assert_eq!(granted["limit"], 10);
    assert_eq!(granted["policy_version"], 4);
}
on_every_backend!(
    rollback_saves_a_new_version,
    a_rollback_is_a_new_version_equal_to_the_old_one
);

async fn a_stale_or_bad_rollback_is_refused_and_changes_nothing(db: Db) {
    let app = spawn_app(db).await;
    three_versions(&app).await;
    let watched = ["/api/v1/policies/orders.create", VERSIONS];
    let token = app.admin_token.clone();

    // Someone saved since version 2 was seen: 409 with the current version.
    let before = observe(&app, &watched).await;
    let r = app
        .post(ROLLBACK, &token, json!({"to_version": 1, "version": 2}))
        .await;
    let problem = refused_without_trace(&app, before, &watched, r, StatusCode::CONFLICT).await;
    assert_eq!(problem["current_version"], 3, "{problem}");

    // No such version; fields missing.
    let before = observe(&app, &watched).await;
    let r = app
        .post(ROLLBACK, &token, json!({"to_version": 9, "version": 3}))
        .await;
    expect_invalid(r, "to_version").await;
    let r = app.post(ROLLBACK, &token, json!({"to_version": 1})).await;
    expect_invalid(r, "version").await;
    let r = app.post(ROLLBACK, &token, json!({"version": 3})).await;
    expect_invalid(r, "to_version").await;
    assert_eq!(observe(&app, &watched).await, before);

    // A viewer may read the history but not roll back, and leaves no trace.
    let viewer = app.create_user("vera", Some(("shop", "viewer"))).await;
    let before = observe(&app, &watched).await;
    let r = app
        .post(ROLLBACK, &viewer, json!({"to_version": 1, "version": 3}))
        .await;
    refused_without_trace(&app, before, &watched, r, StatusCode::FORBIDDEN).await;
    assert_eq!(
        app.redis_field(&app.policy_key("orders.create"), "version")
            .await
            .as_deref(),
        Some("3")
    );
}
on_every_backend!(
    stale_rollback_is_refused,
    a_stale_or_bad_rollback_is_refused_and_changes_nothing
);
