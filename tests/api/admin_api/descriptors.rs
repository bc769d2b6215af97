//! Descriptor patterns through the JSON API: shown as given, every invalid part named
//! (`descriptors[1].entries[0]`), one pattern never declared by two policies (also not
//! through a policy file), kept by a change that leaves them out, in the OpenAPI document.

use reqwest::StatusCode;
use serde_json::{Value, json};

use super::admin_reads;
use super::apply::apply;
use crate::helpers::*;

fn users_policy(name: &str, descriptors: Value) -> Value {
    json!({
        "name": name, "owner_app": "shop", "algorithm": "fixed_window",
        "max_permits": 10, "window_ms": 1000, "scope": "per_key",
        "descriptors": descriptors,
    })
}

/// The fields of a 422's errors, in order.
fn fields(problem: &Value) -> Vec<String> {
    problem["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["field"].as_str().unwrap().to_owned())
        .collect()
}

async fn refused(app: &TestApp, body: Value) -> Value {
    let r = app.post("/api/v1/policies", &app.admin_token, body).await;
    expect_problem(r, StatusCode::UNPROCESSABLE_ENTITY).await
}

#[tokio::test]
async fn patterns_are_shown_as_given_and_kept_by_a_change() {
    let app = spawn_app(Db::Sqlite).await;
    app.create_app("shop").await;
    let given = json!([
        {"domain": "edge", "entries": ["database=users", "user_id"]},
        {"entries": ["path=/a=b", "user_id"]}
    ]);
    let created = app
        .create_policy(users_policy("users", given.clone()))
        .await;
    assert_eq!(created["descriptors"], given);
    let changed = app.edit_policy("users", json!({"max_permits": 20})).await;
    assert_eq!(changed["descriptors"], given, "left out: kept");
    let emptied = app.edit_policy("users", json!({"descriptors": []})).await;
    assert_eq!(emptied["descriptors"], json!([]));
    // A global policy's patterns are exact, and a scope change re-checks kept ones.
    app.create_policy(json!({
        "name": "login", "owner_app": "shop", "rate": 1, "max_permits": 1,
        "descriptors": [{"entries": ["generic_key=login"]}]
    }))
    .await;
    let r = app
        .send(
            "PATCH",
            "/api/v1/policies/login",
            &app.admin_token,
            Some(json!({"scope": "per_key"})),
        )
        .await;
    let problem = expect_problem(r, StatusCode::UNPROCESSABLE_ENTITY).await;
    assert_eq!(fields(&problem), ["descriptors[0].entries"], "{problem}");
}

#[tokio::test]
async fn every_invalid_part_is_named() {
    let app = spawn_app(Db::Sqlite).await;
    app.create_app("shop").await;
    let problem = refused(
        &app,
        users_policy(
            "users",
            json!([
                {"entries": ["user_id"]},
                {"domain": "bad domain", "entries": ["no space=x", "k=", "user_id"]},
                {"entries": []},
                {"entries": ["user_id"]},
                {"entries": ["database=users"]}
            ]),
        ),
    )
    .await;
    assert_eq!(
        fields(&problem),
        [
            "descriptors[1].domain",
            "descriptors[1].entries[0]",
            "descriptors[1].entries[1]",
            "descriptors[2].entries",
            "descriptors[3]",
            "descriptors[4].entries"
        ],
        "{problem}"
    );
    let global = json!({
        "name": "g", "owner_app": "shop", "rate": 1, "max_permits": 1,
        "descriptors": [{"entries": ["a=b", "user_id"]}]
    });
    let problem = refused(&app, global).await;
    assert_eq!(fields(&problem), ["descriptors[0].entries[1]"]);
    assert!(
        problem["errors"][0]["message"]
            .as_str()
            .unwrap()
            .contains("per_key")
    );
    // `shared` only on a wildcard value; a per-value wildcard keys the bucket (per_key).
    let wild = json!({
        "name": "w", "owner_app": "shop", "rate": 1, "max_permits": 1,
        "descriptors": [{"entries": ["shared a=b", "shared files=f*"]}, {"entries": ["path=/api/*"]}]
    });
    let problem = refused(&app, wild).await;
    assert_eq!(
        fields(&problem),
        ["descriptors[0].entries[0]", "descriptors[1].entries[0]"],
        "{problem}"
    );
    assert!(
        problem["errors"][0]["message"]
            .as_str()
            .unwrap()
            .contains("wildcard"),
        "{problem}"
    );
    let too_many: Vec<Value> = (0..17)
        .map(|i| json!({"entries": [format!("k{i}"), "user_id"]}))
        .collect();
    let problem = refused(&app, users_policy("many", json!(too_many))).await;
    assert_eq!(fields(&problem), ["descriptors"]);
    let null = users_policy("n", json!([{"entries": null}]));
    let r = app.post("/api/v1/policies", &app.admin_token, null).await;
    assert!(r.status().is_client_error(), "{}", r.status());
    let listed = admin_reads(&app, "/api/v1/policies").await;
    assert_eq!(listed, json!([]), "nothing saved");
}

#[tokio::test]
async fn another_policys_pattern_is_refused_naming_it() {
    let app = spawn_app(Db::Sqlite).await;
    app.create_app("shop").await;
    let pattern = json!([{"domain": "edge", "entries": ["database=users", "user_id"]}]);
    app.create_policy(users_policy("users", pattern.clone()))
        .await;
    let problem = refused(&app, users_policy("copy", pattern.clone())).await;
    assert_eq!(fields(&problem), ["descriptors[0]"]);
    assert!(
        problem["errors"][0]["message"]
            .as_str()
            .unwrap()
            .contains("users"),
        "{problem}"
    );
    // Another domain, or none, is another pattern.
    app.create_policy(users_policy(
        "anywhere",
        json!([{"entries": ["database=users", "user_id"]}]),
    ))
    .await;
    // Through a policy file: against the stored ones, and within the file.
    let file = "app: shop
policies:
  - name: from-file
    algorithm: fixed_window
    window: 1s
    max_permits: 1
    scope: per_key
    descriptors:
      - domain: edge
        entries: [database=users, user_id]
  - name: twin-a
    rate: 1/s
    max_permits: 1
    descriptors:
      - entries: [generic_key=twin]
  - name: twin-b
    rate: 1/s
    max_permits: 1
    descriptors:
      - entries: [generic_key=twin]
";
    let r = apply(&app, "?dry_run=true", &app.admin_token, file).await;
    let problem = expect_problem(r, StatusCode::UNPROCESSABLE_ENTITY).await;
    assert_eq!(
        fields(&problem),
        [
            "from-file.descriptors[0]",
            "twin-a.descriptors[0]",
            "twin-b.descriptors[0]"
        ],
        "{problem}"
    );
    // The file that takes the pattern over from the policy it changes applies.
    let moved = "app: shop
policies:
  - name: users
    algorithm: fixed_window
    window: 1s
    max_permits: 10
    scope: per_key
    descriptors: []
  - name: from-file
    algorithm: fixed_window
    window: 1s
    max_permits: 1
    scope: per_key
    descriptors:
      - domain: edge
        entries: [database=users, user_id]
";
    let r = apply(&app, "", &app.admin_token, moved).await;
    let plan = expect_status(r, StatusCode::OK).await;
    assert_eq!(plan["applied"], true, "{plan}");
    let exported = app.export_as_admin("").await;
    assert!(exported.contains("- domain: edge"), "{exported}");
}

#[tokio::test]
async fn the_openapi_document_says_the_shape() {
    let app = spawn_app(Db::Sqlite).await;
    let doc: Value = app
        .client
        .get(app.url("/api/openapi.json"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let schemas = &doc["components"]["schemas"];
    let policy_input = &schemas["PolicyInput"]["properties"]["descriptors"];
    assert_eq!(policy_input["maxItems"], 16, "{policy_input}");
    let input = &schemas["DescriptorInput"]["properties"];
    assert_eq!(input["domain"]["pattern"], "^[A-Za-z0-9_.:-]{1,64}$");
    assert_eq!(input["entries"]["maxItems"], 8);
    assert_eq!(input["entries"]["minItems"], 1);
    assert!(
        input["entries"]["items"]["pattern"]
            .as_str()
            .unwrap()
            .starts_with("^(shared )?[A-Za-z0-9_.:-]{1,64}(=")
    );
    assert!(schemas["PolicyView"]["properties"]["descriptors"].is_object());
}
