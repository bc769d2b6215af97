//! A new policy that is invalid, or whose name is taken, is refused naming the field.

use reqwest::StatusCode;
use serde_json::{Value, json};

use super::{admin_reads, minimal_policy, observe, refused_without_trace};
use crate::helpers::*;
use crate::on_every_backend;

async fn an_invalid_policy_is_refused_naming_the_field(db: Db) {
    let app = spawn_app(db).await;
    app.create_app("shop").await;
    let watched = ["/api/v1/policies?app=shop"];
    let base = minimal_policy("orders.create", "shop");
    let with = |field: &str, value: Value| {
        let mut body = base.clone();
        body[field] = value;
        body
    };
    let cases = [
        (with("rate", json!(0)), "rate"),
        (with("rate", json!(-1)), "rate"),
        (with("rate", json!("x")), "rate"),
        (with("max_permits", json!(0)), "max_permits"),
        (with("max_permits", json!(2.5)), "max_permits"),
        (with("name", json!("bad name")), "name"),
        (
            with("allowed_apps", json!(["shop", "ghost"])),
            "allowed_apps",
        ),
        (
            with("allowed_apps", json!(["shop", "shop"])),
            "allowed_apps[1]",
        ),
        (with("failure_mode", json!("maybe")), "failure_mode"),
        (with("algorithm", json!("leaky")), "algorithm"),
        (with("version", json!(3)), "version"),
        (with("description", json!("x".repeat(1001))), "description"),
        (with("colour", json!("red")), "colour"),
        (
            json!({"owner_app": "shop", "rate": 1, "max_permits": 1}),
            "name",
        ),
        (
            json!({"name": "x", "owner_app": "shop", "max_permits": 1}),
            "rate",
        ),
    ];
    for (body, field) in cases {
        let before = observe(&app, &watched).await;
        let r = app
            .post("/api/v1/policies", &app.admin_token, body.clone())
            .await;
        let problem =
            refused_without_trace(&app, before, &watched, r, StatusCode::UNPROCESSABLE_ENTITY)
                .await;
        assert_eq!(problem["field"], field, "body {body}: {problem}");
        assert!(
            problem["errors"]
                .as_array()
                .unwrap()
                .iter()
                .any(|e| e["field"] == field),
            "body {body}: {problem}"
        );
    }
    assert_eq!(admin_reads(&app, "/api/v1/policies").await, json!([]));
}
on_every_backend!(
    invalid_policy,
    an_invalid_policy_is_refused_naming_the_field
);

async fn a_policy_name_is_taken_once(db: Db) {
    let app = spawn_app(db).await;
    app.create_app("shop").await;
    app.create_app("blog").await;
    let first = app
        .create_policy(minimal_policy("orders.create", "shop"))
        .await;

    let watched = ["/api/v1/policies/orders.create", "/api/v1/policies"];
    let before = observe(&app, &watched).await;
    let mut second = minimal_policy("orders.create", "blog");
    second["rate"] = json!(99);
    let r = app.post("/api/v1/policies", &app.admin_token, second).await;
    let problem = refused_without_trace(&app, before, &watched, r, StatusCode::CONFLICT).await;
    assert!(problem["type"].as_str().unwrap().ends_with(":conflict"));
    assert_eq!(
        admin_reads(&app, "/api/v1/policies/orders.create").await,
        first
    );
}
on_every_backend!(duplicate_policy, a_policy_name_is_taken_once);

/// A field of the wrong type is explained without Rust's names of types.
#[tokio::test]
async fn a_field_of_the_wrong_type_is_explained_in_words() {
    let app = spawn_app(Db::Sqlite).await;
    app.create_app("shop").await;
    for (value, message) in [
        (
            json!("many"),
            "invalid type: string \"many\", expected a whole number",
        ),
        (
            json!(99999999999999999999u128 as f64),
            "invalid type: floating point `1e+20`, expected a whole number",
        ),
    ] {
        let mut body = minimal_policy("orders.create", "shop");
        body["max_permits"] = value;
        let r = app.post("/api/v1/policies", &app.admin_token, body).await;
        let problem = expect_problem(r, StatusCode::UNPROCESSABLE_ENTITY).await;
        assert_eq!(problem["errors"][0]["message"], message, "{problem}");
    }
}
