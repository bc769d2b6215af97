//! Post-redirect-get: every console POST that creates something (an application, a user,
//! a policy, a member, an API key, a rotated key, an access token) answers 303 to a page;
//! a secret made by it is on that page once, never in a URL, and reloading the page
//! neither makes another one nor shows it again.

use reqwest::StatusCode;

use super::{admin_reads, policy_fields};
use crate::helpers::*;
use crate::on_every_backend;

/// The first secret with `prefix` on the page.
fn secret_on(page: &Page, prefix: &str) -> Option<String> {
    let start = page.body.find(prefix)?;
    let len = page.body[start..]
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '-'))
        .unwrap();
    Some(page.body[start..start + len].to_owned())
}

/// Whether the page shows no whole secret of this kind: at most the first characters
/// of one (as a key's list shows them, "rk_key_3fa9…").
fn shows_no_secret(page: &Page, prefix: &str) -> bool {
    page.body.match_indices(prefix).all(|(at, _)| {
        let rest = &page.body[at + prefix.len()..];
        rest.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '-'))
            .unwrap_or(rest.len())
            <= 4
    })
}

fn key_count(shop: &serde_json::Value) -> usize {
    shop["keys"].as_array().unwrap().len()
}

async fn every_creating_post_redirects_and_shows_a_secret_once(db: Db) {
    let app = spawn_app(db).await;
    let mut admin = app.sign_in_as_admin().await;

    let r = admin
        .post_form(
            "/apps",
            &[("slug", "shop"), ("name", "Shop"), ("description", "")],
        )
        .await;
    r.assert_redirect("/apps/shop?done=app-created");
    let r = admin
        .post_form("/users", &[("username", "olga"), ("password", PASSWORD)])
        .await;
    assert_eq!(r.status, StatusCode::SEE_OTHER, "{}", r.body);
    assert_eq!(r.location(), Some("/users?done=user-created"));
    admin
        .post_form(
            "/apps/shop/members",
            &[("username", "olga"), ("role", "owner")],
        )
        .await
        .assert_redirect("/apps/shop?done=member-saved#members");
    admin
        .post_form("/apps/shop/policies", &policy_fields("orders.create", "5"))
        .await
        .assert_redirect("/apps/shop?done=policy-created");

    // An API key: the POST redirects, the page after it shows the key once.
    let r = admin
        .post_form("/apps/shop/keys", &[("label", "checkout")])
        .await;
    r.assert_redirect("/apps/shop#new-key");
    assert!(!r.location().unwrap().contains("rk_key_"));
    let page = admin.get("/apps/shop").await;
    page.assert_status(StatusCode::OK);
    assert_eq!(page.header("cache-control"), Some("no-store"));
    let key = secret_on(&page, "rk_key_").expect("the new key on the page");
    expect_status(app.acquire(&key, "orders.create", 1).await, StatusCode::OK).await;
    // Reloading: the same number of keys, and the key is not shown again.
    let again = admin.get("/apps/shop").await;
    again.assert_status(StatusCode::OK);
    assert!(!again.has(&key));
    assert!(shows_no_secret(&again, "rk_key_"), "{}", again.body);
    let shop = admin_reads(&app, "/api/v1/apps/shop").await;
    assert_eq!(key_count(&shop), 1);

    // A rotation: a new key shown once, the old one still working for now.
    let id = shop["keys"][0]["id"].as_str().unwrap().to_owned();
    admin
        .post_form(
            &format!("/apps/shop/keys/{id}/rotate"),
            &[("old_key_valid_for", "24")],
        )
        .await
        .assert_redirect("/apps/shop?done=key-rotated#new-key");
    let page = admin.get("/apps/shop?done=key-rotated").await;
    let rotated = secret_on(&page, "rk_key_").expect("the rotated key on the page");
    assert_ne!(rotated, key);
    assert!(shows_no_secret(
        &admin.get("/apps/shop?done=key-rotated").await,
        "rk_key_"
    ));
    assert_eq!(key_count(&admin_reads(&app, "/api/v1/apps/shop").await), 2);

    // An access token, on the account page.
    let before = app.audit_count().await;
    admin
        .post_form("/account/tokens", &[("label", "deploy")])
        .await
        .assert_redirect("/account#new-token");
    let page = admin.get("/account").await;
    let token = secret_on(&page, "rk_pat_").expect("the new token on the page");
    expect_status(app.get("/api/v1/apps", &token).await, StatusCode::OK).await;
    assert!(!admin.get("/account").await.has("rk_pat_"));
    assert_eq!(app.audit_count().await, before + 1, "one token made");

    // A secret waits for its own page and session only: another page does not take it,
    // and another session of the same user never sees it.
    admin
        .post_form("/apps/shop/keys", &[("label", "batch")])
        .await
        .assert_redirect("/apps/shop#new-key");
    let mut elsewhere = app.sign_in("admin").await;
    assert!(shows_no_secret(
        &elsewhere.get("/apps/shop").await,
        "rk_key_"
    ));
    assert!(!admin.get("/account").await.has("rk_key_"));
    assert!(!shows_no_secret(&admin.get("/apps/shop").await, "rk_key_"));
}
on_every_backend!(
    post_redirect_get,
    every_creating_post_redirects_and_shows_a_secret_once
);
