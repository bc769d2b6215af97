//! What a careless or hostile client may send, refused cleanly: a body with bytes after
//! its JSON, fields of the wrong type or null, the wrong method, and rates so slow that
//! the times derived from them would not fit a reply.

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::helpers::*;

/// A raw body, as a client that does not build JSON with a library might send it.
async fn post_raw(app: &TestApp, path: &str, token: &str, body: &str) -> reqwest::Response {
    app.client
        .post(app.url(path))
        .bearer_auth(token)
        .header("content-type", "application/json")
        .body(body.to_owned())
        .send()
        .await
        .unwrap()
}

#[tokio::test]
async fn a_body_with_anything_after_its_json_object_is_malformed() {
    let app = spawn_app(Db::Sqlite).await;
    let key = app.shop_with_policy("orders.create", 10.0, 10).await;
    for body in [
        r#"{"resource":"orders.create"}xyz"#,
        r#"{"resource":"orders.create"} {}"#,
        r#"["orders.create", 1]"#,
    ] {
        let r = post_raw(&app, "/v1/acquire", &key, body).await;
        let problem = expect_problem(r, StatusCode::BAD_REQUEST).await;
        assert_eq!(
            problem["type"], "urn:ratekeeper:problem:malformed",
            "{body}"
        );
    }
    let r = post_raw(
        &app,
        "/api/v1/apps",
        &app.admin_token,
        r#"{"slug":"junk","name":"J"} junk"#,
    )
    .await;
    expect_problem(r, StatusCode::BAD_REQUEST).await;
    let r = app.get("/api/v1/apps/junk", &app.admin_token).await;
    expect_problem(r, StatusCode::NOT_FOUND).await;
}

#[tokio::test]
async fn the_client_api_answers_400_for_a_body_that_does_not_fit_and_422_only_for_permits() {
    let app = spawn_app(Db::Sqlite).await;
    let key = app.shop_with_policy("orders.create", 10.0, 10).await;
    for (body, field) in [
        (json!({"resource": 5}), "resource"),
        (json!({"resource": null}), "resource"),
        (
            json!({"resource": "orders.create", "permits": "2"}),
            "permits",
        ),
        (
            json!({"resource": "orders.create", "permits": null}),
            "permits",
        ),
        (json!({"resource": "orders.create", "extra": 1}), "extra"),
    ] {
        let problem = expect_problem(
            app.post("/v1/acquire", &key, body.clone()).await,
            StatusCode::BAD_REQUEST,
        )
        .await;
        assert_eq!(problem["field"], field, "{body}");
    }
    let problem = expect_problem(
        app.post(
            "/v1/acquire",
            &key,
            json!({"resource": "orders.create", "permits": 11}),
        )
        .await,
        StatusCode::UNPROCESSABLE_ENTITY,
    )
    .await;
    assert_eq!(problem["field"], "permits");
}

#[tokio::test]
async fn null_is_refused_naming_the_field_never_read_as_left_out() {
    let app = spawn_app(Db::Sqlite).await;
    app.shop_with_policy("orders.create", 10.0, 10).await;
    for field in [
        "rate",
        "max_permits",
        "enabled",
        "description",
        "allowed_apps",
    ] {
        let r = app
            .send(
                "PATCH",
                "/api/v1/policies/orders.create",
                &app.admin_token,
                Some(json!({ field: null })),
            )
            .await;
        let problem = expect_problem(r, StatusCode::UNPROCESSABLE_ENTITY).await;
        assert_eq!(problem["field"], field);
    }
    let policy = expect_status(
        app.get("/api/v1/policies/orders.create", &app.admin_token)
            .await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(
        (&policy["rate"], &policy["version"]),
        (&json!(10.0), &json!(1))
    );
}

#[tokio::test]
async fn a_method_a_path_does_not_serve_is_405_with_allow() {
    let app = spawn_app(Db::Sqlite).await;
    for (method, path, allow) in [
        ("GET", "/v1/acquire", "POST"),
        ("PUT", "/v1/release", "POST"),
        ("PUT", "/api/v1/apps", "GET, POST"),
        ("POST", "/api/v1/policies/x", "GET, PATCH, DELETE"),
        ("DELETE", "/api/v1/audit", "GET"),
    ] {
        let r = app.send(method, path, &app.admin_token, None).await;
        let allowed = r
            .headers()
            .get("allow")
            .map(|v| v.to_str().unwrap().to_owned());
        let problem = expect_problem(r, StatusCode::METHOD_NOT_ALLOWED).await;
        assert_eq!(allowed.as_deref(), Some(allow), "{method} {path}");
        assert_eq!(problem["type"], "urn:ratekeeper:problem:method-not-allowed");
    }
}

#[tokio::test]
async fn rates_too_slow_for_their_times_to_fit_are_refused() {
    let app = spawn_app(Db::Sqlite).await;
    app.create_app("shop").await;
    for rate in [1e-300, 2e-16, 1e-9] {
        let problem = expect_problem(
            app.post(
                "/api/v1/policies",
                &app.admin_token,
                json!({"name": "slow", "owner_app": "shop", "rate": rate, "max_permits": 1}),
            )
            .await,
            StatusCode::UNPROCESSABLE_ENTITY,
        )
        .await;
        assert_eq!(problem["field"], "rate", "{rate}");
    }
}

#[tokio::test]
async fn the_slowest_rate_with_the_largest_burst_gives_times_that_fit_every_reply() {
    let app = spawn_app(Db::Sqlite).await;
    app.create_app("shop").await;
    let key = app.create_key("shop").await;
    // One permit a year (and a little), a billion at most: years to refill.
    for algorithm in ["token_bucket", "gcra"] {
        let name = format!("slow.{algorithm}");
        app.create_policy(json!({
            "name": name, "owner_app": "shop", "algorithm": algorithm,
            "rate": 3.2e-8, "max_permits": 1_000_000_000
        }))
        .await;
        let r = app.acquire(&key, &name, 1_000_000_000).await;
        assert_eq!(r.status(), StatusCode::OK);
        let r = app.acquire(&key, &name, 1).await;
        assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
        let header = |name: &str| {
            r.headers()
                .get(name)
                .map(|v| v.to_str().unwrap().to_owned())
                .unwrap()
        };
        let ratelimit = header("ratelimit");
        let t = ratelimit.rsplit("t=").next().unwrap();
        assert!(
            t.len() <= 15 && t.parse::<i64>().unwrap() > 0,
            "{ratelimit}"
        );
        assert!(header("retry-after").parse::<i64>().unwrap() > 0);
        let body: Value = r.json().await.unwrap();
        for field in ["retry_after_ms", "reset_after_ms"] {
            let ms = body[field].as_i64().unwrap();
            assert!((1..=1_000_000_000_000_000).contains(&ms), "{field}: {body}");
        }
        let state = expect_status(
            app.get(&format!("/api/v1/policies/{name}/state"), &app.admin_token)
                .await,
            StatusCode::OK,
        )
        .await;
        let full_in = state["full_in_ms"].as_i64().unwrap();
        assert!((1..=1_000_000_000_000_000).contains(&full_in), "{state}");
    }
}
