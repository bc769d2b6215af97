//! The admin JSON API over HTTP (DESIGN.md section 8): who may do what, the shapes of the
//! replies and errors, and the audit trail every change leaves. A refused request must
//! change nothing: each refusal is checked by reading the data back as the admin and by
//! looking for an audit event it must not have written.

use reqwest::{Response, StatusCode};
use serde_json::{Value, json};

use crate::helpers::*;
use crate::on_every_backend;

// ---------------------------------------------------------------------------------------
// Helpers of this module
// ---------------------------------------------------------------------------------------

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

/// One test of `$body` on one backend: `[run]`, or `[ignore "bug: ..."]` for a story the
/// backend gets wrong today, so that it runs again with `--include-ignored` once fixed.
macro_rules! backend_test {
    ($body:path, $test:ident, $db:ident, [run]) => {
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $test() {
            $body(Db::$db).await
        }
    };
    ($body:path, $test:ident, $db:ident, [ignore $bug:literal]) => {
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        #[ignore = $bug]
        async fn $test() {
            $body(Db::$db).await
        }
    };
}

/// Like `on_every_backend!`, saying per backend whether the test runs or is ignored.
macro_rules! on_backends {
    ($name:ident, $body:path, sqlite: $s:tt, postgres: $p:tt, mysql: $m:tt) => {
        mod $name {
            use super::*;
            backend_test!($body, sqlite, Sqlite, $s);
            backend_test!($body, postgres, Postgres, $p);
            backend_test!($body, mysql, MySql, $m);
        }
    };
}

// ---------------------------------------------------------------------------------------
// Authentication
// ---------------------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------------------
// Applications
// ---------------------------------------------------------------------------------------

async fn the_admin_creates_an_application(db: Db) {
    let app = spawn_app(db).await;

    let r = app
        .post(
            "/api/v1/apps",
            &app.admin_token,
            json!({"slug": "shop", "name": "The Shop", "description": "orders and carts"}),
        )
        .await;
    let created = expect_status(r, StatusCode::CREATED).await;
    assert_eq!(created["slug"], "shop");
    assert_eq!(created["name"], "The Shop");
    assert_eq!(created["description"], "orders and carts");
    let created_at = created["created_at"].as_str().unwrap();
    assert!(
        chrono::DateTime::parse_from_rfc3339(created_at).is_ok(),
        "created_at {created_at:?} is RFC 3339"
    );

    // It is listed and readable, as created.
    let listed = admin_reads(&app, "/api/v1/apps").await;
    assert_eq!(listed, json!([created.clone()]));
    let detail = admin_reads(&app, "/api/v1/apps/shop").await;
    assert_eq!(detail["name"], "The Shop");
    assert_eq!(detail["your_role"], "admin");
    assert_eq!(detail["members"], json!([]));
    assert_eq!(detail["keys"], json!([]));

    // The audit log says who made it.
    let event = newest_event(&app).await;
    assert_eq!(event["actor"], "admin");
    assert_eq!(event["action"], "create");
    assert_eq!(event["entity_type"], "app");
    assert_eq!(event["entity_id"], "shop");
    assert_eq!(event["app"], "shop");
    assert_eq!(event["before"], Value::Null);
    assert_eq!(event["after"], created);
}
on_every_backend!(admin_creates_app, the_admin_creates_an_application);

async fn an_invalid_application_is_refused_naming_the_field(db: Db) {
    let app = spawn_app(db).await;
    app.create_app("shop").await;
    let watched = ["/api/v1/apps", "/api/v1/apps/shop"];

    // The slug is taken.
    let before = observe(&app, &watched).await;
    let r = app
        .post(
            "/api/v1/apps",
            &app.admin_token,
            json!({"slug": "shop", "name": "Another shop"}),
        )
        .await;
    let problem = refused_without_trace(&app, before, &watched, r, StatusCode::CONFLICT).await;
    assert!(problem["type"].as_str().unwrap().ends_with(":conflict"));

    // Each invalid body is refused naming its field: not a slug, no name, a field we do
    // not know (a typo must not be ignored), a field of the wrong type.
    for (body, field) in [
        (json!({"slug": "My Shop!", "name": "x"}), "slug"),
        (json!({"slug": "blog"}), "name"),
        (json!({"slug": "blog", "name": "  "}), "name"),
        (
            json!({"slug": "blog", "name": "Blog", "descripton": "typo"}),
            "descripton",
        ),
        (json!({"slug": "blog", "name": 7}), "name"),
    ] {
        let before = observe(&app, &watched).await;
        let r = app
            .post("/api/v1/apps", &app.admin_token, body.clone())
            .await;
        let problem =
            refused_without_trace(&app, before, &watched, r, StatusCode::UNPROCESSABLE_ENTITY)
                .await;
        assert_eq!(problem["field"], field, "body {body}: {problem}");
    }

    // Not JSON at all.
    let before = observe(&app, &watched).await;
    let r = post_raw(
        &app,
        "/api/v1/apps",
        &app.admin_token,
        "{\"slug\": \"blog\",",
    )
    .await;
    let problem = refused_without_trace(&app, before, &watched, r, StatusCode::BAD_REQUEST).await;
    assert!(problem["type"].as_str().unwrap().ends_with(":malformed"));
}
on_every_backend!(
    invalid_app,
    an_invalid_application_is_refused_naming_the_field
);

async fn only_admins_create_applications(db: Db) {
    let app = spawn_app(db).await;
    app.create_app("shop").await;
    let owner = app.create_user("olga", Some(("shop", "owner"))).await;
    let watched = ["/api/v1/apps"];

    let before = observe(&app, &watched).await;
    let r = app
        .post(
            "/api/v1/apps",
            &owner,
            json!({"slug": "side-project", "name": "Side project"}),
        )
        .await;
    let problem = refused_without_trace(&app, before, &watched, r, StatusCode::FORBIDDEN).await;
    assert!(problem["type"].as_str().unwrap().ends_with(":forbidden"));
    assert_eq!(visible_apps(&app, &app.admin_token).await, ["shop"]);
}
on_every_backend!(member_cannot_create_app, only_admins_create_applications);

