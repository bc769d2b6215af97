//! Applications: creating them (admins only), invalid ones, and who sees which.

use reqwest::StatusCode;
use serde_json::{Value, json};

use super::{
    admin_reads, new_key, newest_event, observe, post_raw, put, refused_without_trace, visible_apps,
};
use crate::helpers::*;
use crate::on_every_backend;

async fn the_admin_creates_an_application(db: Db) {
    let app = spawn_app(db).await;

    let r = app
        .post(
            "/api/v1/apps",
            &app.admin_token,
            json!({"slug": "shop", "name": "The Shop", "description": "orders and carts"}),
        )
        .await;
    let created = expect_status(r, StatusCode::CREATED).await;
    assert_eq!(created["slug"], "shop");
    assert_eq!(created["name"], "The Shop");
    assert_eq!(created["description"], "orders and carts");
    let created_at = created["created_at"].as_str().unwrap();
    assert!(
        chrono::DateTime::parse_from_rfc3339(created_at).is_ok(),
        "created_at {created_at:?} is RFC 3339"
    );

    // It is listed and readable, as created.
    let listed = admin_reads(&app, "/api/v1/apps").await;
    assert_eq!(listed, json!([created.clone()]));
    let detail = admin_reads(&app, "/api/v1/apps/shop").await;
    assert_eq!(detail["name"], "The Shop");
    assert_eq!(detail["your_role"], "admin");
    assert_eq!(detail["members"], json!([]));
    assert_eq!(detail["keys"], json!([]));

    // The audit log says who made it.
    let event = newest_event(&app).await;
    assert_eq!(event["actor"], "admin");
    assert_eq!(event["action"], "create");
    assert_eq!(event["entity_type"], "app");
    assert_eq!(event["entity_id"], "shop");
    assert_eq!(event["app"], "shop");
    assert_eq!(event["before"], Value::Null);
    assert_eq!(event["after"], created);
}
on_every_backend!(admin_creates_app, the_admin_creates_an_application);

async fn an_invalid_application_is_refused_naming_the_field(db: Db) {
    let app = spawn_app(db).await;
    app.create_app("shop").await;
    let watched = ["/api/v1/apps", "/api/v1/apps/shop"];

    // The slug is taken.
    let before = observe(&app, &watched).await;
    let r = app
        .post(
            "/api/v1/apps",
            &app.admin_token,
            json!({"slug": "shop", "name": "Another shop"}),
        )
        .await;
    let problem = refused_without_trace(&app, before, &watched, r, StatusCode::CONFLICT).await;
    assert!(problem["type"].as_str().unwrap().ends_with(":conflict"));
    // In words, not Rust's Debug text of the slug's type.
    assert_eq!(
        problem["detail"], "an application with slug \"shop\" already exists",
        "{problem}"
    );

    // Each invalid body is refused naming its field: not a slug, no name, a field we do
    // not know (a typo must not be ignored), a field of the wrong type.
    for (body, field) in [
        (json!({"slug": "My Shop!", "name": "x"}), "slug"),
        (json!({"slug": "blog"}), "name"),
        (json!({"slug": "blog", "name": "  "}), "name"),
        (
            json!({"slug": "blog", "name": "Blog", "descripton": "typo"}),
            "descripton",
        ),
        (json!({"slug": "blog", "name": 7}), "name"),
    ] {
        let before = observe(&app, &watched).await;
        let r = app
            .post("/api/v1/apps", &app.admin_token, body.clone())
            .await;
        let problem =
            refused_without_trace(&app, before, &watched, r, StatusCode::UNPROCESSABLE_ENTITY)
                .await;
        assert_eq!(problem["field"], field, "body {body}: {problem}");
    }

    // Not JSON at all.
    let before = observe(&app, &watched).await;
    let r = post_raw(
        &app,
        "/api/v1/apps",
        &app.admin_token,
        "{\"slug\": \"blog\",",
    )
    .await;
    let problem = refused_without_trace(&app, before, &watched, r, StatusCode::BAD_REQUEST).await;
    assert!(problem["type"].as_str().unwrap().ends_with(":malformed"));
}
on_every_backend!(
    invalid_app,
    an_invalid_application_is_refused_naming_the_field
);

