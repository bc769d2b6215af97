//! Input that SQL would choke on (NUL bytes, odd paths) is refused before any query.

use reqwest::StatusCode;
use serde_json::json;

use crate::helpers::*;
use crate::on_every_backend;

async fn nul_bytes_and_odd_paths_never_reach_sql(db: Db) {
    let app = spawn_app(db).await;
    app.create_app("shop").await;
    let admin = app.admin_token.clone();
    // PostgreSQL refuses NUL in text: it must be a 4xx long before a query.
    for path in [
        "/api/v1/policies/a%00b",
        "/api/v1/policies/a%00b/state",
        "/api/v1/apps/sh%00op",
        "/api/v1/apps/shop/keys/%00",
    ] {
        let method = if path.contains("/keys/") {
            "DELETE"
        } else {
            "GET"
        };
        let r = app.send(method, path, &admin, None).await;
        expect_problem(r, StatusCode::NOT_FOUND).await;
    }
    let r = app
        .post(
            "/api/v1/apps",
            &admin,
            json!({"slug": "nul", "name": "a\u{0}b"}),
        )
        .await;
    assert_eq!(
        expect_problem(r, StatusCode::UNPROCESSABLE_ENTITY).await["field"],
        "name"
    );
    let r = app
        .post(
            "/api/v1/policies",
            &admin,
            json!({"name": "p", "owner_app": "shop", "rate": 1, "max_permits": 1, "description": "x\u{0}"}),
        )
        .await;
    assert_eq!(
        expect_problem(r, StatusCode::UNPROCESSABLE_ENTITY).await["field"],
        "description"
    );
    let r = app.get("/api/v1/audit?policy=a%00b", &admin).await;
    expect_problem(r, StatusCode::BAD_REQUEST).await;
    // An unknown owner is a field of the body: 422 naming it.
    let r = app
        .post(
            "/api/v1/policies",
            &admin,
            json!({"name": "p", "owner_app": "nowhere", "rate": 1, "max_permits": 1}),
        )
        .await;
    assert_eq!(
        expect_problem(r, StatusCode::UNPROCESSABLE_ENTITY).await["field"],
        "owner_app"
    );
}
on_every_backend!(odd_input, nul_bytes_and_odd_paths_never_reach_sql);
