//! What is not there: unknown pages, names no user can have; and the static files.

use reqwest::StatusCode;

use crate::helpers::*;
use crate::on_every_backend;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_pages_and_static_files() {
    let app = spawn_app(Db::Sqlite).await;
    let mut browser = app.browser();

    let page = browser.get("/nope").await;
    page.assert_status(StatusCode::NOT_FOUND);
    assert!(
        page.header("content-type")
            .unwrap()
            .starts_with("text/html")
    );
    assert!(page.has("Page not found"));

    let r = app
        .client
        .get(app.url("/api/v1/nope"))
        .send()
        .await
        .unwrap();
    expect_problem(r, StatusCode::NOT_FOUND).await;

    for (file, content_type, sample) in [
        ("style.css", "text/css; charset=utf-8", "{"),
        ("console.js", "text/javascript; charset=utf-8", "use strict"),
    ] {
        let page = browser.get(&format!("/static/{file}")).await;
        page.assert_status(StatusCode::OK);
        assert_eq!(page.header("content-type"), Some(content_type));
        assert!(page.has(sample));
    }
    let page = browser.get("/static/nope.js").await;
    page.assert_status(StatusCode::NOT_FOUND);
    assert!(
        page.header("content-type")
            .unwrap()
            .starts_with("text/html")
    );

    // The home page sends to the applications (and so, signed out, to sign in).
    browser.get("/").await.assert_redirect("/apps");
}

/// Names no user can have (a NUL, which PostgreSQL refuses in text) are unknown users and
/// users, never a server error.
async fn unknown_names(db: Db) {
    let app = spawn_app(db).await;
    let mut browser = app.browser();
    browser
        .try_sign_in("ol\u{0}ga", PASSWORD)
        .await
        .assert_status(StatusCode::UNAUTHORIZED);

    let mut admin = app.sign_in_as_admin().await;
    admin
        .post_form(
            "/users/ol%00ga/password",
            &[("password", "a new password 1")],
        )
        .await
        .assert_status(StatusCode::NOT_FOUND);
    admin
        .post_form("/users/ol%00ga", &[("role", "admin")])
        .await
        .assert_status(StatusCode::NOT_FOUND);
}

on_every_backend!(names_no_user_can_have_are_unknown, unknown_names);
