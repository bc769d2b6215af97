//! Policies as a file (README "Policy files"): `GET /api/v1/export` writes every field in
//! the units it was entered in, and reading the file back gives exactly the stored specs;
//! the same permission rules as `GET /api/v1/policies`; the schema accepts the export.

use ratekeeper::auth::Actor;
use ratekeeper::control::PolicyInput;
use ratekeeper::domain::{DisplayUnits, DurationUnit, PolicySpec, RateUnit};
use ratekeeper::policy_file;
use reqwest::StatusCode;
use serde::Deserialize;
use serde_json::{Value, json};

use super::minimal_policy;
use crate::helpers::*;
use crate::on_every_backend;

/// A policy made as the console makes it: fields and the units they were entered in.
async fn create_with_units(app: &TestApp, body: Value, units: DisplayUnits) {
    let mut input: PolicyInput = serde_json::from_value(body).unwrap();
    input.units = Some(units);
    app.core()
        .await
        .control
        .create_policy(&Actor::operator(), input)
        .await
        .expect("the policy is created");
}

/// Policies of every algorithm and scope, with overrides and units, in two applications.
async fn every_kind_of_policy(app: &TestApp) {
    app.create_app("shop").await;
    app.create_app("billing").await;
    let units = |rate, window, lease_ttl| DisplayUnits {
        rate,
        window,
        lease_ttl,
    };
    create_with_units(
        app,
        json!({"name": "orders.create", "owner_app": "shop", "rate": 100.0 / 60.0, "max_permits": 20,
            "scope": "per_key", "description": "checkout: one user's orders\nsecond line",
            "overrides": [{"match": "vip", "rate": 5.0, "max_permits": 100}, {"match": "bot", "max_permits": 1}]}),
        units(Some(RateUnit::Minute), None, None),
    )
    .await;
    create_with_units(
        app,
        json!({"name": "reports/export", "owner_app": "shop", "algorithm": "fixed_window", "window_ms": 300_000,
            "max_permits": 50, "scope": "per_app", "allowed_apps": ["shop", "billing"], "failure_mode": "open", "mode": "shadow",
            "overrides": [{"match": "billing", "window_ms": 60_000}]}),
        units(None, Some(DurationUnit::Minute), None),
    )
    .await;
    create_with_units(
        app,
        json!({"name": "search", "owner_app": "shop", "algorithm": "sliding_log", "window_ms": 30_000,
            "max_permits": 5, "enabled": false}),
        units(None, Some(DurationUnit::Second), None),
    )
    .await;
    create_with_units(
        app,
        json!({"name": "invoices.list", "owner_app": "billing", "algorithm": "sliding_window",
            "window_ms": 3_600_000, "max_permits": 1000}),
        units(None, Some(DurationUnit::Hour), None),
    )
    .await;
    create_with_units(
        app,
        json!({"name": "jobs.run", "owner_app": "billing", "algorithm": "concurrency",
            "lease_ttl_ms": 500, "max_permits": 3, "scope": "per_key",
            "overrides": [{"match": "nightly", "lease_ttl_ms": 1500}]}),
        units(None, None, Some(DurationUnit::Ms)),
    )
    .await;
    create_with_units(
        app,
        json!({"name": "emails.send", "owner_app": "billing", "algorithm": "gcra", "rate": 7.0 / 86_400.0,
            "max_permits": 2}),
        units(Some(RateUnit::Day), None, None),
    )
    .await;
    // Made through the JSON API: no units, written back as per second and ms.
    app.create_policy(
        json!({"name": "pings", "owner_app": "shop", "algorithm": "token_bucket",
        "rate": 2.5, "max_permits": 4}),
    )
    .await;
    app.create_policy(
        json!({"name": "uploads", "owner_app": "shop", "algorithm": "fixed_window",
        "window_ms": 1500, "max_permits": 4}),
    )
    .await;
}

/// The stored specs, by name.
async fn stored_specs(app: &TestApp) -> Vec<PolicySpec> {
    let core = app.core().await;
    let mut tx = core.store.begin_read().await.unwrap();
    let mut specs: Vec<PolicySpec> = tx
        .list_policies(None)
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.spec)
        .collect();
    tx.commit().await.unwrap();
    specs.sort_by(|a, b| a.name.cmp(&b.name));
    specs
}

fn sorted(mut specs: Vec<PolicySpec>) -> Vec<PolicySpec> {
    specs.sort_by(|a, b| a.name.cmp(&b.name));
    specs
}

async fn export(app: &TestApp, query: &str, token: &str, accept: &str) -> reqwest::Response {
    app.client
        .get(app.url(&format!("/api/v1/export{query}")))
        .bearer_auth(token)
        .header("accept", accept)
        .send()
        .await
        .expect("request sent")
}