async fn only_admins_create_applications(db: Db) {
    let app = spawn_app(db).await;
    app.create_app("shop").await;
    let owner = app.create_user("olga", Some(("shop", "owner"))).await;
    let watched = ["/api/v1/apps"];

    let before = observe(&app, &watched).await;
    let r = app
        .post(
            "/api/v1/apps",
            &owner,
            json!({"slug": "side-project", "name": "Side project"}),
        )
        .await;
    let problem = refused_without_trace(&app, before, &watched, r, StatusCode::FORBIDDEN).await;
    assert!(problem["type"].as_str().unwrap().ends_with(":forbidden"));
    assert_eq!(visible_apps(&app, &app.admin_token).await, ["shop"]);
}
on_every_backend!(member_cannot_create_app, only_admins_create_applications);

async fn members_see_only_their_applications(db: Db) {
    let app = spawn_app(db).await;
    app.create_app("shop").await;
    app.create_app("blog").await;
    app.create_app("wiki").await;
    let (_, secret) = new_key(&app, "shop", &app.admin_token).await;
    app.create_user("olga", Some(("shop", "owner"))).await;
    let viewer = app.create_user("vera", Some(("shop", "viewer"))).await;
    let r = put(
        &app,
        "/api/v1/apps/wiki/members/vera",
        &app.admin_token,
        json!({"role": "owner"}),
    )
    .await;
    expect_status(r, StatusCode::OK).await;
    let outsider = app.create_user("otto", None).await;

    assert_eq!(
        visible_apps(&app, &app.admin_token).await,
        ["blog", "shop", "wiki"]
    );
    assert_eq!(visible_apps(&app, &viewer).await, ["shop", "wiki"]);
    assert!(visible_apps(&app, &outsider).await.is_empty());

    // Not a member of blog: 403, for the app and its policies (the export of its
    // policies is a 404, as for an unknown application: admin_api/export.rs).
    expect_problem(
        app.get("/api/v1/apps/blog", &viewer).await,
        StatusCode::FORBIDDEN,
    )
    .await;
    expect_problem(
        app.get("/api/v1/policies?app=blog", &viewer).await,
        StatusCode::FORBIDDEN,
    )
    .await;
    expect_problem(
        app.get("/api/v1/apps/shop", &outsider).await,
        StatusCode::FORBIDDEN,
    )
    .await;
    // An application that does not exist.
    expect_problem(
        app.get("/api/v1/apps/nowhere", &viewer).await,
        StatusCode::NOT_FOUND,
    )
    .await;

    // A viewer of shop sees it whole: members, keys (never their text), their role.
    let r = app.get("/api/v1/apps/shop", &viewer).await;
    let raw = r.text().await.unwrap();
    assert!(!raw.contains(&secret), "the key's text leaked: {raw}");
    let detail: Value = serde_json::from_str(&raw).unwrap();
    assert_eq!(detail["slug"], "shop");
    assert_eq!(detail["your_role"], "viewer");
    assert_eq!(
        detail["members"],
        json!([
            {"username": "olga", "role": "owner"},
            {"username": "vera", "role": "viewer"},
        ])
    );
    let keys = detail["keys"].as_array().unwrap();
    assert_eq!(keys.len(), 1);
    assert_eq!(keys[0]["label"], "ci");
    assert!(
        keys[0].get("key").is_none(),
        "a key listed with its text: {}",
        keys[0]
    );
    assert_eq!(keys[0]["revoked_at"], Value::Null);

    let detail = expect_status(app.get("/api/v1/apps/wiki", &viewer).await, StatusCode::OK).await;
    assert_eq!(detail["your_role"], "owner");
}
on_every_backend!(members_see_their_apps, members_see_only_their_applications);
