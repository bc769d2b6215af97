//! The admin JSON API over HTTP (README, "The admin JSON API"): who may do what, the shapes of the
//! replies and errors, and the audit trail every change leaves. A refused request must
//! change nothing: each refusal is checked by reading the data back as the admin and by
//! looking for an audit event it must not have written.
//!
//! One file per area: `authentication`, `apps`, `members`, `keys`, `policies` (create,
//! read, delete, live state), `policy_validation`, `policy_permissions`, `policy_changes`
//! (partial changes and versions), `simultaneous_requests`, `audit` and `odd_input`. The
//! helpers below are shared by them.

use reqwest::{Response, StatusCode};
use serde_json::{Value, json};

use crate::helpers::*;

mod apply;
mod apps;
mod audit;
mod authentication;
mod descriptors;
mod export;
mod hostile_files;
mod keys;
mod members;
mod odd_input;
mod policies;
mod policy_changes;
mod policy_history;
mod policy_permissions;
mod policy_validation;
mod simultaneous_requests;
mod webhooks;

async fn put(app: &TestApp, path: &str, token: &str, body: Value) -> Response {
    app.send("PUT", path, token, Some(body)).await
}

async fn patch(app: &TestApp, path: &str, token: &str, body: Value) -> Response {
    app.send("PATCH", path, token, Some(body)).await
}

async fn delete(app: &TestApp, path: &str, token: &str) -> Response {
    app.send("DELETE", path, token, None).await
}

/// A POST with a raw (not necessarily JSON) body.
async fn post_raw(app: &TestApp, path: &str, token: &str, body: &str) -> Response {
    app.client
        .post(app.url(path))
        .bearer_auth(token)
        .header("content-type", "application/json")
        .body(body.to_owned())
        .send()
        .await
        .expect("request sent")
}

/// What the admin reads at `path` (200 expected).
async fn admin_reads(app: &TestApp, path: &str) -> Value {
    expect_status(app.get(path, &app.admin_token).await, StatusCode::OK).await
}

/// The newest audit event, as the admin sees it.
async fn newest_event(app: &TestApp) -> Value {
    app.audit("")
        .await
        .into_iter()
        .next()
        .expect("an audit event")
}

/// The application slugs a caller sees on `GET /api/v1/apps`.
async fn visible_apps(app: &TestApp, token: &str) -> Vec<String> {
    let body = expect_status(app.get("/api/v1/apps", token).await, StatusCode::OK).await;
    body.as_array()
        .unwrap()
        .iter()
        .map(|a| a["slug"].as_str().unwrap().to_owned())
        .collect()
}

/// What the admin sees at these paths, and the id of the newest audit event: taken
/// before and after a refused request, they must be equal.
#[derive(Debug, PartialEq)]
struct Observed {
    views: Vec<Value>,
    newest_event_id: Value,
}

async fn observe(app: &TestApp, paths: &[&str]) -> Observed {
    let mut views = Vec::new();
    for path in paths {
        views.push(admin_reads(app, path).await);
    }
    Observed {
        views,
        newest_event_id: newest_event(app).await["id"].clone(),
    }
}

/// A refused request: the problem's status, and nothing changed at `paths` or in the
/// audit log.
async fn refused_without_trace(
    app: &TestApp,
    before: Observed,
    paths: &[&str],
    response: Response,
    status: StatusCode,
) -> Value {
    let problem = expect_problem(response, status).await;
    assert_eq!(
        observe(app, paths).await,
        before,
        "a refused request changed something"
    );
    problem
}

/// A 422 naming `field`.
async fn expect_invalid(response: Response, field: &str) -> Value {
    let problem = expect_problem(response, StatusCode::UNPROCESSABLE_ENTITY).await;
    assert!(problem["type"].as_str().unwrap().ends_with(":validation"));
    assert_eq!(problem["field"], field, "problem: {problem}");
    problem
}

/// A new API key of `slug` made with `token`: (id, key text).
async fn new_key(app: &TestApp, slug: &str, token: &str) -> (String, String) {
    let r = app
        .post(
            &format!("/api/v1/apps/{slug}/keys"),
            token,
            json!({"label": "ci"}),
        )
        .await;
    let body = expect_status(r, StatusCode::CREATED).await;
    (
        body["id"].as_str().unwrap().to_owned(),
        body["key"].as_str().unwrap().to_owned(),
    )
}

/// A policy with only the required fields.
fn minimal_policy(name: &str, owner: &str) -> Value {
    json!({"name": name, "owner_app": owner, "rate": 10, "max_permits": 20})
}

fn policy_path(name: &str) -> String {
    format!("/api/v1/policies/{name}")
}