async fn export_text(app: &TestApp, query: &str, token: &str, accept: &str) -> String {
    let r = export(app, query, token, accept).await;
    assert_eq!(r.status(), StatusCode::OK);
    let wanted = if accept == "application/json" {
        "application/json"
    } else {
        "application/yaml"
    };
    assert_eq!(r.headers()["content-type"], wanted);
    r.text().await.unwrap()
}

/// Each YAML document of `text` as JSON, as a schema checker reads it.
fn yaml_documents(text: &str) -> Vec<Value> {
    serde_norway::Deserializer::from_str(text)
        .map(|d| Value::deserialize(d).unwrap())
        .collect()
}

async fn an_export_reads_back_as_the_stored_policies(db: Db) {
    let app = spawn_app(db).await;
    every_kind_of_policy(&app).await;
    let stored = stored_specs(&app).await;
    assert_eq!(stored.len(), 8);

    let yaml = export_text(&app, "", &app.admin_token, "*/*").await;
    assert_eq!(sorted(policy_file::parse(&yaml).unwrap()), stored, "{yaml}");
    // In the units they were entered in.
    for written in [
        "rate: 100/min",
        "window: 5m",
        "window: 30s",
        "window: 1h",
        "lease: 500ms",
        "rate: 7/day",
        "rate: 2.5",
        "window: 1500",
        "lease: 1500ms",
        "window: 1m",
        "rate: 300/min",
    ] {
        assert!(yaml.contains(written), "{written:?} in\n{yaml}");
    }
    assert_eq!(yaml_documents(&yaml).len(), 2, "a document per application");

    let json_text = export_text(&app, "", &app.admin_token, "application/json").await;
    assert_eq!(sorted(policy_file::parse(&json_text).unwrap()), stored);

    // The schema served accepts both, and refuses a file with a typo.
    let schema = expect_status(
        app.client
            .get(app.url("/api/v1/policies/schema.json"))
            .send()
            .await
            .unwrap(),
        StatusCode::OK,
    )
    .await;
    let validator = jsonschema::validator_for(&schema).expect("a valid schema");
    let json_doc: Value = serde_json::from_str(&json_text).unwrap();
    assert!(validator.is_valid(&json_doc));
    for document in yaml_documents(&yaml) {
        let errors: Vec<String> = validator
            .iter_errors(&document)
            .map(|e| e.to_string())
            .collect();
        assert!(errors.is_empty(), "{errors:?}");
    }
    let typo = json!({"app": "shop", "policies": [{"name": "a", "max_permit": 1}]});
    assert!(!validator.is_valid(&typo));
    let bad_unit =
        json!({"app": "shop", "policies": [{"name": "a", "max_permits": 1, "rate": "5/week"}]});
    assert!(!validator.is_valid(&bad_unit));
}
on_every_backend!(
    export_round_trip,
    an_export_reads_back_as_the_stored_policies
);

async fn export_follows_the_policy_permissions(db: Db) {
    let app = spawn_app(db).await;
    app.create_app("shop").await;
    app.create_app("billing").await;
    app.create_app("empty").await;
    app.create_policy(minimal_policy("orders.create", "shop"))
        .await;
    app.create_policy(minimal_policy("invoices.list", "billing"))
        .await;
    let names = |text: &str| -> Vec<String> {
        policy_file::parse(text)
            .unwrap()
            .iter()
            .map(|s| s.name.to_string())
            .collect()
    };

    // `app` filters.
    let shop = export_text(&app, "?app=shop", &app.admin_token, "application/yaml").await;
    assert_eq!(names(&shop), ["orders.create"]);
    // An application without policies: an empty file, still a valid one.
    let empty = export_text(&app, "?app=empty", &app.admin_token, "application/json").await;
    assert_eq!(empty.trim(), "[]");

    // A viewer of shop sees shop's only, with or without `app`.
    let viewer = app.create_user("vera", Some(("shop", "viewer"))).await;
    assert_eq!(
        names(&export_text(&app, "", &viewer, "*/*").await),
        ["orders.create"]
    );
    // Someone else's application is as unknown as one that does not exist.
    let hidden = expect_problem(
        export(&app, "?app=billing", &viewer, "*/*").await,
        StatusCode::NOT_FOUND,
    )
    .await;
    let unknown = expect_problem(
        export(&app, "?app=nowhere", &viewer, "*/*").await,
        StatusCode::NOT_FOUND,
    )
    .await;
    assert_eq!(hidden, unknown);
    expect_problem(
        export(&app, "?app=nowhere", &app.admin_token, "*/*").await,
        StatusCode::NOT_FOUND,
    )
    .await;
    expect_problem(
        export(&app, "", "rk_pat_wrong", "*/*").await,
        StatusCode::UNAUTHORIZED,
    )
    .await;
}
on_every_backend!(export_permissions, export_follows_the_policy_permissions);