async fn members_see_only_their_applications(db: Db) {
    let app = spawn_app(db).await;
    app.create_app("shop").await;
    app.create_app("blog").await;
    app.create_app("wiki").await;
    let (_, secret) = new_key(&app, "shop", &app.admin_token).await;
    app.create_user("olga", Some(("shop", "owner"))).await;
    let viewer = app.create_user("vera", Some(("shop", "viewer"))).await;
    let r = put(
        &app,
        "/api/v1/apps/wiki/members/vera",
        &app.admin_token,
        json!({"role": "owner"}),
    )
    .await;
    expect_status(r, StatusCode::OK).await;
    let outsider = app.create_user("otto", None).await;

    assert_eq!(
        visible_apps(&app, &app.admin_token).await,
        ["blog", "shop", "wiki"]
    );
    assert_eq!(visible_apps(&app, &viewer).await, ["shop", "wiki"]);
    assert!(visible_apps(&app, &outsider).await.is_empty());

    // Not a member of blog: 403, for the app and its policies.
    expect_problem(
        app.get("/api/v1/apps/blog", &viewer).await,
        StatusCode::FORBIDDEN,
    )
    .await;
    expect_problem(
        app.get("/api/v1/policies?app=blog", &viewer).await,
        StatusCode::FORBIDDEN,
    )
    .await;
    expect_problem(
        app.get("/api/v1/apps/shop", &outsider).await,
        StatusCode::FORBIDDEN,
    )
    .await;
    // An application that does not exist.
    expect_problem(
        app.get("/api/v1/apps/nowhere", &viewer).await,
        StatusCode::NOT_FOUND,
    )
    .await;

    // A viewer of shop sees it whole: members, keys (never their text), their role.
    let r = app.get("/api/v1/apps/shop", &viewer).await;
    let raw = r.text().await.unwrap();
    assert!(!raw.contains(&secret), "the key's text leaked: {raw}");
    let detail: Value = serde_json::from_str(&raw).unwrap();
    assert_eq!(detail["slug"], "shop");
    assert_eq!(detail["your_role"], "viewer");
    assert_eq!(
        detail["members"],
        json!([
            {"username": "olga", "role": "owner"},
            {"username": "vera", "role": "viewer"},
        ])
    );
    let keys = detail["keys"].as_array().unwrap();
    assert_eq!(keys.len(), 1);
    assert_eq!(keys[0]["label"], "ci");
    assert!(
        keys[0].get("key").is_none(),
        "a key listed with its text: {}",
        keys[0]
    );
    assert_eq!(keys[0]["revoked_at"], Value::Null);

    let detail = expect_status(app.get("/api/v1/apps/wiki", &viewer).await, StatusCode::OK).await;
    assert_eq!(detail["your_role"], "owner");
}
on_every_backend!(members_see_their_apps, members_see_only_their_applications);

// ---------------------------------------------------------------------------------------
// Members
// ---------------------------------------------------------------------------------------

async fn owners_and_admins_set_member_roles(db: Db) {
    let app = spawn_app(db).await;
    app.create_app("shop").await;
    let owner = app.create_user("olga", Some(("shop", "owner"))).await;
    app.create_user("vera", None).await;

    // The owner adds vera as a viewer.
    let r = put(
        &app,
        "/api/v1/apps/shop/members/vera",
        &owner,
        json!({"role": "viewer"}),
    )
    .await;
    assert_eq!(
        expect_status(r, StatusCode::OK).await,
        json!({"username": "vera", "role": "viewer"})
    );
    let event = newest_event(&app).await;
    assert_eq!(
        (
            &event["actor"],
            &event["action"],
            &event["entity_type"],
            &event["entity_id"]
        ),
        (
            &json!("olga"),
            &json!("create"),
            &json!("member"),
            &json!("vera")
        )
    );
    assert_eq!(event["app"], "shop");
    assert_eq!(event["before"], Value::Null);
    assert_eq!(
        event["after"],
        json!({"username": "vera", "role": "viewer"})
    );

    // The admin makes her an owner: the same PUT changes the role.
    let r = put(
        &app,
        "/api/v1/apps/shop/members/vera",
        &app.admin_token,
        json!({"role": "owner"}),
    )
    .await;
    assert_eq!(expect_status(r, StatusCode::OK).await["role"], "owner");
    let detail = admin_reads(&app, "/api/v1/apps/shop").await;
    assert_eq!(
        detail["members"],
        json!([
            {"username": "olga", "role": "owner"},
            {"username": "vera", "role": "owner"},
        ])
    );
    let event = newest_event(&app).await;
    assert_eq!(event["actor"], "admin");
    assert_eq!(event["action"], "update");
    assert_eq!(event["before"]["role"], "viewer");
    assert_eq!(event["after"]["role"], "owner");

    // A role that does not exist, or none at all.
    let watched = ["/api/v1/apps/shop"];
    let before = observe(&app, &watched).await;
    let r = put(
        &app,
        "/api/v1/apps/shop/members/vera",
        &owner,
        json!({"role": "superuser"}),
    )
    .await;
    let problem =
        refused_without_trace(&app, before, &watched, r, StatusCode::UNPROCESSABLE_ENTITY).await;
    assert_eq!(problem["field"], "role");
    let r = put(&app, "/api/v1/apps/shop/members/vera", &owner, json!({})).await;
    expect_invalid(r, "role").await;

    // A user that does not exist.
    let before = observe(&app, &watched).await;
    let r = put(
        &app,
        "/api/v1/apps/shop/members/nobody",
        &owner,
        json!({"role": "viewer"}),
    )
    .await;
    refused_without_trace(&app, before, &watched, r, StatusCode::NOT_FOUND).await;
}
on_every_backend!(set_member_roles, owners_and_admins_set_member_roles);

async fn a_viewer_cannot_change_members(db: Db) {
    let app = spawn_app(db).await;
    app.create_app("shop").await;
    app.create_user("olga", Some(("shop", "owner"))).await;
    let viewer = app.create_user("vera", Some(("shop", "viewer"))).await;
    app.create_user("mallory", None).await;
    let watched = ["/api/v1/apps/shop"];

    // She can neither promote herself, nor add a friend, nor remove the owner.
    let before = observe(&app, &watched).await;
    let r = put(
        &app,
        "/api/v1/apps/shop/members/vera",
        &viewer,
        json!({"role": "owner"}),
    )
    .await;
    refused_without_trace(&app, before, &watched, r, StatusCode::FORBIDDEN).await;

    let before = observe(&app, &watched).await;
    let r = put(
        &app,
        "/api/v1/apps/shop/members/mallory",
        &viewer,
        json!({"role": "viewer"}),
    )
    .await;
    refused_without_trace(&app, before, &watched, r, StatusCode::FORBIDDEN).await;

    let before = observe(&app, &watched).await;
    let r = delete(&app, "/api/v1/apps/shop/members/olga", &viewer).await;
    refused_without_trace(&app, before, &watched, r, StatusCode::FORBIDDEN).await;

    let detail = admin_reads(&app, "/api/v1/apps/shop").await;
    assert_eq!(
        detail["members"],
        json!([
            {"username": "olga", "role": "owner"},
            {"username": "vera", "role": "viewer"},
        ])
    );
}
on_every_backend!(viewer_cannot_change_members, a_viewer_cannot_change_members);

