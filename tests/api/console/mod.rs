//! The web console over HTTP, as a browser uses it (README, "The web console"): signing in and
//! out, sessions and CSRF, roles enforced on the server, escaping, the policy forms, keys,
//! users, the account, the audit log and the live state. A refused change must change
//! nothing: each refusal is checked against what the admin reads through the JSON API,
//! the users table and the number of audit events, before and after.
//!
//! One file per area: `sign_in`, `sign_in_redirects` (where `next` may send the
//! browser), `sessions`, `csrf`, `roles` (enforced on the server), `owner_changes` (each
//! change an owner makes, audited), `escaping`, `policies` (the policy forms),
//! `policy_page` (scope and overrides on the form, the policy's own page), `keys`,
//! `users`, `account`, `audit`, `live_state`, `not_found` (unknown pages and names,
//! static files), `lifecycle` (renaming and deleting an application, key expiry and
//! rotation, access tokens), `policy_files` (download, plan and apply a policy file),
//! `post_redirect_get` and `last_owner`. The helpers below are shared by them.

use ratekeeper::auth::Actor;
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::helpers::*;

mod account;
mod audit;
mod audit_export;
mod chrome;
mod csrf;
mod edit_conflicts;
mod escaping;
mod forms;
mod gateway;
mod history;
mod keys;
mod last_owner;
mod lifecycle;
mod limits_on_app;
mod live_state;
mod not_found;
mod oidc_sign_in;
mod owner_changes;
mod page_costs;
mod policies;
mod policy_files;
mod policy_page;
mod policy_table;
mod policy_usage;
mod post_redirect_get;
mod roles;
mod security_headers;
mod sessions;
mod sign_in;
mod sign_in_redirects;
mod status;
mod transfer;
mod users;
mod webhooks;

/// Everything a refused console request could have changed, as the admin sees it.
#[derive(Debug, PartialEq)]
struct Snapshot {
    apps: Value,
    shop: Value,
    policies: Value,
    /// (username, admin, disabled, password hash) of every user.
    users: Vec<(String, bool, bool, String)>,
    audit_events: usize,
}

async fn snapshot(app: &TestApp) -> Snapshot {
    let read = |path: &'static str| async move {
        expect_status(app.get(path, &app.admin_token).await, StatusCode::OK).await
    };
    let users = users(app).await;
    Snapshot {
        apps: read("/api/v1/apps").await,
        shop: read("/api/v1/apps/shop").await,
        policies: read("/api/v1/policies?app=shop").await,
        users,
        audit_events: app.audit_count().await,
    }
}

/// (username, admin, disabled, password hash) of every user.
async fn users(app: &TestApp) -> Vec<(String, bool, bool, String)> {
    app.core()
        .await
        .control
        .list_users(&Actor::operator())
        .await
        .unwrap()
        .into_iter()
        .map(|u| {
            let (admin, disabled) = (u.is_admin(), u.is_disabled());
            (u.username, admin, disabled, u.password_hash)
        })
        .collect()
}

/// Asserts that the console answered a refused request with `status`.
#[track_caller]
fn assert_refused(what: &str, page: &Page, status: StatusCode) {
    assert_eq!(
        page.status, status,
        "{what}: expected {status}; body: {}",
        page.body
    );
}

/// A refusal with `status`, after which the admin sees everything as `before`.
async fn refused_without_trace(
    app: &TestApp,
    before: &Snapshot,
    what: &str,
    page: Page,
    status: StatusCode,
) {
    assert_refused(what, &page, status);
    assert_eq!(
        &snapshot(app).await,
        before,
        "{what}: a refused request changed something"
    );
}

/// The newest audit event, as the admin sees it.
async fn newest_event(app: &TestApp) -> Value {
    app.audit("").await.into_iter().next().expect("an event")
}

async fn admin_reads(app: &TestApp, path: &str) -> Value {
    expect_status(app.get(path, &app.admin_token).await, StatusCode::OK).await
}

/// The fields of the new-policy form, filled in.
fn policy_fields<'a>(name: &'a str, max_permits: &'a str) -> Vec<(&'a str, &'a str)> {
    vec![
        ("name", name),
        ("algorithm", "token_bucket"),
        ("rate", "5"),
        ("rate_unit", "second"),
        ("max_permits", max_permits),
        ("allowed_apps", "shop"),
        ("failure_mode", "closed"),
        ("enabled", "on"),
        ("description", ""),
    ]
}

/// The cast of most stories: applications `shop` (with policy `orders.create` and one
/// API key) and `other`; olga owns shop, vic views it, otto owns other, ulla belongs
/// nowhere. Returns the key's id.
async fn shop_and_people(app: &TestApp) -> String {
    app.create_app("shop").await;
    app.create_app("other").await;
    app.create_policy(json!({
        "name": "orders.create", "owner_app": "shop", "rate": 10, "max_permits": 20
    }))
    .await;
    let r = app
        .post(
            "/api/v1/apps/shop/keys",
            &app.admin_token,
            json!({"label": "checkout"}),
        )
        .await;
    let key = expect_status(r, StatusCode::CREATED).await;
    app.create_user("olga", Some(("shop", "owner"))).await;
    app.create_user("vic", Some(("shop", "viewer"))).await;
    app.create_user("otto", Some(("other", "owner"))).await;
    app.create_user("ulla", None).await;
    key["id"].as_str().unwrap().to_owned()
}

/// Every change an owner of shop may make in the console, as forged POSTs would send
/// them (the CSRF token is added or not by the caller).
fn changes_to_shop(key_id: &str) -> Vec<(String, Vec<(&'static str, &'static str)>)> {
    let mut edit = policy_fields("orders.create", "99");
    edit.push(("version", "1"));
    vec![
        (
            "/apps/shop/policies".to_owned(),
            policy_fields("forged.one", "5"),
        ),
        ("/policies/orders.create/edit".to_owned(), edit),
        (
            "/policies/orders.create/rollback".to_owned(),
            vec![("to_version", "1"), ("version", "1")],
        ),
        ("/policies/orders.create/delete".to_owned(), vec![]),
        (
            "/apps/shop/members".to_owned(),
            vec![("username", "ulla"), ("role", "owner")],
        ),
        ("/apps/shop/members/olga/remove".to_owned(), vec![]),
        ("/apps/shop/keys".to_owned(), vec![("label", "forged")]),
        (format!("/apps/shop/keys/{key_id}/revoke"), vec![]),
        (
            format!("/apps/shop/keys/{key_id}/rotate"),
            vec![("old_key_valid_for", "now")],
        ),
        (
            "/apps/shop/settings".to_owned(),
            vec![("slug", "forged"), ("name", "Forged"), ("description", "")],
        ),
        ("/apps/shop/delete".to_owned(), vec![]),
        (
            "/policies/orders.create/reset".to_owned(),
            vec![("key", "x")],
        ),
        // A policy file emptying shop (prune), with a plan id as a dry run would give it.
        (
            "/policy-files/apply".to_owned(),
            vec![
                ("file", "app: shop\npolicies: []\n"),
                ("prune", "true"),
                ("plan_id", "0123456789ab"),
            ],
        ),
    ]
}
