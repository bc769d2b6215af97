//! Changing a policy: partial changes, versions, and the fields that cannot change.

use reqwest::StatusCode;
use serde_json::json;

use super::{admin_reads, minimal_policy, newest_event, observe, patch, refused_without_trace};
use crate::helpers::*;
use crate::on_every_backend;

async fn a_partial_change_bumps_the_version_and_keeps_the_rest(db: Db) {
    let app = spawn_app(db).await;
    app.create_app("shop").await;
    app.create_app("blog").await;
    let created = app
        .create_policy(json!({
            "name": "orders.create", "owner_app": "shop", "rate": 10, "max_permits": 20,
            "allowed_apps": ["shop", "blog"], "failure_mode": "open",
            "description": "checkout"
        }))
        .await;

    let r = patch(
        &app,
        "/api/v1/policies/orders.create",
        &app.admin_token,
        json!({"rate": 0.5, "version": 1}),
    )
    .await;
    let changed = expect_status(r, StatusCode::OK).await;
    assert_eq!(changed["version"], 2);
    assert_eq!(changed["rate"], json!(0.5));
    for field in [
        "name",
        "owner_app",
        "algorithm",
        "max_permits",
        "allowed_apps",
        "failure_mode",
        "enabled",
        "description",
        "created_at",
    ] {
        assert_eq!(changed[field], created[field], "{field} was kept");
    }
    assert_eq!(
        admin_reads(&app, "/api/v1/policies/orders.create").await,
        changed
    );
    // Redis got the change.
    let key = app.policy_key("orders.create");
    assert_eq!(
        app.redis_field(&key, "rate")
            .await
            .as_deref()
            .map(str::parse::<f64>),
        Some(Ok(0.5))
    );
    assert_eq!(app.redis_field(&key, "version").await.as_deref(), Some("2"));

    // The audit event holds the policy before and after.
    let event = newest_event(&app).await;
    assert_eq!(event["action"], "update");
    assert_eq!(event["entity_id"], "orders.create");
    assert_eq!(event["before"]["rate"], json!(10.0));
    assert_eq!(event["after"]["rate"], json!(0.5));
    assert_eq!(event["before"]["version"], 1);
    assert_eq!(event["after"]["version"], 2);

    // An owner (not only the admin) may change it too.
    let owner = app.create_user("olga", Some(("shop", "owner"))).await;
    let r = patch(
        &app,
        "/api/v1/policies/orders.create",
        &owner,
        json!({"enabled": false}),
    )
    .await;
    let changed = expect_status(r, StatusCode::OK).await;
    assert_eq!(changed["enabled"], false);
    assert_eq!(changed["version"], 3);
    assert_eq!(newest_event(&app).await["actor"], "olga");
}
on_every_backend!(
    partial_patch,
    a_partial_change_bumps_the_version_and_keeps_the_rest
);

async fn a_stale_version_is_refused(db: Db) {
    let app = spawn_app(db).await;
    app.create_app("shop").await;
    app.create_policy(minimal_policy("orders.create", "shop"))
        .await;
    // Someone else changes it first.
    let r = patch(
        &app,
        "/api/v1/policies/orders.create",
        &app.admin_token,
        json!({"rate": 5}),
    )
    .await;
    expect_status(r, StatusCode::OK).await;

    let watched = ["/api/v1/policies/orders.create"];
    let before = observe(&app, &watched).await;
    let r = patch(
        &app,
        "/api/v1/policies/orders.create",
        &app.admin_token,
        json!({"rate": 50, "version": 1}),
    )
    .await;
    let problem = refused_without_trace(&app, before, &watched, r, StatusCode::CONFLICT).await;
    assert!(
        problem["type"]
            .as_str()
            .unwrap()
            .ends_with("version-conflict")
    );
    assert_eq!(problem["current_version"], 2);
    let redis_rate = app
        .redis_field(&app.policy_key("orders.create"), "rate")
        .await;
    assert_eq!(redis_rate.map(|r| r.parse::<f64>().unwrap()), Some(5.0));
}
on_every_backend!(stale_version, a_stale_version_is_refused);

async fn a_change_that_changes_nothing_keeps_the_version(db: Db) {
    let app = spawn_app(db).await;
    app.create_app("shop").await;
    let created = app
        .create_policy(minimal_policy("orders.create", "shop"))
        .await;

    let watched = ["/api/v1/policies/orders.create"];
    let before = observe(&app, &watched).await;
    for body in [
        json!({}),
        json!({"rate": 10, "max_permits": 20}),
        json!({"name": "orders.create", "owner_app": "shop", "allowed_apps": ["shop"]}),
        json!({"enabled": true, "version": 1}),
    ] {
        let r = patch(
            &app,
            "/api/v1/policies/orders.create",
            &app.admin_token,
            body,
        )
        .await;
        assert_eq!(expect_status(r, StatusCode::OK).await, created);
    }
    assert_eq!(
        observe(&app, &watched).await,
        before,
        "no version bump, no audit event"
    );
}
on_every_backend!(noop_patch, a_change_that_changes_nothing_keeps_the_version);

async fn name_and_owner_cannot_change(db: Db) {
    let app = spawn_app(db).await;
    app.create_app("shop").await;
    app.create_app("blog").await;
    app.create_policy(minimal_policy("orders.create", "shop"))
        .await;
    let watched = ["/api/v1/policies/orders.create", "/api/v1/policies"];

    for (body, field) in [
        (json!({"name": "orders.renamed"}), "name"),
        (json!({"owner_app": "blog"}), "owner_app"),
        (json!({"rate": 0}), "rate"),
        (json!({"max_permits": -3}), "max_permits"),
        (json!({"allowed_apps": ["ghost"]}), "allowed_apps"),
        (json!({"allowed_apps": []}), "allowed_apps"),
        (json!({"version": "one"}), "version"),
    ] {
        let before = observe(&app, &watched).await;
        let r = patch(
            &app,
            "/api/v1/policies/orders.create",
            &app.admin_token,
            body.clone(),
        )
        .await;
        let problem =
            refused_without_trace(&app, before, &watched, r, StatusCode::UNPROCESSABLE_ENTITY)
                .await;
        assert_eq!(problem["field"], field, "body {body}: {problem}");
    }
    expect_problem(
        app.get("/api/v1/policies/orders.renamed", &app.admin_token)
            .await,
        StatusCode::NOT_FOUND,
    )
    .await;
}
on_every_backend!(fixed_fields, name_and_owner_cannot_change);
