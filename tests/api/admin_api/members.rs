//! Members of an application: setting roles, who may change them, removing one.

use reqwest::StatusCode;
use serde_json::{Value, json};

use super::{
    admin_reads, delete, expect_invalid, newest_event, observe, put, refused_without_trace,
    visible_apps,
};
use crate::helpers::*;
use crate::on_every_backend;

async fn owners_and_admins_set_member_roles(db: Db) {
    let app = spawn_app(db).await;
    app.create_app("shop").await;
    let owner = app.create_user("olga", Some(("shop", "owner"))).await;
    app.create_user("vera", None).await;

    // The owner adds vera as a viewer.
    let r = put(
        &app,
        "/api/v1/apps/shop/members/vera",
        &owner,
        json!({"role": "viewer"}),
    )
    .await;
    assert_eq!(
        expect_status(r, StatusCode::OK).await,
        json!({"username": "vera", "role": "viewer"})
    );
    let event = newest_event(&app).await;
    assert_eq!(
        (
            &event["actor"],
            &event["action"],
            &event["entity_type"],
            &event["entity_id"]
        ),
        (
            &json!("olga"),
            &json!("create"),
            &json!("member"),
            &json!("vera")
        )
    );
    assert_eq!(event["app"], "shop");
    assert_eq!(event["before"], Value::Null);
    assert_eq!(
        event["after"],
        json!({"username": "vera", "role": "viewer"})
    );

    // The admin makes her an owner: the same PUT changes the role.
    let r = put(
        &app,
        "/api/v1/apps/shop/members/vera",
        &app.admin_token,
        json!({"role": "owner"}),
    )
    .await;
    assert_eq!(expect_status(r, StatusCode::OK).await["role"], "owner");
    let detail = admin_reads(&app, "/api/v1/apps/shop").await;
    assert_eq!(
        detail["members"],
        json!([
            {"username": "olga", "role": "owner"},
            {"username": "vera", "role": "owner"},
        ])
    );
    let event = newest_event(&app).await;
    assert_eq!(event["actor"], "admin");
    assert_eq!(event["action"], "update");
    assert_eq!(event["before"]["role"], "viewer");
    assert_eq!(event["after"]["role"], "owner");

    // A role that does not exist, or none at all.
    let watched = ["/api/v1/apps/shop"];
    let before = observe(&app, &watched).await;
    let r = put(
        &app,
        "/api/v1/apps/shop/members/vera",
        &owner,
        json!({"role": "superuser"}),
    )
    .await;
    let problem =
        refused_without_trace(&app, before, &watched, r, StatusCode::UNPROCESSABLE_ENTITY).await;
    assert_eq!(problem["field"], "role");
    let r = put(&app, "/api/v1/apps/shop/members/vera", &owner, json!({})).await;
    expect_invalid(r, "role").await;

    // A user that does not exist.
    let before = observe(&app, &watched).await;
    let r = put(
        &app,
        "/api/v1/apps/shop/members/nobody",
        &owner,
        json!({"role": "viewer"}),
    )
    .await;
    refused_without_trace(&app, before, &watched, r, StatusCode::NOT_FOUND).await;
}
on_every_backend!(set_member_roles, owners_and_admins_set_member_roles);

async fn a_viewer_cannot_change_members(db: Db) {
    let app = spawn_app(db).await;
    app.create_app("shop").await;
    app.create_user("olga", Some(("shop", "owner"))).await;
    let viewer = app.create_user("vera", Some(("shop", "viewer"))).await;
    app.create_user("mallory", None).await;
    let watched = ["/api/v1/apps/shop"];

    // She can neither promote herself, nor add a friend, nor remove the owner.
    let before = observe(&app, &watched).await;
    let r = put(
        &app,
        "/api/v1/apps/shop/members/vera",
        &viewer,
        json!({"role": "owner"}),
    )
    .await;
    refused_without_trace(&app, before, &watched, r, StatusCode::FORBIDDEN).await;

    let before = observe(&app, &watched).await;
    let r = put(
        &app,
        "/api/v1/apps/shop/members/mallory",
        &viewer,
        json!({"role": "viewer"}),
    )
    .await;
    refused_without_trace(&app, before, &watched, r, StatusCode::FORBIDDEN).await;

    let before = observe(&app, &watched).await;
    let r = delete(&app, "/api/v1/apps/shop/members/olga", &viewer).await;
    refused_without_trace(&app, before, &watched, r, StatusCode::FORBIDDEN).await;

    let detail = admin_reads(&app, "/api/v1/apps/shop").await;
    assert_eq!(
        detail["members"],
        json!([
            {"username": "olga", "role": "owner"},
            {"username": "vera", "role": "viewer"},
        ])
    );
}
on_every_backend!(viewer_cannot_change_members, a_viewer_cannot_change_members);

async fn a_removed_member_no_longer_sees_the_application(db: Db) {
    let app = spawn_app(db).await;
    app.create_app("shop").await;
    let owner = app.create_user("olga", Some(("shop", "owner"))).await;
    let viewer = app.create_user("vera", Some(("shop", "viewer"))).await;
    assert_eq!(visible_apps(&app, &viewer).await, ["shop"]);

    let r = delete(&app, "/api/v1/apps/shop/members/vera", &owner).await;
    assert_eq!(expect_status(r, StatusCode::NO_CONTENT).await, Value::Null);

    assert!(visible_apps(&app, &viewer).await.is_empty());
    expect_problem(
        app.get("/api/v1/apps/shop", &viewer).await,
        StatusCode::FORBIDDEN,
    )
    .await;
    let detail = admin_reads(&app, "/api/v1/apps/shop").await;
    assert_eq!(
        detail["members"],
        json!([{"username": "olga", "role": "owner"}])
    );

    let event = newest_event(&app).await;
    assert_eq!(event["actor"], "olga");
    assert_eq!(event["action"], "delete");
    assert_eq!(event["entity_type"], "member");
    assert_eq!(event["entity_id"], "vera");
    assert_eq!(
        event["before"],
        json!({"username": "vera", "role": "viewer"})
    );
    assert_eq!(event["after"], Value::Null);

    // Removing her again: there is no such member any more.
    let watched = ["/api/v1/apps/shop"];
    let before = observe(&app, &watched).await;
    let r = delete(&app, "/api/v1/apps/shop/members/vera", &owner).await;
    refused_without_trace(&app, before, &watched, r, StatusCode::NOT_FOUND).await;
}
on_every_backend!(
    remove_member,
    a_removed_member_no_longer_sees_the_application
);
