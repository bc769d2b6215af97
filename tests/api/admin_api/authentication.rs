//! Authentication: a request without a valid personal access token is 401.

use reqwest::StatusCode;
use serde_json::json;

use super::{observe, refused_without_trace};
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
