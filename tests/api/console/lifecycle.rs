//! An application's lifecycle: renamed (everything that names it follows, Redis too) and
//! deleted (refused while it owns policies); API keys that expire, and rotated; personal
//! access tokens made and revoked in the console.

use reqwest::StatusCode;
use serde_json::json;

use super::admin_reads;
use crate::helpers::*;
use crate::on_every_backend;

/// Apps shop (owning `orders.create`, a per_app policy with an override for shop) and
/// cart (owning `cart.add`, which allows shop); a key of shop; olga owns shop.
async fn shop_and_cart(app: &TestApp) -> String {
    app.create_app("shop").await;
    app.create_app("cart").await;
    let key = app.create_key("shop").await;
    app.create_policy(json!({"name": "orders.create", "owner_app": "shop",
                             "rate": 10, "max_permits": 20}))
        .await;
    app.create_policy(
        json!({"name": "cart.add", "owner_app": "cart", "scope": "per_app",
                             "rate": 1, "max_permits": 2, "allowed_apps": ["cart", "shop"],
                             "overrides": [{"match": "shop", "max_permits": 5}]}),
    )
    .await;
    app.create_user("olga", Some(("shop", "owner"))).await;
    key
}

async fn a_renamed_app_keeps_everything_that_names_it(db: Db) {
    let app = spawn_app(db).await;
    let key = shop_and_cart(&app).await;
    let mut olga = app.sign_in("olga").await;

    let page = olga.get("/apps/shop").await;
    olga.submit(
        &page,
        "/apps/shop/settings",
        &[("slug", "store"), ("name", "The store")],
    )
    .await
    .assert_redirect("/apps/store?done=app-updated");

    // The policy it owns, its key, its members: all follow.
    let store = admin_reads(&app, "/api/v1/apps/store").await;
    assert_eq!(store["name"], "The store");
    assert_eq!(store["members"][0]["username"], "olga");
    let owned = admin_reads(&app, "/api/v1/policies/orders.create").await;
    assert_eq!(owned["owner_app"], "store");
    assert_eq!(owned["allowed_apps"], json!(["store"]));
    // Another application's policy that allowed it now allows the new slug, in SQL,
    // its overrides and Redis, with a new version.
    let other = admin_reads(&app, "/api/v1/policies/cart.add").await;
    assert_eq!(other["allowed_apps"], json!(["cart", "store"]));
    assert_eq!(other["overrides"][0]["match"], "store");
    assert_eq!(other["version"], 2);
    // ... which its history lists, as the renamer's.
    let versions = admin_reads(&app, "/api/v1/policies/cart.add/versions").await;
    assert_eq!(versions[0]["version"], 2);
    assert_eq!(
        versions[0]["policy"]["allowed_apps"],
        json!(["cart", "store"])
    );
    assert_eq!(
        app.redis_field(&app.policy_key("cart.add"), "apps")
            .await
            .as_deref(),
        Some(",cart,store,")
    );
    // The key still works, on both policies (the override follows too: limit 5).
    expect_status(app.acquire(&key, "orders.create", 1).await, StatusCode::OK).await;
    let granted = expect_status(app.acquire(&key, "cart.add", 1).await, StatusCode::OK).await;
    assert_eq!(granted["limit"], 5);
    // The old slug names nothing; the rename is audited.
    expect_problem(
        app.get("/api/v1/apps/shop", &app.admin_token).await,
        StatusCode::NOT_FOUND,
    )
    .await;
    let renamed = app.audit("?app=store").await;
    assert!(
        renamed
            .iter()
            .any(|e| e["action"] == "rename" && e["before"]["slug"] == "shop"),
        "{renamed:?}"
    );

    // A slug taken, or invalid, is refused on the form, naming why.
    let page = olga.get("/apps/store").await;
    let taken = olga
        .submit(&page, "/apps/store/settings", &[("slug", "cart")])
        .await;
    taken.assert_status(StatusCode::UNPROCESSABLE_ENTITY);
    assert!(taken.has("already exists"));
    let r = app
        .send(
            "PATCH",
            "/api/v1/apps/store",
            &app.admin_token,
            Some(json!({"slug": "No!"})),
        )
        .await;
    expect_problem(r, StatusCode::UNPROCESSABLE_ENTITY).await;
}
on_every_backend!(rename, a_renamed_app_keeps_everything_that_names_it);

