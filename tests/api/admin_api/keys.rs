//! API keys: creating them (owners, not viewers) and revoking them.

use reqwest::StatusCode;
use serde_json::{Value, json};

use super::{
    admin_reads, delete, expect_invalid, minimal_policy, new_key, newest_event, observe,
    refused_without_trace,
};
use crate::helpers::*;
use crate::on_every_backend;

async fn owners_create_keys_and_viewers_cannot(db: Db) {
    let app = spawn_app(db).await;
    app.create_app("shop").await;
    let owner = app.create_user("olga", Some(("shop", "owner"))).await;
    let viewer = app.create_user("vera", Some(("shop", "viewer"))).await;

    let r = app
        .post(
            "/api/v1/apps/shop/keys",
            &owner,
            json!({"label": "checkout"}),
        )
        .await;
    let created = expect_status(r, StatusCode::CREATED).await;
    assert_eq!(created["label"], "checkout");
    let id = created["id"].as_str().unwrap();
    let secret = created["key"].as_str().unwrap();
    assert!(secret.starts_with("rk_key_"), "key {secret:?}");

    // Listed by id, created by the owner, its text nowhere.
    let detail = admin_reads(&app, "/api/v1/apps/shop").await;
    assert_eq!(detail["keys"][0]["id"], id);
    assert_eq!(detail["keys"][0]["created_by"], "olga");
    assert!(!detail.to_string().contains(secret));
    let event = newest_event(&app).await;
    assert_eq!(event["actor"], "olga");
    assert_eq!(event["action"], "create");
    assert_eq!(event["entity_type"], "api_key");
    assert_eq!(event["entity_id"], id);
    assert_eq!(event["after"]["label"], "checkout");
    assert!(
        !event.to_string().contains(secret),
        "the audit log holds the key"
    );

    // The key identifies shop on the acquire API.
    app.create_policy(minimal_policy("orders.create", "shop"))
        .await;
    expect_status(
        app.acquire(secret, "orders.create", 1).await,
        StatusCode::OK,
    )
    .await;

    // A viewer may not make one.
    let watched = ["/api/v1/apps/shop"];
    let before = observe(&app, &watched).await;
    let r = app
        .post("/api/v1/apps/shop/keys", &viewer, json!({"label": "mine"}))
        .await;
    refused_without_trace(&app, before, &watched, r, StatusCode::FORBIDDEN).await;

    // A key needs a label.
    let r = app.post("/api/v1/apps/shop/keys", &owner, json!({})).await;
    expect_invalid(r, "label").await;
}
on_every_backend!(create_keys, owners_create_keys_and_viewers_cannot);

async fn a_revoked_key_stops_working_at_once(db: Db) {
    let app = spawn_app(db).await;
    app.create_app("shop").await;
    let owner = app.create_user("olga", Some(("shop", "owner"))).await;
    let (id, secret) = new_key(&app, "shop", &owner).await;
    app.create_policy(minimal_policy("orders.create", "shop"))
        .await;
    expect_status(
        app.acquire(&secret, "orders.create", 1).await,
        StatusCode::OK,
    )
    .await;

    let r = delete(&app, &format!("/api/v1/apps/shop/keys/{id}"), &owner).await;
    expect_status(r, StatusCode::NO_CONTENT).await;

    // The very next acquire is refused: no waiting for a sync pass.
    expect_problem(
        app.acquire(&secret, "orders.create", 1).await,
        StatusCode::UNAUTHORIZED,
    )
    .await;
    let detail = admin_reads(&app, "/api/v1/apps/shop").await;
    assert!(detail["keys"][0]["revoked_at"].is_string());
    let event = newest_event(&app).await;
    assert_eq!(event["actor"], "olga");
    assert_eq!(event["action"], "revoke");
    assert_eq!(event["entity_type"], "api_key");
    assert_eq!(event["entity_id"], id.as_str());
    assert_eq!(event["before"]["revoked_at"], Value::Null);

    // Revoking it again finds no live key.
    let watched = ["/api/v1/apps/shop"];
    let before = observe(&app, &watched).await;
    let r = delete(&app, &format!("/api/v1/apps/shop/keys/{id}"), &owner).await;
    refused_without_trace(&app, before, &watched, r, StatusCode::NOT_FOUND).await;
}
on_every_backend!(revoke_key, a_revoked_key_stops_working_at_once);

async fn an_owner_of_another_application_cannot_revoke_a_key(db: Db) {
    let app = spawn_app(db).await;
    app.create_app("shop").await;
    app.create_app("blog").await;
    let (id, secret) = new_key(&app, "shop", &app.admin_token).await;
    app.create_policy(minimal_policy("orders.create", "shop"))
        .await;
    let blog_owner = app.create_user("bob", Some(("blog", "owner"))).await;
    let watched = ["/api/v1/apps/shop", "/api/v1/apps/blog"];

    // Through shop's path: not his application.
    let before = observe(&app, &watched).await;
    let r = delete(&app, &format!("/api/v1/apps/shop/keys/{id}"), &blog_owner).await;
    refused_without_trace(&app, before, &watched, r, StatusCode::FORBIDDEN).await;

    // Through his own application's path: the key is not one of blog's.
    let before = observe(&app, &watched).await;
    let r = delete(&app, &format!("/api/v1/apps/blog/keys/{id}"), &blog_owner).await;
    refused_without_trace(&app, before, &watched, r, StatusCode::NOT_FOUND).await;

    expect_status(
        app.acquire(&secret, "orders.create", 1).await,
        StatusCode::OK,
    )
    .await;
}
on_every_backend!(
    foreign_owner_cannot_revoke,
    an_owner_of_another_application_cannot_revoke_a_key
);
