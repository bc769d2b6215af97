//! Authentication: a request without a valid personal access token is 401, and a
//! read-only token's change 403.

use reqwest::StatusCode;
use serde_json::json;

use ratekeeper::control::TokenInput;
use secrecy::ExposeSecret;

use super::{admin_reads, observe, refused_without_trace};
use crate::helpers::*;
use crate::on_every_backend;

async fn requests_without_a_valid_token_get_401(db: Db) {
    let app = spawn_app(db).await;
    app.create_app("shop").await;

    // No Authorization header at all.
    let r = app
        .client
        .get(app.url("/api/v1/apps"))
        .send()
        .await
        .unwrap();
    assert!(r.headers().contains_key("www-authenticate"));
    let problem = expect_problem(r, StatusCode::UNAUTHORIZED).await;
    assert!(problem["type"].as_str().unwrap().ends_with(":unauthorized"));

    // A token that was never issued, on a read and on a change.
    let r = app.get("/api/v1/apps/shop", "rk_pat_forged").await;
    assert!(r.headers().contains_key("www-authenticate"));
    expect_problem(r, StatusCode::UNAUTHORIZED).await;

    let before = observe(&app, &["/api/v1/apps"]).await;
    let r = app
        .post(
            "/api/v1/apps",
            "rk_pat_forged",
            json!({"slug": "evil", "name": "Evil"}),
        )
        .await;
    assert!(r.headers().contains_key("www-authenticate"));
    refused_without_trace(&app, before, &["/api/v1/apps"], r, StatusCode::UNAUTHORIZED).await;

    // An API key is not a personal access token.
    let key = app.create_key("shop").await;
    expect_problem(
        app.get("/api/v1/apps", &key).await,
        StatusCode::UNAUTHORIZED,
    )
    .await;
}
on_every_backend!(no_token_is_401, requests_without_a_valid_token_get_401);

/// A read-only token reads what its user may read and changes nothing, whatever the
/// user's role: an owner's, an admin's.
async fn a_read_only_token_reads_and_changes_nothing(db: Db) {
    let app = spawn_app(db).await;
    app.create_app("shop").await;
    app.create_key("shop").await;
    let key_id = admin_reads(&app, "/api/v1/apps/shop").await["keys"][0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    app.create_user("olga", Some(("shop", "owner"))).await;
    let read_only = TokenInput {
        label: Some("dashboards".to_owned()),
        read_only: true,
        ..TokenInput::default()
    };
    let owners = app.token_for("olga", &read_only).await;
    let admins = app.token_for("admin", &read_only).await;

    for (token, reads) in [
        (&owners, vec!["/api/v1/apps/shop", "/api/v1/policies"]),
        (&admins, vec!["/api/v1/apps/shop", "/api/v1/audit"]),
    ] {
        for path in reads {
            expect_status(app.get(path, token).await, StatusCode::OK).await;
        }
        let watched = ["/api/v1/apps", "/api/v1/apps/shop", "/api/v1/policies"];
        let changes = [
            (
                "POST",
                "/api/v1/policies".to_owned(),
                Some(json!({"name": "p", "owner_app": "shop", "rate": 1, "max_permits": 5})),
            ),
            (
                "PATCH",
                "/api/v1/apps/shop".to_owned(),
                Some(json!({"name": "Shop 2"})),
            ),
            ("DELETE", format!("/api/v1/apps/shop/keys/{key_id}"), None),
            (
                "POST",
                "/api/v1/apps".to_owned(),
                Some(json!({"slug": "other", "name": "Other"})),
            ),
        ];
        for (method, path, body) in changes {
            let before = observe(&app, &watched).await;
            let r = app.send(method, &path, token, body).await;
            let problem =
                refused_without_trace(&app, before, &watched, r, StatusCode::FORBIDDEN).await;
            assert!(
                problem["detail"].as_str().unwrap().contains("read-only"),
                "{method} {path}: {problem}"
            );
        }
    }
}
on_every_backend!(read_only_token, a_read_only_token_reads_and_changes_nothing);

/// A token past its expiry is refused with a 401 that says so, and is not marked used.
async fn an_expired_token_is_refused_and_says_when_it_expired(db: Db) {
    use sqlx::Connection;
    let app = spawn_app(db).await;
    let soon = TokenInput {
        label: Some("short".to_owned()),
        expires_at: Some("2099-01-01T00:00:00Z".to_owned()),
        ..TokenInput::default()
    };
    let token = app.token_for("admin", &soon).await;
    expect_status(app.get("/api/v1/apps", &token).await, StatusCode::OK).await;

    // Its expiry moved into the past, as if 2099 had come.
    let mut sql = sqlx::AnyConnection::connect(app.settings.database_url.expose_secret())
        .await
        .unwrap();
    sqlx::raw_sql("UPDATE access_tokens SET expires_ms = 1000 WHERE label = 'short'")
        .execute(&mut sql)
        .await
        .unwrap();
    let r = app.get("/api/v1/apps", &token).await;
    let problem = expect_problem(r, StatusCode::UNAUTHORIZED).await;
    assert!(
        problem["detail"]
            .as_str()
            .unwrap()
            .contains("expired at 1970-01-01T00:00:01.000Z"),
        "{problem}"
    );
    // Refused on a change too.
    let r = app
        .post(
            "/api/v1/apps",
            &token,
            json!({"slug": "late", "name": "Late"}),
        )
        .await;
    expect_problem(r, StatusCode::UNAUTHORIZED).await;
    expect_status(
        app.get("/api/v1/apps/late", &app.admin_token).await,
        StatusCode::NOT_FOUND,
    )
    .await;
}
on_every_backend!(
    expired_token,
    an_expired_token_is_refused_and_says_when_it_expired
);