async fn a_removed_member_no_longer_sees_the_application(db: Db) {
    let app = spawn_app(db).await;
    app.create_app("shop").await;
    let owner = app.create_user("olga", Some(("shop", "owner"))).await;
    let viewer = app.create_user("vera", Some(("shop", "viewer"))).await;
    assert_eq!(visible_apps(&app, &viewer).await, ["shop"]);

    let r = delete(&app, "/api/v1/apps/shop/members/vera", &owner).await;
    assert_eq!(expect_status(r, StatusCode::NO_CONTENT).await, Value::Null);

    assert!(visible_apps(&app, &viewer).await.is_empty());
    expect_problem(
        app.get("/api/v1/apps/shop", &viewer).await,
        StatusCode::FORBIDDEN,
    )
    .await;
    let detail = admin_reads(&app, "/api/v1/apps/shop").await;
    assert_eq!(
        detail["members"],
        json!([{"username": "olga", "role": "owner"}])
    );

    let event = newest_event(&app).await;
    assert_eq!(event["actor"], "olga");
    assert_eq!(event["action"], "delete");
    assert_eq!(event["entity_type"], "member");
    assert_eq!(event["entity_id"], "vera");
    assert_eq!(
        event["before"],
        json!({"username": "vera", "role": "viewer"})
    );
    assert_eq!(event["after"], Value::Null);

    // Removing her again: there is no such member any more.
    let watched = ["/api/v1/apps/shop"];
    let before = observe(&app, &watched).await;
    let r = delete(&app, "/api/v1/apps/shop/members/vera", &owner).await;
    refused_without_trace(&app, before, &watched, r, StatusCode::NOT_FOUND).await;
}
on_every_backend!(
    remove_member,
    a_removed_member_no_longer_sees_the_application
);

// ---------------------------------------------------------------------------------------
// API keys
// ---------------------------------------------------------------------------------------

async fn owners_create_keys_and_viewers_cannot(db: Db) {
    let app = spawn_app(db).await;
    app.create_app("shop").await;
    let owner = app.create_user("olga", Some(("shop", "owner"))).await;
    let viewer = app.create_user("vera", Some(("shop", "viewer"))).await;

    let r = app
        .post(
            "/api/v1/apps/shop/keys",
            &owner,
            json!({"label": "checkout"}),
        )
        .await;
    let created = expect_status(r, StatusCode::CREATED).await;
    assert_eq!(created["label"], "checkout");
    let id = created["id"].as_str().unwrap();
    let secret = created["key"].as_str().unwrap();
    assert!(secret.starts_with("rk_key_"), "key {secret:?}");

    // Listed by id, created by the owner, its text nowhere.
    let detail = admin_reads(&app, "/api/v1/apps/shop").await;
    assert_eq!(detail["keys"][0]["id"], id);
    assert_eq!(detail["keys"][0]["created_by"], "olga");
    assert!(!detail.to_string().contains(secret));
    let event = newest_event(&app).await;
    assert_eq!(event["actor"], "olga");
    assert_eq!(event["action"], "create");
    assert_eq!(event["entity_type"], "api_key");
    assert_eq!(event["entity_id"], id);
    assert_eq!(event["after"]["label"], "checkout");
    assert!(
        !event.to_string().contains(secret),
        "the audit log holds the key"
    );

    // The key identifies shop on the acquire API.
    app.create_policy(minimal_policy("orders.create", "shop"))
        .await;
    expect_status(
        app.acquire(secret, "orders.create", 1).await,
        StatusCode::OK,
    )
    .await;

    // A viewer may not make one.
    let watched = ["/api/v1/apps/shop"];
    let before = observe(&app, &watched).await;
    let r = app
        .post("/api/v1/apps/shop/keys", &viewer, json!({"label": "mine"}))
        .await;
    refused_without_trace(&app, before, &watched, r, StatusCode::FORBIDDEN).await;

    // A key needs a label.
    let r = app.post("/api/v1/apps/shop/keys", &owner, json!({})).await;
    expect_invalid(r, "label").await;
}
on_every_backend!(create_keys, owners_create_keys_and_viewers_cannot);

async fn a_revoked_key_stops_working_at_once(db: Db) {
    let app = spawn_app(db).await;
    app.create_app("shop").await;
    let owner = app.create_user("olga", Some(("shop", "owner"))).await;
    let (id, secret) = new_key(&app, "shop", &owner).await;
    app.create_policy(minimal_policy("orders.create", "shop"))
        .await;
    expect_status(
        app.acquire(&secret, "orders.create", 1).await,
        StatusCode::OK,
    )
    .await;

    let r = delete(&app, &format!("/api/v1/apps/shop/keys/{id}"), &owner).await;
    expect_status(r, StatusCode::NO_CONTENT).await;

    // The very next acquire is refused: no waiting for a sync pass.
    expect_problem(
        app.acquire(&secret, "orders.create", 1).await,
        StatusCode::UNAUTHORIZED,
    )
    .await;
    let detail = admin_reads(&app, "/api/v1/apps/shop").await;
    assert!(detail["keys"][0]["revoked_at"].is_string());
    let event = newest_event(&app).await;
    assert_eq!(event["actor"], "olga");
    assert_eq!(event["action"], "revoke");
    assert_eq!(event["entity_type"], "api_key");
    assert_eq!(event["entity_id"], id.as_str());
    assert_eq!(event["before"]["revoked_at"], Value::Null);

    // Revoking it again finds no live key.
    let watched = ["/api/v1/apps/shop"];
    let before = observe(&app, &watched).await;
    let r = delete(&app, &format!("/api/v1/apps/shop/keys/{id}"), &owner).await;
    refused_without_trace(&app, before, &watched, r, StatusCode::NOT_FOUND).await;
}
on_every_backend!(revoke_key, a_revoked_key_stops_working_at_once);

async fn an_owner_of_another_application_cannot_revoke_a_key(db: Db) {
    let app = spawn_app(db).await;
    app.create_app("shop").await;
    app.create_app("blog").await;
    let (id, secret) = new_key(&app, "shop", &app.admin_token).await;
    app.create_policy(minimal_policy("orders.create", "shop"))
        .await;
    let blog_owner = app.create_user("bob", Some(("blog", "owner"))).await;
    let watched = ["/api/v1/apps/shop", "/api/v1/apps/blog"];

    // Through shop's path: not his application.
    let before = observe(&app, &watched).await;
    let r = delete(&app, &format!("/api/v1/apps/shop/keys/{id}"), &blog_owner).await;
    refused_without_trace(&app, before, &watched, r, StatusCode::FORBIDDEN).await;

    // Through his own application's path: the key is not one of blog's.
    let before = observe(&app, &watched).await;
    let r = delete(&app, &format!("/api/v1/apps/blog/keys/{id}"), &blog_owner).await;
    refused_without_trace(&app, before, &watched, r, StatusCode::NOT_FOUND).await;

    expect_status(
        app.acquire(&secret, "orders.create", 1).await,
        StatusCode::OK,
    )
    .await;
}
on_every_backend!(
    foreign_owner_cannot_revoke,
    an_owner_of_another_application_cannot_revoke_a_key
);

// ---------------------------------------------------------------------------------------
// Policies
// ---------------------------------------------------------------------------------------

