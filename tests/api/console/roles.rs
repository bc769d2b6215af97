//! Roles, enforced on the server: what viewers, other owners and non-admins may not do.

use reqwest::StatusCode;
use serde_json::json;

use super::{
    admin_reads, changes_to_shop, newest_event, policy_fields, refused_without_trace,
    shop_and_people, snapshot,
};
use crate::helpers::*;

/// The pages that only exist to make a change.
const EDIT_PAGES: [&str; 4] = [
    "/apps/shop/policies/new",
    "/apps/shop/delete",
    "/policies/orders.create/edit",
    "/policies/orders.create/delete",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_viewers_forged_changes_are_refused_and_change_nothing() {
    let app = spawn_app(Db::Sqlite).await;
    let key_id = shop_and_people(&app).await;
    let mut vic = app.sign_in("vic").await;
    let before = snapshot(&app).await;

    for (path, fields) in changes_to_shop(&key_id) {
        let page = vic.post_form(&path, &fields).await;
        refused_without_trace(&app, &before, &path, page, StatusCode::FORBIDDEN).await;
    }
    for path in EDIT_PAGES {
        let page = vic.get(path).await;
        refused_without_trace(&app, &before, path, page, StatusCode::FORBIDDEN).await;
    }
    // What the viewer may do still works.
    vic.get("/apps/shop").await.assert_status(StatusCode::OK);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_owner_of_another_app_cannot_touch_shop() {
    let app = spawn_app(Db::Sqlite).await;
    let key_id = shop_and_people(&app).await;
    let mut otto = app.sign_in("otto").await;
    let before = snapshot(&app).await;

    // The code answers 403 (not 404) for an application that exists.
    for (path, fields) in changes_to_shop(&key_id) {
        let page = otto.post_form(&path, &fields).await;
        refused_without_trace(&app, &before, &path, page, StatusCode::FORBIDDEN).await;
    }
    for path in EDIT_PAGES.into_iter().chain([
        "/apps/shop",
        "/apps/shop/live",
        "/policies/orders.create/overview",
    ]) {
        let page = otto.get(path).await;
        refused_without_trace(&app, &before, path, page, StatusCode::FORBIDDEN).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_owner_cannot_reach_another_apps_things_through_their_own_app() {
    let app = spawn_app(Db::Sqlite).await;
    shop_and_people(&app).await;
    app.create_policy(json!({
        "name": "other.search", "owner_app": "other", "rate": 1, "max_permits": 2
    }))
    .await;
    let r = app
        .post(
            "/api/v1/apps/other/keys",
            &app.admin_token,
            json!({"label": "theirs"}),
        )
        .await;
    let other_key = expect_status(r, StatusCode::CREATED).await;
    let other_key_id = other_key["id"].as_str().unwrap();
    let mut olga = app.sign_in("olga").await;
    let before = snapshot(&app).await;
    let other_before = admin_reads(&app, "/api/v1/apps/other").await;

    // Their key and their member, addressed through shop, are not shop's.
    let page = olga
        .post_form(&format!("/apps/shop/keys/{other_key_id}/revoke"), &[])
        .await;
    refused_without_trace(&app, &before, "their key", page, StatusCode::NOT_FOUND).await;
    let page = olga.post_form("/apps/shop/members/otto/remove", &[]).await;
    refused_without_trace(&app, &before, "their member", page, StatusCode::NOT_FOUND).await;
    // Their policy is refused by its own application.
    for path in [
        "/policies/other.search/edit",
        "/policies/other.search/delete",
    ] {
        let page = olga.get(path).await;
        refused_without_trace(&app, &before, path, page, StatusCode::FORBIDDEN).await;
        let page = olga
            .post_form(path, &policy_fields("other.search", "1"))
            .await;
        refused_without_trace(&app, &before, path, page, StatusCode::FORBIDDEN).await;
    }
    // A policy of shop may not be handed to other either: its owner is not a field.
    let mut fields = policy_fields("sneaky", "1");
    fields.push(("owner_app", "other"));
    olga.post_form("/apps/shop/policies", &fields)
        .await
        .assert_redirect("/apps/shop?done=policy-created");
    let sneaky = admin_reads(&app, "/api/v1/policies/sneaky").await;
    assert_eq!(sneaky["owner_app"], "shop");
    assert_eq!(admin_reads(&app, "/api/v1/apps/other").await, other_before);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_admins_manage_applications_and_users() {
    let app = spawn_app(Db::Sqlite).await;
    shop_and_people(&app).await;
    let mut olga = app.sign_in("olga").await;
    let before = snapshot(&app).await;

    let forged: [(&str, Vec<(&str, &str)>); 5] = [
        ("/apps", vec![("slug", "mine"), ("name", "Mine")]),
        (
            "/users",
            vec![
                ("username", "mallory"),
                ("password", PASSWORD),
                ("admin", "on"),
            ],
        ),
        ("/users/olga", vec![("role", "admin")]),
        ("/users/vic", vec![("role", "member"), ("disabled", "on")]),
        (
            "/users/vic/password",
            vec![("password", "olga knows it now")],
        ),
    ];
    for (path, fields) in forged {
        let page = olga.post_form(path, &fields).await;
        refused_without_trace(&app, &before, path, page, StatusCode::FORBIDDEN).await;
    }
    let page = olga.get("/users").await;
    refused_without_trace(&app, &before, "GET /users", page, StatusCode::FORBIDDEN).await;
    // The navigation does not offer what is refused.
    assert!(!olga.get("/apps").await.has("href=\"/users\""));

    // An admin may.
    let mut admin = app.sign_in_as_admin().await;
    let apps = admin.get("/apps").await;
    admin
        .submit(&apps, "/apps", &[("slug", "mine"), ("name", "Mine")])
        .await
        .assert_redirect("/apps/mine?done=app-created");
    assert_eq!(admin_reads(&app, "/api/v1/apps/mine").await["name"], "Mine");
    let event = newest_event(&app).await;
    assert_eq!(
        (event["actor"].clone(), event["action"].clone()),
        (json!("admin"), json!("create"))
    );
    let page = admin
        .submit(&apps, "/apps", &[("slug", "Not A Slug"), ("name", "x")])
        .await;
    page.assert_status(StatusCode::UNPROCESSABLE_ENTITY);
    assert!(page.has("id=\"slug-error\""));
    assert_eq!(page.field("/apps", "slug").as_deref(), Some("Not A Slug"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_viewer_sees_the_application_without_any_control() {
    let app = spawn_app(Db::Sqlite).await;
    shop_and_people(&app).await;
    let mut vic = app.sign_in("vic").await;

    let page = vic.get("/apps/shop").await;
    page.assert_status(StatusCode::OK);
    assert!(page.has("data-policy=\"orders.create\""));
    assert!(page.has("data-member=\"olga\""));
    assert!(page.has("<strong>viewer</strong>"));
    for control in ["id=\"new-policy\"", "class=\"edit\"", "class=\"delete\""] {
        assert!(!page.has(control), "a viewer's page has {control}");
    }
    let posting: Vec<String> = page
        .form_tags()
        .into_iter()
        .filter(|tag| tag.contains("method=\"post\""))
        .collect();
    assert_eq!(posting.len(), 1, "forms that post: {posting:?}");
    assert!(posting[0].contains("id=\"logout\""), "{posting:?}");

    // The owner sees the controls on the same page.
    let mut olga = app.sign_in("olga").await;
    let page = olga.get("/apps/shop").await;
    for control in ["id=\"new-policy\"", "class=\"edit\"", "class=\"delete\""] {
        assert!(page.has(control), "an owner's page lacks {control}");
    }
}
