//! Users, managed by an admin: created, promoted, disabled, reset; the last admin stays.

use reqwest::StatusCode;
use serde_json::json;

use super::{newest_event, users};
use crate::helpers::*;

/// A password reset by an admin revokes the user's access tokens too: whoever knew the
/// old password may have made them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_admins_reset_revokes_the_users_access_tokens() {
    let app = spawn_app(Db::Sqlite).await;
    let token = app.create_user("tom", None).await;
    expect_status(app.get("/api/v1/apps", &token).await, StatusCode::OK).await;
    let mut admin = app.sign_in_as_admin().await;
    admin
        .post_form("/users/tom/password", &[("password", "set by the admin")])
        .await
        .assert_redirect("/users?done=password-reset");
    expect_problem(
        app.get("/api/v1/apps", &token).await,
        StatusCode::UNAUTHORIZED,
    )
    .await;
    let event = newest_event(&app).await;
    assert_eq!(
        (&event["action"], &event["after"]),
        (&json!("set_password"), &json!({"access_tokens_revoked": 1}))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_admin_creates_promotes_disables_and_resets_a_user() {
    let app = spawn_app(Db::Sqlite).await;
    let mut admin = app.sign_in_as_admin().await;

    let users = admin.get("/users").await;
    users.assert_status(StatusCode::OK);
    // A bad name and a short password are both said at once, each by its field.
    let refused = admin
        .submit(
            &users,
            "/users",
            &[("username", "Nina!"), ("password", "short")],
        )
        .await;
    refused.assert_status(StatusCode::UNPROCESSABLE_ENTITY);
    assert!(
        refused.has("id=\"username-error\"") && refused.has("id=\"password-error\""),
        "{}",
        refused.body
    );
    admin
        .submit(
            &users,
            "/users",
            &[("username", "nina"), ("password", "ninas first password")],
        )
        .await
        .assert_redirect("/users?done=user-created");
    let mut nina = app.sign_in_with("nina", "ninas first password").await;
    nina.get("/users")
        .await
        .assert_status(StatusCode::FORBIDDEN);

    // Made an admin: her session is an admin's at once.
    admin
        .post_form("/users/nina", &[("role", "admin")])
        .await
        .assert_redirect("/users?done=user-updated");
    nina.get("/users").await.assert_status(StatusCode::OK);
    let event = newest_event(&app).await;
    assert_eq!(event["after"], json!({"admin": true, "disabled": false}));

    // Disabled: her open session stops working at once, and she cannot sign in.
    admin
        .post_form("/users/nina", &[("role", "member"), ("disabled", "on")])
        .await
        .assert_redirect("/users?done=user-updated");
    nina.get("/apps").await.assert_redirect("/login?next=/apps");
    let mut again = app.browser();
    again
        .try_sign_in("nina", "ninas first password")
        .await
        .assert_status(StatusCode::UNAUTHORIZED);
    assert!(admin.get("/users").await.has("disabled</strong>"));

    // Enabled again, then her password reset: the sessions she had end.
    admin
        .post_form("/users/nina", &[("role", "member")])
        .await
        .assert_redirect("/users?done=user-updated");
    let mut nina = app.sign_in_with("nina", "ninas first password").await;
    admin
        .post_form("/users/nina/password", &[("password", "set by the admin")])
        .await
        .assert_redirect("/users?done=password-reset");
    assert!(!nina.is_signed_in().await, "her session ended");
    app.browser()
        .try_sign_in("nina", "ninas first password")
        .await
        .assert_status(StatusCode::UNAUTHORIZED);
    app.sign_in_with("nina", "set by the admin").await;
    // The admin's own session is untouched.
    assert!(admin.is_signed_in().await);

    // A password that is too short is an error in nina's row.
    let page = admin
        .post_form("/users/nina/password", &[("password", "short")])
        .await;
    page.assert_status(StatusCode::UNPROCESSABLE_ENTITY);
    assert!(page.alert().unwrap().contains("at least 8 characters"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_last_admin_cannot_demote_or_disable_themself() {
    let app = spawn_app(Db::Sqlite).await;
    let mut admin = app.sign_in_as_admin().await;
    let before = users(&app).await;

    for fields in [
        vec![("role", "member")],
        vec![("role", "admin"), ("disabled", "on")],
    ] {
        let page = admin.post_form("/users/admin", &fields).await;
        page.assert_status(StatusCode::CONFLICT);
        assert!(page.alert().unwrap().contains("last enabled admin"));
        assert_eq!(users(&app).await, before);
    }
    admin.get("/users").await.assert_status(StatusCode::OK);
}