async fn a_new_policy_takes_the_defaults(db: Db) {
    let app = spawn_app(db).await;
    app.create_app("shop").await;

    let r = app
        .post(
            "/api/v1/policies",
            &app.admin_token,
            json!({"name": "orders.create", "owner_app": "shop", "rate": 0.2, "max_permits": 5}),
        )
        .await;
    let created = expect_status(r, StatusCode::CREATED).await;
    assert_eq!(created["name"], "orders.create");
    assert_eq!(created["owner_app"], "shop");
    assert_eq!(created["algorithm"], "token_bucket");
    assert_eq!(created["rate"], json!(0.2), "12 per minute, not rounded");
    assert_eq!(created["max_permits"], 5);
    assert_eq!(created["allowed_apps"], json!(["shop"]));
    assert_eq!(created["failure_mode"], "closed");
    assert_eq!(created["enabled"], true);
    assert_eq!(created["description"], "");
    assert_eq!(created["version"], 1);

    // Read back from the store, the same (rate included, exactly).
    assert_eq!(
        admin_reads(&app, "/api/v1/policies/orders.create").await,
        created
    );
    assert_eq!(
        admin_reads(&app, "/api/v1/policies?app=shop").await,
        json!([created.clone()])
    );
    assert_eq!(
        admin_reads(&app, "/api/v1/policies").await,
        json!([created.clone()])
    );

    let event = newest_event(&app).await;
    assert_eq!(event["actor"], "admin");
    assert_eq!(event["action"], "create");
    assert_eq!(event["entity_type"], "policy");
    assert_eq!(event["entity_id"], "orders.create");
    assert_eq!(event["app"], "shop");
    assert_eq!(event["after"], created);

    // Every field given explicitly is kept.
    app.create_app("blog").await;
    let full = app
        .create_policy(json!({
            "name": "search", "owner_app": "shop", "algorithm": "token_bucket",
            "rate": 2.5, "max_permits": 100, "allowed_apps": ["blog", "shop"],
            "failure_mode": "open", "enabled": false, "description": "full-text search",
        }))
        .await;
    assert_eq!(full["rate"], json!(2.5));
    assert_eq!(full["allowed_apps"], json!(["blog", "shop"]));
    assert_eq!(full["failure_mode"], "open");
    assert_eq!(full["enabled"], false);
    assert_eq!(full["description"], "full-text search");
}
on_every_backend!(policy_defaults, a_new_policy_takes_the_defaults);

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

