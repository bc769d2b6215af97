//! API keys in the console: made with post-redirect-get and shown once, working,
//! revoked.

use reqwest::StatusCode;

use super::{admin_reads, shop_and_people};
use crate::helpers::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_made_in_the_console_is_shown_once_works_and_can_be_revoked() {
    let app = spawn_app(Db::Sqlite).await;
    shop_and_people(&app).await;
    let mut olga = app.sign_in("olga").await;

    olga.post_form("/apps/shop/keys", &[("label", "batch")])
        .await
        .assert_redirect("/apps/shop#new-key");
    let page = olga.get("/apps/shop").await;
    page.assert_status(StatusCode::OK);
    assert_eq!(page.header("cache-control"), Some("no-store"));
    let start = page.body.find("rk_key_").expect("the key on the page");
    let len = page.body[start..]
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '-'))
        .unwrap();
    let key = page.body[start..start + len].to_owned();
    assert_eq!(
        page.body.matches(&key).count(),
        1,
        "the key is on the page once"
    );

    let r = app.acquire(&key, "orders.create", 1).await;
    expect_status(r, StatusCode::OK).await;

    // It is never shown again: only its first characters, to tell it from the others.
    let page = olga.get("/apps/shop").await;
    assert!(!page.has(&key));
    let prefix = &key[.."rk_key_".len() + 4];
    assert!(
        page.has(&format!("<code class=\"key-prefix\">{prefix}…</code>")),
        "{}",
        page.body
    );

    let shop = admin_reads(&app, "/api/v1/apps/shop").await;
    let id = shop["keys"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["label"] == "batch")
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(page.has(&format!("action=\"/apps/shop/keys/{id}/revoke\"")));
    olga.post_form(&format!("/apps/shop/keys/{id}/revoke"), &[])
        .await
        .assert_redirect("/apps/shop?done=key-revoked#keys");
    let r = app.acquire(&key, "orders.create", 1).await;
    expect_status(r, StatusCode::UNAUTHORIZED).await;
    let page = olga.get("/apps/shop").await;
    assert!(!page.has(&format!("action=\"/apps/shop/keys/{id}/revoke\"")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rotated_keys_are_told_apart_and_revoked_ones_kept_aside() {
    let app = spawn_app(Db::Sqlite).await;
    shop_and_people(&app).await;
    let shop = admin_reads(&app, "/api/v1/apps/shop").await;
    let old_id = shop["keys"][0]["id"].as_str().unwrap().to_owned();
    let old_prefix = shop["keys"][0]["prefix"].as_str().unwrap().to_owned();
    let r = app
        .post(
            &format!("/api/v1/apps/shop/keys/{old_id}/rotate"),
            &app.admin_token,
            serde_json::json!({}),
        )
        .await;
    let rotated = expect_status(r, StatusCode::CREATED).await;
    let new_key = rotated["key"].as_str().unwrap().to_owned();
    let new_prefix = &new_key[.."rk_key_".len() + 4];
    assert_ne!(old_prefix, new_prefix);
    assert_eq!(
        rotated["old_key"]["replaced_by"], rotated["id"],
        "{rotated}"
    );

    let mut olga = app.sign_in("olga").await;
    let page = olga.get("/apps/shop").await;
    // Two keys labelled "checkout", told apart by their first characters, the old one
    // saying which replaced it.
    assert!(page.has(&format!(
        "checkout <code class=\"key-prefix\">{old_prefix}…</code>"
    )));
    assert!(page.has(&format!(
        "checkout <code class=\"key-prefix\">{new_prefix}…</code>"
    )));
    assert!(
        page.has(&format!("replaced by <code>{new_prefix}…</code>")),
        "{}",
        page.body
    );
    assert!(!page.has("id=\"revoked-keys\""), "none revoked yet");

    olga.post_form(&format!("/apps/shop/keys/{old_id}/revoke"), &[])
        .await
        .assert_redirect("/apps/shop?done=key-revoked#keys");
    let page = olga.get("/apps/shop").await;
    let aside = page
        .body
        .find("id=\"revoked-keys\"")
        .expect("a section of revoked keys");
    let old_row = page.body.find(&format!("data-key=\"{old_id}\"")).unwrap();
    assert!(old_row > aside, "the revoked key is listed apart");
    assert!(page.has("Revoked keys (1)"));
}