async fn an_app_with_policies_cannot_be_deleted(db: Db) {
    let app = spawn_app(db).await;
    let key = shop_and_cart(&app).await;
    let mut olga = app.sign_in("olga").await;

    let confirm = olga.get("/apps/shop/delete").await;
    confirm.assert_status(StatusCode::OK);
    let refused = olga.submit(&confirm, "/apps/shop/delete", &[]).await;
    refused.assert_status(StatusCode::CONFLICT);
    assert!(
        refused.has("shop owns 1 policies; delete them first"),
        "{}",
        refused.body
    );
    assert!(refused.has("href=\"/apps/shop#policies\""));
    let r = app
        .send("DELETE", "/api/v1/apps/shop", &app.admin_token, None)
        .await;
    let problem = expect_problem(r, StatusCode::CONFLICT).await;
    assert_eq!(problem["type"], "urn:ratekeeper:problem:app-owns-policies");
    expect_status(app.acquire(&key, "orders.create", 1).await, StatusCode::OK).await;

    // Without policies it goes, with its key and memberships; cart's policy no longer
    // names it.
    let r = app
        .send(
            "DELETE",
            "/api/v1/policies/orders.create",
            &app.admin_token,
            None,
        )
        .await;
    assert_eq!(r.status(), StatusCode::NO_CONTENT);
    olga.submit(&confirm, "/apps/shop/delete", &[])
        .await
        .assert_redirect("/apps?done=app-deleted");
    expect_problem(
        app.get("/api/v1/apps/shop", &app.admin_token).await,
        StatusCode::NOT_FOUND,
    )
    .await;
    expect_problem(
        app.acquire(&key, "cart.add", 1).await,
        StatusCode::UNAUTHORIZED,
    )
    .await;
    let other = admin_reads(&app, "/api/v1/policies/cart.add").await;
    assert_eq!(other["allowed_apps"], json!(["cart"]));
    assert_eq!(other["overrides"], json!([]));
    assert!(!olga.get("/apps").await.has("/apps/shop\""));
}
on_every_backend!(delete, an_app_with_policies_cannot_be_deleted);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_expire_and_rotate_on_the_servers_clock() {
    let app = spawn_app(Db::Sqlite).await;
    let old = app.shop_with_policy("orders.create", 100.0, 100).await;

    // An expiry in the past is refused; one in the future is kept and shown.
    let r = app
        .post(
            "/api/v1/apps/shop/keys",
            &app.admin_token,
            json!({"label": "x", "expires_at": "2001-01-01T00:00:00Z"}),
        )
        .await;
    let problem = expect_problem(r, StatusCode::UNPROCESSABLE_ENTITY).await;
    assert_eq!(problem["field"], "expires_at");
    let r = app
        .post(
            "/api/v1/apps/shop/keys",
            &app.admin_token,
            json!({"label": "later", "expires_at": "2999-01-01T00:00:00Z"}),
        )
        .await;
    let later = expect_status(r, StatusCode::CREATED).await;
    assert_eq!(later["expires_at"], "2999-01-01T00:00:00.000Z");
    let later_key = later["key"].as_str().unwrap().to_owned();
    expect_status(
        app.acquire(&later_key, "orders.create", 1).await,
        StatusCode::OK,
    )
    .await;

    // Rotation with the default: both keys work, the old one for 24 more hours.
    let shop = admin_reads(&app, "/api/v1/apps/shop").await;
    let old_id = shop["keys"][0]["id"].as_str().unwrap().to_owned();
    let r = app
        .post(
            &format!("/api/v1/apps/shop/keys/{old_id}/rotate"),
            &app.admin_token,
            json!({}),
        )
        .await;
    let rotated = expect_status(r, StatusCode::CREATED).await;
    assert_eq!(rotated["label"], "test");
    assert!(rotated["old_key"]["expires_at"].is_string());
    let new = rotated["key"].as_str().unwrap().to_owned();
    expect_status(app.acquire(&old, "orders.create", 1).await, StatusCode::OK).await;
    expect_status(app.acquire(&new, "orders.create", 1).await, StatusCode::OK).await;

    // Rotating the new one "now": its old self is refused at once, saying it expired.
    let new_id = rotated["id"].as_str().unwrap().to_owned();
    let r = app
        .post(
            &format!("/api/v1/apps/shop/keys/{new_id}/rotate"),
            &app.admin_token,
            json!({"old_key_expires_at": "now"}),
        )
        .await;
    let newest = expect_status(r, StatusCode::CREATED).await;
    let problem = expect_problem(
        app.acquire(&new, "orders.create", 1).await,
        StatusCode::UNAUTHORIZED,
    )
    .await;
    assert!(
        problem["detail"].as_str().unwrap().contains("expired"),
        "{problem}"
    );
    let newest_key = newest["key"].as_str().unwrap();
    expect_status(
        app.acquire(newest_key, "orders.create", 1).await,
        StatusCode::OK,
    )
    .await;
    // An expired key cannot be rotated again, and the table says it expired.
    let r = app
        .post(
            &format!("/api/v1/apps/shop/keys/{new_id}/rotate"),
            &app.admin_token,
            json!({}),
        )
        .await;
    expect_problem(r, StatusCode::CONFLICT).await;
    let page = app.sign_in_as_admin().await.get("/apps/shop").await;
    assert!(page.has("expired 20"), "{}", page.body);
    assert!(page.has("expires 2999-01-01 00:00:00 UTC"));
    let audit = app.audit("?app=shop").await;
    assert!(audit.iter().any(|e| e["action"] == "rotate"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_with_an_expiry_from_the_console() {
    let app = spawn_app(Db::Sqlite).await;
    app.create_app("shop").await;
    app.create_user("olga", Some(("shop", "owner"))).await;
    let mut olga = app.sign_in("olga").await;
    let page = olga
        .post_form(
            "/apps/shop/keys",
            &[("label", "old"), ("expires_at", "2001-01-01T00:00")],
        )
        .await;
    page.assert_status(StatusCode::UNPROCESSABLE_ENTITY);
    assert!(page.has("id=\"expires_at-error\""));
    // The form is far down the page: its top says so, with a link to it.
    let summary = page
        .body
        .find("id=\"form-errors\"")
        .expect("a message at the top");
    assert!(summary < page.body.find("id=\"policies\"").unwrap());
    assert!(
        page.has("Nothing was saved: the form under <a href=\"#keys\">API keys</a> has an error"),
        "{}",
        page.body
    );
    let fine = olga.get("/apps/shop").await;
    assert!(!fine.has("id=\"form-errors\""));
    olga.post_form(
        "/apps/shop/keys",
        &[("label", "temp"), ("expires_at", "2999-05-01T12:30")],
    )
    .await
    .assert_redirect("/apps/shop#new-key");
    let page = olga.get("/apps/shop").await;
    assert!(
        page.has("expires 2999-05-01T12:30:00.000Z"),
        "{}",
        page.body
    );
    assert!(page.has("expires 2999-05-01 12:30:00 UTC"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn access_tokens_are_made_and_revoked_in_the_console() {
    let app = spawn_app(Db::Sqlite).await;
    app.create_app("shop").await;
    let cli_token = app.create_user("olga", Some(("shop", "owner"))).await;
    let mut olga = app.sign_in("olga").await;

    // The token the CLI made is listed (by label, never its text).
    let page = olga.get("/account").await;
    assert!(page.has("<th scope=\"row\">tests</th>"));
    assert!(!page.has(&cli_token));

    let empty = olga.post_form("/account/tokens", &[("label", " ")]).await;
    empty.assert_status(StatusCode::UNPROCESSABLE_ENTITY);
    assert!(empty.has("id=\"token-label-error\""));
    olga.post_form("/account/tokens", &[("label", "deploy")])
        .await
        .assert_redirect("/account#new-token");
    let page = olga.get("/account").await;
    let start = page.body.find("rk_pat_").unwrap();
    let token: String = page.body[start..]
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '-')
        .collect();
    expect_status(app.get("/api/v1/apps/shop", &token).await, StatusCode::OK).await;

    // Revoked: it stops working at once; the other token is untouched.
    let page = olga.get("/account").await;
    let id_at = page.body.find("data-token=\"").unwrap() + "data-token=\"".len();
    let ids: Vec<String> = page
        .body
        .match_indices("data-token=\"")
        .map(|(i, m)| page.body[i + m.len()..i + m.len() + 16].to_owned())
        .collect();
    assert_eq!(ids.len(), 2, "{ids:?} {}", &page.body[id_at..]);
    let deploy = ids[1].clone();
    olga.post_form(&format!("/account/tokens/{deploy}/revoke"), &[])
        .await
        .assert_redirect("/account?done=token-revoked#tokens");
    expect_problem(
        app.get("/api/v1/apps/shop", &token).await,
        StatusCode::UNAUTHORIZED,
    )
    .await;
    expect_status(
        app.get("/api/v1/apps/shop", &cli_token).await,
        StatusCode::OK,
    )
    .await;
    // Another user's token cannot be revoked from here.
    let mut admin = app.sign_in_as_admin().await;
    let page = admin
        .post_form(&format!("/account/tokens/{}/revoke", ids[0]), &[])
        .await;
    page.assert_status(StatusCode::NOT_FOUND);
    expect_status(
        app.get("/api/v1/apps/shop", &cli_token).await,
        StatusCode::OK,
    )
    .await;
}