async fn a_viewer_cannot_create_policies(db: Db) {
    let app = spawn_app(db).await;
    app.create_app("shop").await;
    app.create_policy(minimal_policy("orders.create", "shop"))
        .await;
    let viewer = app.create_user("vera", Some(("shop", "viewer"))).await;

    // She may read them...
    let listed = expect_status(
        app.get("/api/v1/policies?app=shop", &viewer).await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(listed.as_array().unwrap().len(), 1);
    expect_status(
        app.get("/api/v1/policies/orders.create", &viewer).await,
        StatusCode::OK,
    )
    .await;

    // ...but not add one.
    let watched = ["/api/v1/policies?app=shop"];
    let before = observe(&app, &watched).await;
    let r = app
        .post(
            "/api/v1/policies",
            &viewer,
            minimal_policy("orders.refund", "shop"),
        )
        .await;
    refused_without_trace(&app, before, &watched, r, StatusCode::FORBIDDEN).await;
    assert!(!app.redis_exists(&app.policy_key("orders.refund")).await);

    // Nor change or delete one.
    let watched = ["/api/v1/policies/orders.create"];
    let before = observe(&app, &watched).await;
    let r = patch(
        &app,
        "/api/v1/policies/orders.create",
        &viewer,
        json!({"rate": 1000}),
    )
    .await;
    refused_without_trace(&app, before, &watched, r, StatusCode::FORBIDDEN).await;
    let before = observe(&app, &watched).await;
    let r = delete(&app, "/api/v1/policies/orders.create", &viewer).await;
    refused_without_trace(&app, before, &watched, r, StatusCode::FORBIDDEN).await;
}
on_every_backend!(viewer_cannot_create_policy, a_viewer_cannot_create_policies);

async fn an_owner_of_another_application_cannot_touch_a_policy(db: Db) {
    let app = spawn_app(db).await;
    app.create_app("shop").await;
    app.create_app("blog").await;
    app.create_policy(minimal_policy("orders.create", "shop"))
        .await;
    let blog_owner = app.create_user("bob", Some(("blog", "owner"))).await;
    let watched = ["/api/v1/policies/orders.create", "/api/v1/policies"];
    let key = app.policy_key("orders.create");
    let redis_rate = app.redis_field(&key, "rate").await;
    assert!(redis_rate.is_some());

    let before = observe(&app, &watched).await;
    let r = patch(
        &app,
        "/api/v1/policies/orders.create",
        &blog_owner,
        json!({"rate": 1000, "allowed_apps": ["blog"]}),
    )
    .await;
    refused_without_trace(&app, before, &watched, r, StatusCode::FORBIDDEN).await;

    let before = observe(&app, &watched).await;
    let r = delete(&app, "/api/v1/policies/orders.create", &blog_owner).await;
    refused_without_trace(&app, before, &watched, r, StatusCode::FORBIDDEN).await;

    // He cannot read it either, nor create one owned by shop.
    expect_problem(
        app.get("/api/v1/policies/orders.create", &blog_owner).await,
        StatusCode::FORBIDDEN,
    )
    .await;
    expect_problem(
        app.get("/api/v1/policies/orders.create/state", &blog_owner)
            .await,
        StatusCode::FORBIDDEN,
    )
    .await;
    let before = observe(&app, &watched).await;
    let r = app
        .post(
            "/api/v1/policies",
            &blog_owner,
            minimal_policy("orders.refund", "shop"),
        )
        .await;
    refused_without_trace(&app, before, &watched, r, StatusCode::FORBIDDEN).await;

    // Redis still holds the policy as it was.
    assert_eq!(app.redis_field(&key, "rate").await, redis_rate);
    // His own listing holds none of shop's policies.
    let listed = expect_status(
        app.get("/api/v1/policies", &blog_owner).await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(listed, json!([]));
}
on_every_backend!(
    foreign_owner_cannot_touch_policy,
    an_owner_of_another_application_cannot_touch_a_policy
);

async fn reading_one_policy(db: Db) {
    let app = spawn_app(db).await;
    app.create_app("shop").await;
    let created = app
        .create_policy(minimal_policy("orders.create", "shop"))
        .await;

    assert_eq!(
        admin_reads(&app, "/api/v1/policies/orders.create").await,
        created
    );
    let r = app
        .get("/api/v1/policies/orders.none", &app.admin_token)
        .await;
    let problem = expect_problem(r, StatusCode::NOT_FOUND).await;
    assert!(problem["type"].as_str().unwrap().ends_with(":not-found"));
    expect_problem(
        app.get("/api/v1/policies/orders.none/state", &app.admin_token)
            .await,
        StatusCode::NOT_FOUND,
    )
    .await;
    expect_problem(
        patch(
            &app,
            "/api/v1/policies/orders.none",
            &app.admin_token,
            json!({"rate": 1}),
        )
        .await,
        StatusCode::NOT_FOUND,
    )
    .await;
    expect_problem(
        delete(&app, "/api/v1/policies/orders.none", &app.admin_token).await,
        StatusCode::NOT_FOUND,
    )
    .await;
}
on_every_backend!(get_policy, reading_one_policy);

async fn policy_names_may_contain_slashes(db: Db) {
    let app = spawn_app(db).await;
    app.create_app("shop").await;
    let name = "api/v1/orders";
    let path = policy_path(name);
    let created = app.create_policy(minimal_policy(name, "shop")).await;
    assert_eq!(created["name"], name);

    assert_eq!(admin_reads(&app, &path).await, created);

    let r = patch(&app, &path, &app.admin_token, json!({"max_permits": 7})).await;
    let changed = expect_status(r, StatusCode::OK).await;
    assert_eq!(changed["name"], name);
    assert_eq!(changed["max_permits"], 7);
    assert_eq!(changed["version"], 2);

    let state = admin_reads(&app, &format!("{path}/state")).await;
    assert_eq!(state["max_permits"], 7);
    assert_eq!(state["version"], 2);

    // The audit filter takes the name too.
    let events = app.audit("?policy=api/v1/orders").await;
    assert_eq!(events.len(), 2);
    assert!(events.iter().all(|e| e["entity_id"] == name));

    assert!(app.redis_exists(&app.policy_key(name)).await);
    expect_status(
        delete(&app, &path, &app.admin_token).await,
        StatusCode::NO_CONTENT,
    )
    .await;
    expect_problem(
        app.get(&path, &app.admin_token).await,
        StatusCode::NOT_FOUND,
    )
    .await;
    assert!(!app.redis_exists(&app.policy_key(name)).await);
}
on_every_backend!(slashes_in_names, policy_names_may_contain_slashes);

async fn a_policy_named_like_the_state_route_is_reachable_encoded(db: Db) {
    let app = spawn_app(db).await;
    app.create_app("shop").await;
    let created = app
        .create_policy(minimal_policy("reports/state", "shop"))
        .await;

    // `/state` at the end of the path is the state route; `%2F` reaches the name itself.
    assert_eq!(
        admin_reads(&app, "/api/v1/policies/reports%2Fstate").await,
        created
    );
    let state = admin_reads(&app, "/api/v1/policies/reports%2Fstate/state").await;
    assert_eq!(state["max_permits"], 20);
    let r = patch(
        &app,
        "/api/v1/policies/reports%2Fstate",
        &app.admin_token,
        json!({"rate": 3}),
    )
    .await;
    assert_eq!(expect_status(r, StatusCode::OK).await["rate"], json!(3.0));
}
on_every_backend!(
    state_suffix_in_name,
    a_policy_named_like_the_state_route_is_reachable_encoded
);

async fn a_partial_change_bumps_the_version_and_keeps_the_rest(db: Db) {
    let app = spawn_app(db).await;
    app.create_app("shop").await;
    app.create_app("blog").await;
    let created = app
        .create_policy(json!({
            "name": "orders.create", "owner_app": "shop", "rate": 10, "max_permits": 20,
            "allowed_apps": ["shop", "blog"], "failure_mode": "open",
            "description": "checkout"
        }))
        .await;

    let r = patch(
        &app,
        "/api/v1/policies/orders.create",
        &app.admin_token,
        json!({"rate": 0.5, "version": 1}),
    )
    .await;
    let changed = expect_status(r, StatusCode::OK).await;
    assert_eq!(changed["version"], 2);
    assert_eq!(changed["rate"], json!(0.5));
    for field in [
        "name",
        "owner_app",
        "algorithm",
        "max_permits",
        "allowed_apps",
        "failure_mode",
        "enabled",
        "description",
        "created_at",
    ] {
        assert_eq!(changed[field], created[field], "{field} was kept");
    }
    assert_eq!(
        admin_reads(&app, "/api/v1/policies/orders.create").await,
        changed
    );
    // Redis got the change.
    let key = app.policy_key("orders.create");
    assert_eq!(
        app.redis_field(&key, "rate")
            .await
            .as_deref()
            .map(str::parse::<f64>),
        Some(Ok(0.5))
    );
    assert_eq!(app.redis_field(&key, "version").await.as_deref(), Some("2"));

    // The audit event holds the policy before and after.
    let event = newest_event(&app).await;
    assert_eq!(event["action"], "update");
    assert_eq!(event["entity_id"], "orders.create");
    assert_eq!(event["before"]["rate"], json!(10.0));
    assert_eq!(event["after"]["rate"], json!(0.5));
    assert_eq!(event["before"]["version"], 1);
    assert_eq!(event["after"]["version"], 2);

    // An owner (not only the admin) may change it too.
    let owner = app.create_user("olga", Some(("shop", "owner"))).await;
    let r = patch(
        &app,
        "/api/v1/policies/orders.create",
        &owner,
        json!({"enabled": false}),
    )
    .await;
    let changed = expect_status(r, StatusCode::OK).await;
    assert_eq!(changed["enabled"], false);
    assert_eq!(changed["version"], 3);
    assert_eq!(newest_event(&app).await["actor"], "olga");
}
on_every_backend!(
    partial_patch,
    a_partial_change_bumps_the_version_and_keeps_the_rest
);

async fn a_stale_version_is_refused(db: Db) {
    let app = spawn_app(db).await;
    app.create_app("shop").await;
    app.create_policy(minimal_policy("orders.create", "shop"))
        .await;
    // Someone else changes it first.
    let r = patch(
        &app,
        "/api/v1/policies/orders.create",
        &app.admin_token,
        json!({"rate": 5}),
    )
    .await;
    expect_status(r, StatusCode::OK).await;

    let watched = ["/api/v1/policies/orders.create"];
    let before = observe(&app, &watched).await;
    let r = patch(
        &app,
        "/api/v1/policies/orders.create",
        &app.admin_token,
        json!({"rate": 50, "version": 1}),
    )
    .await;
    let problem = refused_without_trace(&app, before, &watched, r, StatusCode::CONFLICT).await;
    assert!(
        problem["type"]
            .as_str()
            .unwrap()
            .ends_with("version-conflict")
    );
    assert_eq!(problem["current_version"], 2);
    let redis_rate = app
        .redis_field(&app.policy_key("orders.create"), "rate")
        .await;
    assert_eq!(redis_rate.map(|r| r.parse::<f64>().unwrap()), Some(5.0));
}
on_every_backend!(stale_version, a_stale_version_is_refused);

async fn a_change_that_changes_nothing_keeps_the_version(db: Db) {
    let app = spawn_app(db).await;
    app.create_app("shop").await;
    let created = app
        .create_policy(minimal_policy("orders.create", "shop"))
        .await;

    let watched = ["/api/v1/policies/orders.create"];
    let before = observe(&app, &watched).await;
    for body in [
        json!({}),
        json!({"rate": 10, "max_permits": 20}),
        json!({"name": "orders.create", "owner_app": "shop", "allowed_apps": ["shop"]}),
        json!({"enabled": true, "version": 1}),
    ] {
        let r = patch(
            &app,
            "/api/v1/policies/orders.create",
            &app.admin_token,
            body,
        )
        .await;
        assert_eq!(expect_status(r, StatusCode::OK).await, created);
    }
    assert_eq!(
        observe(&app, &watched).await,
        before,
        "no version bump, no audit event"
    );
}
on_every_backend!(noop_patch, a_change_that_changes_nothing_keeps_the_version);

async fn name_and_owner_cannot_change(db: Db) {
    let app = spawn_app(db).await;
    app.create_app("shop").await;
    app.create_app("blog").await;
    app.create_policy(minimal_policy("orders.create", "shop"))
        .await;
    let watched = ["/api/v1/policies/orders.create", "/api/v1/policies"];

    for (body, field) in [
        (json!({"name": "orders.renamed"}), "name"),
        (json!({"owner_app": "blog"}), "owner_app"),
        (json!({"rate": 0}), "rate"),
        (json!({"max_permits": -3}), "max_permits"),
        (json!({"allowed_apps": ["ghost"]}), "allowed_apps"),
        (json!({"allowed_apps": []}), "allowed_apps"),
        (json!({"version": "one"}), "version"),
    ] {
        let before = observe(&app, &watched).await;
        let r = patch(
            &app,
            "/api/v1/policies/orders.create",
            &app.admin_token,
            body.clone(),
        )
        .await;
        let problem =
            refused_without_trace(&app, before, &watched, r, StatusCode::UNPROCESSABLE_ENTITY)
                .await;
        assert_eq!(problem["field"], field, "body {body}: {problem}");
    }
    expect_problem(
        app.get("/api/v1/policies/orders.renamed", &app.admin_token)
            .await,
        StatusCode::NOT_FOUND,
    )
    .await;
}
on_every_backend!(fixed_fields, name_and_owner_cannot_change);

async fn deleting_a_policy_removes_it_everywhere(db: Db) {
    let app = spawn_app(db).await;
    app.create_app("shop").await;
    let owner = app.create_user("olga", Some(("shop", "owner"))).await;
    let created = app
        .create_policy(minimal_policy("orders.create", "shop"))
        .await;
    let key = app.policy_key("orders.create");
    assert!(app.redis_exists(&key).await);

    let r = delete(&app, "/api/v1/policies/orders.create", &owner).await;
    assert_eq!(expect_status(r, StatusCode::NO_CONTENT).await, Value::Null);

    expect_problem(
        app.get("/api/v1/policies/orders.create", &app.admin_token)
            .await,
        StatusCode::NOT_FOUND,
    )
    .await;
    assert_eq!(
        admin_reads(&app, "/api/v1/policies?app=shop").await,
        json!([])
    );
    assert!(!app.redis_exists(&key).await, "the Redis hash is gone");

    let event = newest_event(&app).await;
    assert_eq!(event["actor"], "olga");
    assert_eq!(event["action"], "delete");
    assert_eq!(event["entity_type"], "policy");
    assert_eq!(event["entity_id"], "orders.create");
    assert_eq!(event["before"], created);
    assert_eq!(event["after"], Value::Null);

    // Deleting it again: there is nothing to delete.
    expect_problem(
        delete(&app, "/api/v1/policies/orders.create", &owner).await,
        StatusCode::NOT_FOUND,
    )
    .await;

    // The name is free again.
    let again = app
        .create_policy(minimal_policy("orders.create", "shop"))
        .await;
    assert_eq!(again["version"], 1);
}
on_every_backend!(delete_policy, deleting_a_policy_removes_it_everywhere);

async fn the_live_state_comes_from_redis(db: Db) {
    let app = spawn_app(db).await;
    let secret = app.shop_with_policy("orders.create", 0.2, 5).await;
    let viewer = app.create_user("vera", Some(("shop", "viewer"))).await;

    // A new bucket is full, and has never granted.
    let state = expect_status(
        app.get("/api/v1/policies/orders.create/state", &viewer)
            .await,
        StatusCode::OK,
    )
    .await;
    let fields: Vec<&str> = state
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    for field in [
        "current_permits",
        "max_permits",
        "rate",
        "version",
        "updated_ms",
    ] {
        assert!(fields.contains(&field), "{field} in {state}");
    }
    assert_eq!(state["current_permits"].as_f64(), Some(5.0));
    assert_eq!(state["max_permits"], 5);
    assert_eq!(state["rate"], json!(0.2));
    assert_eq!(state["version"], 1);
    assert_eq!(state["updated_ms"], 0);

    // Three permits taken from a bucket that refills one permit in 1000 s: two are left.
    app.create_policy(json!({
        "name": "exports", "owner_app": "shop", "rate": 0.001, "max_permits": 5
    }))
    .await;
    let body = expect_status(app.acquire(&secret, "exports", 3).await, StatusCode::OK).await;
    assert_eq!(body["remaining"], 2);
    let state = admin_reads(&app, "/api/v1/policies/exports/state").await;
    let current = state["current_permits"].as_f64().unwrap();
    assert!((2.0..3.0).contains(&current), "current_permits {current}");
    assert!(state["updated_ms"].as_i64().unwrap() > 0);

    // A change shows in the state's version.
    let r = patch(
        &app,
        "/api/v1/policies/orders.create",
        &app.admin_token,
        json!({"max_permits": 9}),
    )
    .await;
    expect_status(r, StatusCode::OK).await;
    let state = admin_reads(&app, "/api/v1/policies/orders.create/state").await;
    assert_eq!(state["version"], 2);
    assert_eq!(state["max_permits"], 9);
}
on_every_backend!(policy_state, the_live_state_comes_from_redis);

// ---------------------------------------------------------------------------------------
// Simultaneous requests
// ---------------------------------------------------------------------------------------

/// Several clients at the same moment, as behind any load balancer: every request is
/// answered, none with a 5xx.
async fn simultaneous_requests_are_all_answered(db: Db) {
    let app = spawn_app(db).await;
    app.create_app("shop").await;
    app.create_policy(minimal_policy("orders.create", "shop"))
        .await;

    // Fresh tokens, each used by four requests at once (the first use records itself).
    for n in 0..3 {
        let token = app
            .create_user(&format!("user{n}"), Some(("shop", "viewer")))
            .await;
        let (a, b, c, d) = tokio::join!(
            app.get("/api/v1/apps", &token),
            app.get("/api/v1/apps/shop", &token),
            app.get("/api/v1/policies?app=shop", &token),
            app.get("/api/v1/audit", &token),
        );
        for r in [a, b, c, d] {
            expect_status(r, StatusCode::OK).await;
        }
    }

    // Three applications created at once.
    let create = |slug: &str| {
        app.post(
            "/api/v1/apps",
            &app.admin_token,
            json!({"slug": slug, "name": slug}),
        )
    };
    let (a, b, c) = tokio::join!(create("blog"), create("wiki"), create("mail"));
    for r in [a, b, c] {
        expect_status(r, StatusCode::CREATED).await;
    }
    assert_eq!(
        visible_apps(&app, &app.admin_token).await,
        ["blog", "mail", "shop", "wiki"]
    );
}
on_backends!(
    simultaneous_requests,
    simultaneous_requests_are_all_answered,
    sqlite: [run],
    postgres: [run],
    mysql: [run]
);

/// Three clients change one policy from the version they all saw, `rounds` times; the
/// statuses and bodies of each round.
async fn race_for_the_same_version(app: &TestApp, rounds: i64) -> Vec<Vec<(StatusCode, Value)>> {
    let path = "/api/v1/policies/orders.create";
    let mut results = Vec::new();
    for round in 1..=rounds {
        let body = |n: i64| json!({"max_permits": 100 * round + n, "version": round});
        let (a, b, c) = tokio::join!(
            patch(app, path, &app.admin_token, body(1)),
            patch(app, path, &app.admin_token, body(2)),
            patch(app, path, &app.admin_token, body(3)),
        );
        let mut answers = Vec::new();
        for r in [a, b, c] {
            let status = r.status();
            let text = r.text().await.unwrap();
            answers.push((
                status,
                serde_json::from_str(&text).unwrap_or(Value::String(text)),
            ));
        }
        results.push(answers);
    }
    results
}

async fn simultaneous_changes_are_serialised_never_lost(db: Db) {
    let app = spawn_app(db).await;
    app.create_app("shop").await;
    app.create_policy(minimal_policy("orders.create", "shop"))
        .await;
    let rounds = 8;

    // With the version they saw: one wins each round, the others hear of the conflict.
    for (round, answers) in race_for_the_same_version(&app, rounds)
        .await
        .iter()
        .enumerate()
    {
        let statuses: Vec<StatusCode> = answers.iter().map(|(s, _)| *s).collect();
        assert!(
            answers
                .iter()
                .all(|(s, _)| *s == StatusCode::OK || *s == StatusCode::CONFLICT),
            "round {round}: {answers:?}"
        );
        let wins = statuses.iter().filter(|s| **s == StatusCode::OK).count();
        assert_eq!(wins, 1, "round {round}: {answers:?}");
    }

    let policy = admin_reads(&app, "/api/v1/policies/orders.create").await;
    assert_eq!(policy["version"], rounds + 1);
    assert_eq!(
        app.audit("?policy=orders.create").await.len() as i64,
        rounds + 1,
        "one event per applied change, none for refused ones"
    );
}
on_backends!(
    simultaneous_changes,
    simultaneous_changes_are_serialised_never_lost,
    sqlite: [run],
    postgres: [run],
    mysql: [run]
);

async fn simultaneous_changes_without_a_version_all_apply(db: Db) {
    let app = spawn_app(db).await;
    app.create_app("shop").await;
    app.create_policy(minimal_policy("orders.create", "shop"))
        .await;
    let path = "/api/v1/policies/orders.create";

    // Clients that send no version ask for no check: each change applies, one after the
    // other, and none is lost.
    for round in 0..10 {
        let (a, b) = tokio::join!(
            patch(
                &app,
                path,
                &app.admin_token,
                json!({"description": format!("d{round}")})
            ),
            patch(
                &app,
                path,
                &app.admin_token,
                json!({"max_permits": 30 + round})
            ),
        );
        expect_status(a, StatusCode::OK).await;
        expect_status(b, StatusCode::OK).await;
        let policy = admin_reads(&app, path).await;
        assert_eq!(policy["version"], 3 + 2 * round);
        assert_eq!(policy["description"], format!("d{round}"));
        assert_eq!(policy["max_permits"], 30 + round);
    }
}
on_backends!(
    simultaneous_unversioned_changes,
    simultaneous_changes_without_a_version_all_apply,
    sqlite: [run],
    postgres: [run],
    mysql: [run]
);

async fn a_lost_race_reports_the_version_now_current(db: Db) {
    let app = spawn_app(db).await;
    app.create_app("shop").await;
    app.create_policy(minimal_policy("orders.create", "shop"))
        .await;

    // The loser of a round is told the winner's version, so that its retry can succeed.
    for (round, answers) in race_for_the_same_version(&app, 8).await.iter().enumerate() {
        let now_current = round as i64 + 2;
        for (status, body) in answers {
            if *status == StatusCode::CONFLICT {
                assert_eq!(
                    body["current_version"], now_current,
                    "round {round}: {body}"
                );
            } else {
                assert_eq!(*status, StatusCode::OK, "round {round}: {body}");
                assert_eq!(body["version"], now_current);
            }
        }
    }
}
on_backends!(
    lost_race_version,
    a_lost_race_reports_the_version_now_current,
    sqlite: [run],
    postgres: [run],
    mysql: [run]
);

// ---------------------------------------------------------------------------------------
// Audit log
// ---------------------------------------------------------------------------------------

async fn every_change_leaves_one_audit_event(db: Db) {
    let app = spawn_app(db).await;
    let start = newest_event(&app).await["id"].as_i64().unwrap();
    app.create_app("shop").await;
    app.create_user("olga", None).await;
    let owner_token_event = newest_event(&app).await["id"].as_i64().unwrap();
    let admin = app.admin_token.clone();

    put(
        &app,
        "/api/v1/apps/shop/members/olga",
        &admin,
        json!({"role": "owner"}),
    )
    .await;
    let (key_id, _) = new_key(&app, "shop", &admin).await;
    expect_status(
        delete(&app, &format!("/api/v1/apps/shop/keys/{key_id}"), &admin).await,
        StatusCode::NO_CONTENT,
    )
    .await;
    app.create_policy(minimal_policy("orders.create", "shop"))
        .await;
    patch(
        &app,
        "/api/v1/policies/orders.create",
        &admin,
        json!({"rate": 2}),
    )
    .await;
    delete(&app, "/api/v1/policies/orders.create", &admin).await;
    delete(&app, "/api/v1/apps/shop/members/olga", &admin).await;

    let events = app.audit("").await;
    let newer: Vec<&Value> = events
        .iter()
        .filter(|e| e["id"].as_i64().unwrap() > owner_token_event)
        .collect();
    let summary: Vec<(&str, &str, &str)> = newer
        .iter()
        .map(|e| {
            (
                e["entity_type"].as_str().unwrap(),
                e["action"].as_str().unwrap(),
                e["entity_id"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            ("member", "delete", "olga"),
            ("policy", "delete", "orders.create"),
            ("policy", "update", "orders.create"),
            ("policy", "create", "orders.create"),
            ("api_key", "revoke", key_id.as_str()),
            ("api_key", "create", key_id.as_str()),
            ("member", "create", "olga"),
        ],
        "newest first, one per change"
    );
    for e in &newer {
        assert_eq!(e["actor"], "admin");
        assert_eq!(e["app"], "shop");
        assert!(chrono::DateTime::parse_from_rfc3339(e["at"].as_str().unwrap()).is_ok());
        match e["action"].as_str().unwrap() {
            "create" => assert!(e["before"].is_null() && e["after"].is_object(), "{e}"),
            "delete" | "revoke" => assert!(e["before"].is_object() && e["after"].is_null(), "{e}"),
            _ => assert!(e["before"].is_object() && e["after"].is_object(), "{e}"),
        }
    }
    let update = newer[2];
    assert_eq!(update["before"]["rate"], json!(10.0));
    assert_eq!(update["after"]["rate"], json!(2.0));

    // The app itself, the user and their token were audited earlier, in order.
    let earlier: Vec<(&str, &str)> = events
        .iter()
        .filter(|e| {
            let id = e["id"].as_i64().unwrap();
            id > start && id <= owner_token_event
        })
        .map(|e| {
            (
                e["entity_type"].as_str().unwrap(),
                e["action"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        earlier,
        [
            ("access_token", "create"),
            ("user", "create"),
            ("app", "create")
        ]
    );
}
on_every_backend!(audit_trail, every_change_leaves_one_audit_event);

async fn the_audit_log_filters_by_policy_app_and_user(db: Db) {
    let app = spawn_app(db).await;
    app.create_app("shop").await;
    app.create_app("blog").await;
    let owner = app.create_user("olga", Some(("shop", "owner"))).await;
    app.create_policy(minimal_policy("orders.create", "shop"))
        .await;
    app.create_policy(minimal_policy("orders.refund", "shop"))
        .await;
    app.create_policy(minimal_policy("posts.publish", "blog"))
        .await;
    patch(
        &app,
        "/api/v1/policies/orders.create",
        &owner,
        json!({"rate": 3}),
    )
    .await;
    patch(
        &app,
        "/api/v1/policies/orders.create",
        &owner,
        json!({"rate": 4}),
    )
    .await;

    let by_policy = app.audit("?policy=orders.create").await;
    let summary: Vec<(&str, &str)> = by_policy
        .iter()
        .map(|e| (e["actor"].as_str().unwrap(), e["action"].as_str().unwrap()))
        .collect();
    assert_eq!(
        summary,
        [("olga", "update"), ("olga", "update"), ("admin", "create")]
    );
    assert!(
        by_policy
            .iter()
            .all(|e| e["entity_type"] == "policy" && e["entity_id"] == "orders.create")
    );
    assert_eq!(by_policy[0]["after"]["rate"], json!(4.0));
    assert_eq!(by_policy[0]["before"]["rate"], json!(3.0));

    let by_app = app.audit("?app=blog").await;
    let summary: Vec<(&str, &str)> = by_app
        .iter()
        .map(|e| {
            (
                e["entity_type"].as_str().unwrap(),
                e["entity_id"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(summary, [("policy", "posts.publish"), ("app", "blog")]);

    let by_user = app.audit("?user=olga").await;
    assert_eq!(by_user.len(), 2);
    assert!(by_user.iter().all(|e| e["actor"] == "olga"));

    // Filters combine.
    assert_eq!(app.audit("?app=blog&user=olga").await, Vec::<Value>::new());
    assert_eq!(
        app.audit("?app=shop&policy=orders.create&user=admin")
            .await
            .len(),
        1
    );
    // An empty filter is no filter.
    assert_eq!(app.audit("?app=&user=").await, app.audit("").await);
}
on_every_backend!(audit_filters, the_audit_log_filters_by_policy_app_and_user);

async fn the_audit_log_pages_fifty_at_a_time(db: Db) {
    let app = spawn_app(db).await;
    app.create_app("shop").await;
    app.create_policy(minimal_policy("orders.create", "shop"))
        .await;
    for i in 0..55 {
        let r = patch(
            &app,
            "/api/v1/policies/orders.create",
            &app.admin_token,
            json!({"description": format!("edit {i}")}),
        )
        .await;
        expect_status(r, StatusCode::OK).await;
    }

    let page1 = app.audit("?policy=orders.create").await;
    let page1_again = app.audit("?policy=orders.create&page=1").await;
    let page2 = app.audit("?policy=orders.create&page=2").await;
    let page3 = app.audit("?policy=orders.create&page=3").await;
    assert_eq!(page1, page1_again);
    assert_eq!(page1.len(), 50);
    assert_eq!(page2.len(), 6, "55 updates and the create");
    assert!(page3.is_empty());

    let ids =
        |page: &[Value]| -> Vec<i64> { page.iter().map(|e| e["id"].as_i64().unwrap()).collect() };
    let (ids1, ids2) = (ids(&page1), ids(&page2));
    assert!(ids1.windows(2).all(|w| w[0] > w[1]), "newest first");
    assert!(ids2.windows(2).all(|w| w[0] > w[1]), "newest first");
    assert!(
        ids1.last().unwrap() > ids2.first().unwrap(),
        "disjoint, page 2 older"
    );
    assert_eq!(page1[0]["after"]["description"], "edit 54");
    assert_eq!(page2.last().unwrap()["action"], "create");

    // Paging without a filter holds every event once.
    let all1 = app.audit("").await;
    let all2 = app.audit("?page=2").await;
    assert_eq!(all1.len(), 50);
    assert!(!all2.is_empty());
    assert!(ids(&all1).iter().all(|id| !ids(&all2).contains(id)));
}
on_every_backend!(audit_pages, the_audit_log_pages_fifty_at_a_time);

async fn members_see_only_the_audit_events_of_their_applications(db: Db) {
    let app = spawn_app(db).await;
    app.create_app("shop").await;
    app.create_app("blog").await;
    let viewer = app.create_user("vera", Some(("shop", "viewer"))).await;
    app.create_policy(minimal_policy("orders.create", "shop"))
        .await;
    app.create_policy(minimal_policy("posts.publish", "blog"))
        .await;
    patch(
        &app,
        "/api/v1/policies/posts.publish",
        &app.admin_token,
        json!({"rate": 1}),
    )
    .await;

    let events = expect_status(app.get("/api/v1/audit", &viewer).await, StatusCode::OK).await;
    let events = events.as_array().unwrap();
    assert!(!events.is_empty());
    assert!(events.iter().all(|e| e["app"] == "shop"), "{events:?}");
    assert!(events.iter().any(|e| e["entity_id"] == "orders.create"));

    // Asking for blog's events explicitly yields nothing either.
    for query in ["?app=blog", "?policy=posts.publish", "?user=admin&app=blog"] {
        let r = app.get(&format!("/api/v1/audit{query}"), &viewer).await;
        assert_eq!(expect_status(r, StatusCode::OK).await, json!([]), "{query}");
    }

    // A user of no application sees no event at all.
    let outsider = app.create_user("otto", None).await;
    let r = app.get("/api/v1/audit", &outsider).await;
    assert_eq!(expect_status(r, StatusCode::OK).await, json!([]));
}
on_every_backend!(
    audit_visibility,
    members_see_only_the_audit_events_of_their_applications
);

async fn a_bad_audit_page_is_400(db: Db) {
    let app = spawn_app(db).await;
    for query in ["?page=abc", "?page=-1", "?page=1.5"] {
        let r = app
            .get(&format!("/api/v1/audit{query}"), &app.admin_token)
            .await;
        let problem = expect_problem(r, StatusCode::BAD_REQUEST).await;
        assert!(
            problem["type"].as_str().unwrap().ends_with(":malformed"),
            "{query}"
        );
        // Without a valid token the answer is 401, whatever the query says.
        let r = app
            .get(&format!("/api/v1/audit{query}"), "rk_pat_wrong")
            .await;
        expect_problem(r, StatusCode::UNAUTHORIZED).await;
    }
}
on_every_backend!(bad_audit_page, a_bad_audit_page_is_400);

// ---------------------------------------------------------------------------------------
// Input that SQL would choke on
// ---------------------------------------------------------------------------------------

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
