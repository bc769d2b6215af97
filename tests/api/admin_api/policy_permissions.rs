//! Who may not touch a policy: a viewer, and an owner of another application.

use reqwest::StatusCode;
use serde_json::json;

use super::{delete, minimal_policy, observe, patch, refused_without_trace};
use crate::helpers::*;
use crate::on_every_backend;

async fn a_viewer_cannot_create_policies(db: Db) {
    let app = spawn_app(db).await;
    app.create_app("shop").await;
    app.create_policy(minimal_policy("orders.create", "shop"))
        .await;
    let viewer = app.create_user("vera", Some(("shop", "viewer"))).await;

    // She may read them...
    let listed = expect_status(
        app.get("/api/v1/policies?app=shop", &viewer).await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(listed.as_array().unwrap().len(), 1);
    expect_status(
        app.get("/api/v1/policies/orders.create", &viewer).await,
        StatusCode::OK,
    )
    .await;

    // ...but not add one.
    let watched = ["/api/v1/policies?app=shop"];
    let before = observe(&app, &watched).await;
    let r = app
        .post(
            "/api/v1/policies",
            &viewer,
            minimal_policy("orders.refund", "shop"),
        )
        .await;
    refused_without_trace(&app, before, &watched, r, StatusCode::FORBIDDEN).await;
    assert!(!app.redis_exists(&app.policy_key("orders.refund")).await);

    // Nor change or delete one.
    let watched = ["/api/v1/policies/orders.create"];
    let before = observe(&app, &watched).await;
    let r = patch(
        &app,
        "/api/v1/policies/orders.create",
        &viewer,
        json!({"rate": 1000}),
    )
    .await;
    refused_without_trace(&app, before, &watched, r, StatusCode::FORBIDDEN).await;
    let before = observe(&app, &watched).await;
    let r = delete(&app, "/api/v1/policies/orders.create", &viewer).await;
    refused_without_trace(&app, before, &watched, r, StatusCode::FORBIDDEN).await;
}
on_every_backend!(viewer_cannot_create_policy, a_viewer_cannot_create_policies);

async fn an_owner_of_another_application_cannot_touch_a_policy(db: Db) {
    let app = spawn_app(db).await;
    app.create_app("shop").await;
    app.create_app("blog").await;
    app.create_policy(minimal_policy("orders.create", "shop"))
        .await;
    let blog_owner = app.create_user("bob", Some(("blog", "owner"))).await;
    let watched = ["/api/v1/policies/orders.create", "/api/v1/policies"];
    let key = app.policy_key("orders.create");
    let redis_rate = app.redis_field(&key, "rate").await;
    assert!(redis_rate.is_some());

    let before = observe(&app, &watched).await;
    let r = patch(
        &app,
        "/api/v1/policies/orders.create",
        &blog_owner,
        json!({"rate": 1000, "allowed_apps": ["blog"]}),
    )
    .await;
    refused_without_trace(&app, before, &watched, r, StatusCode::FORBIDDEN).await;

    let before = observe(&app, &watched).await;
    let r = delete(&app, "/api/v1/policies/orders.create", &blog_owner).await;
    refused_without_trace(&app, before, &watched, r, StatusCode::FORBIDDEN).await;

    // He cannot read it either, nor create one owned by shop.
    expect_problem(
        app.get("/api/v1/policies/orders.create", &blog_owner).await,
        StatusCode::FORBIDDEN,
    )
    .await;
    expect_problem(
        app.get("/api/v1/policies/orders.create/state", &blog_owner)
            .await,
        StatusCode::FORBIDDEN,
    )
    .await;
    let before = observe(&app, &watched).await;
    let r = app
        .post(
            "/api/v1/policies",
            &blog_owner,
            minimal_policy("orders.refund", "shop"),
        )
        .await;
    refused_without_trace(&app, before, &watched, r, StatusCode::FORBIDDEN).await;

    // Redis still holds the policy as it was.
    assert_eq!(app.redis_field(&key, "rate").await, redis_rate);
    // His own listing holds none of shop's policies.
    let listed = expect_status(
        app.get("/api/v1/policies", &blog_owner).await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(listed, json!([]));
}
on_every_backend!(
    foreign_owner_cannot_touch_policy,
    an_owner_of_another_application_cannot_touch_a_policy
);
