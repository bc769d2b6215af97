//! Policies: creating one with the defaults, reading, odd names, deleting, the live state.

use reqwest::StatusCode;
use serde_json::{Value, json};

use super::{admin_reads, delete, minimal_policy, newest_event, patch, policy_path};
use crate::helpers::*;
use crate::on_every_backend;

async fn a_new_policy_takes_the_defaults(db: Db) {
    let app = spawn_app(db).await;
    app.create_app("shop").await;

    let r = app
        .post(
            "/api/v1/policies",
            &app.admin_token,
            json!({"name": "orders.create", "owner_app": "shop", "rate": 0.2, "max_permits": 5}),
        )
        .await;
    let created = expect_status(r, StatusCode::CREATED).await;
    assert_eq!(created["name"], "orders.create");
    assert_eq!(created["owner_app"], "shop");
    assert_eq!(created["algorithm"], "token_bucket");
    assert_eq!(created["rate"], json!(0.2), "12 per minute, not rounded");
    assert_eq!(created["max_permits"], 5);
    assert_eq!(created["allowed_apps"], json!(["shop"]));
    assert_eq!(created["failure_mode"], "closed");
    assert_eq!(created["enabled"], true);
    assert_eq!(created["description"], "");
    assert_eq!(created["version"], 1);

    // Read back from the store, the same (rate included, exactly).
    assert_eq!(
        admin_reads(&app, "/api/v1/policies/orders.create").await,
        created
    );
    assert_eq!(
        admin_reads(&app, "/api/v1/policies?app=shop").await,
        json!([created.clone()])
    );
    assert_eq!(
        admin_reads(&app, "/api/v1/policies").await,
        json!([created.clone()])
    );

    let event = newest_event(&app).await;
    assert_eq!(event["actor"], "admin");
    assert_eq!(event["action"], "create");
    assert_eq!(event["entity_type"], "policy");
    assert_eq!(event["entity_id"], "orders.create");
    assert_eq!(event["app"], "shop");
    assert_eq!(event["after"], created);

    // Every field given explicitly is kept.
    app.create_app("blog").await;
    let full = app
        .create_policy(json!({
            "name": "search", "owner_app": "shop", "algorithm": "token_bucket",
            "rate": 2.5, "max_permits": 100, "allowed_apps": ["blog", "shop"],
            "failure_mode": "open", "enabled": false, "description": "full-text search",
        }))
        .await;
    assert_eq!(full["rate"], json!(2.5));
    assert_eq!(full["allowed_apps"], json!(["blog", "shop"]));
    assert_eq!(full["failure_mode"], "open");
    assert_eq!(full["enabled"], false);
    assert_eq!(full["description"], "full-text search");
}
on_every_backend!(policy_defaults, a_new_policy_takes_the_defaults);

async fn reading_one_policy(db: Db) {
    let app = spawn_app(db).await;
    app.create_app("shop").await;
    let created = app
        .create_policy(minimal_policy("orders.create", "shop"))
        .await;

    assert_eq!(
        admin_reads(&app, "/api/v1/policies/orders.create").await,
        created
    );
    let r = app
        .get("/api/v1/policies/orders.none", &app.admin_token)
        .await;
    let problem = expect_problem(r, StatusCode::NOT_FOUND).await;
    assert!(problem["type"].as_str().unwrap().ends_with(":not-found"));
    expect_problem(
        app.get("/api/v1/policies/orders.none/state", &app.admin_token)
            .await,
        StatusCode::NOT_FOUND,
    )
    .await;
    expect_problem(
        patch(
            &app,
            "/api/v1/policies/orders.none",
            &app.admin_token,
            json!({"rate": 1}),
        )
        .await,
        StatusCode::NOT_FOUND,
    )
    .await;
    expect_problem(
        delete(&app, "/api/v1/policies/orders.none", &app.admin_token).await,
        StatusCode::NOT_FOUND,
    )
    .await;
}
on_every_backend!(get_policy, reading_one_policy);

async fn policy_names_may_contain_slashes(db: Db) {
    let app = spawn_app(db).await;
    app.create_app("shop").await;
    let name = "api/v1/orders";
    let path = policy_path(name);
    let created = app.create_policy(minimal_policy(name, "shop")).await;
    assert_eq!(created["name"], name);

    assert_eq!(admin_reads(&app, &path).await, created);

    let r = patch(&app, &path, &app.admin_token, json!({"max_permits": 7})).await;
    let changed = expect_status(r, StatusCode::OK).await;
    assert_eq!(changed["name"], name);
    assert_eq!(changed["max_permits"], 7);
    assert_eq!(changed["version"], 2);

    let state = admin_reads(&app, &format!("{path}/state")).await;
    assert_eq!(state["max_permits"], 7);
    assert_eq!(state["version"], 2);

    // The audit filter takes the name too.
    let events = app.audit("?policy=api/v1/orders").await;
    assert_eq!(events.len(), 2);
    assert!(events.iter().all(|e| e["entity_id"] == name));

    assert!(app.redis_exists(&app.policy_key(name)).await);
    expect_status(
        delete(&app, &path, &app.admin_token).await,
        StatusCode::NO_CONTENT,
    )
    .await;
    expect_problem(
        app.get(&path, &app.admin_token).await,
        StatusCode::NOT_FOUND,
    )
    .await;
    assert!(!app.redis_exists(&app.policy_key(name)).await);
}
on_every_backend!(slashes_in_names, policy_names_may_contain_slashes);

async fn a_policy_named_like_the_state_route_is_reachable_encoded(db: Db) {
    let app = spawn_app(db).await;
    app.create_app("shop").await;
    let created = app
        .create_policy(minimal_policy("reports/state", "shop"))
        .await;

    // `/state` at the end of the path is the state route; `%2F` reaches the name itself.
    assert_eq!(
        admin_reads(&app, "/api/v1/policies/reports%2Fstate").await,
        created
    );
    let state = admin_reads(&app, "/api/v1/policies/reports%2Fstate/state").await;
    assert_eq!(state["max_permits"], 20);
    let r = patch(
        &app,
        "/api/v1/policies/reports%2Fstate",
        &app.admin_token,
        json!({"rate": 3}),
    )
    .await;
    assert_eq!(expect_status(r, StatusCode::OK).await["rate"], json!(3.0));
}
on_every_backend!(
    state_suffix_in_name,
    a_policy_named_like_the_state_route_is_reachable_encoded
);

async fn deleting_a_policy_removes_it_everywhere(db: Db) {
    let app = spawn_app(db).await;
    app.create_app("shop").await;
    let owner = app.create_user("olga", Some(("shop", "owner"))).await;
    let created = app
        .create_policy(minimal_policy("orders.create", "shop"))
        .await;
    let key = app.policy_key("orders.create");
    assert!(app.redis_exists(&key).await);

    let r = delete(&app, "/api/v1/policies/orders.create", &owner).await;
    assert_eq!(expect_status(r, StatusCode::NO_CONTENT).await, Value::Null);

    expect_problem(
        app.get("/api/v1/policies/orders.create", &app.admin_token)
            .await,
        StatusCode::NOT_FOUND,
    )
    .await;
    assert_eq!(
        admin_reads(&app, "/api/v1/policies?app=shop").await,
        json!([])
    );
    assert!(!app.redis_exists(&key).await, "the Redis hash is gone");

    let event = newest_event(&app).await;
    assert_eq!(event["actor"], "olga");
    assert_eq!(event["action"], "delete");
    assert_eq!(event["entity_type"], "policy");
    assert_eq!(event["entity_id"], "orders.create");
    assert_eq!(event["before"], created);
    assert_eq!(event["after"], Value::Null);

    // Deleting it again: there is nothing to delete.
    expect_problem(
        delete(&app, "/api/v1/policies/orders.create", &owner).await,
        StatusCode::NOT_FOUND,
    )
    .await;

    // The name is free again.
    let again = app
        .create_policy(minimal_policy("orders.create", "shop"))
        .await;
    assert_eq!(again["version"], 1);
}
on_every_backend!(delete_policy, deleting_a_policy_removes_it_everywhere);

async fn the_live_state_comes_from_redis(db: Db) {
    let app = spawn_app(db).await;
    let secret = app.shop_with_policy("orders.create", 0.2, 5).await;
    let viewer = app.create_user("vera", Some(("shop", "viewer"))).await;

    // A new bucket is full, and has never granted.
    let state = expect_status(
        app.get("/api/v1/policies/orders.create/state", &viewer)
            .await,
        StatusCode::OK,
    )
    .await;
    let fields: Vec<&str> = state
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    for field in [
        "current_permits",
        "max_permits",
        "rate",
        "version",
        "updated_ms",
    ] {
        assert!(fields.contains(&field), "{field} in {state}");
    }
    assert_eq!(state["current_permits"].as_f64(), Some(5.0));
    assert_eq!(state["max_permits"], 5);
    assert_eq!(state["rate"], json!(0.2));
    assert_eq!(state["version"], 1);
    assert_eq!(state["updated_ms"], 0);

    // Three permits taken from a bucket that refills one permit in 1000 s: two are left.
    app.create_policy(json!({
        "name": "exports", "owner_app": "shop", "rate": 0.001, "max_permits": 5
    }))
    .await;
    let body = expect_status(app.acquire(&secret, "exports", 3).await, StatusCode::OK).await;
    assert_eq!(body["remaining"], 2);
    let state = admin_reads(&app, "/api/v1/policies/exports/state").await;
    let current = state["current_permits"].as_f64().unwrap();
    assert!((2.0..3.0).contains(&current), "current_permits {current}");
    assert!(state["updated_ms"].as_i64().unwrap() > 0);

    // A change shows in the state's version.
    let r = patch(
        &app,
        "/api/v1/policies/orders.create",
        &app.admin_token,
        json!({"max_permits": 9}),
    )
    .await;
    expect_status(r, StatusCode::OK).await;
    let state = admin_reads(&app, "/api/v1/policies/orders.create/state").await;
    assert_eq!(state["version"], 2);
    assert_eq!(state["max_permits"], 9);
}
on_every_backend!(policy_state, the_live_state_comes_from_redis);
