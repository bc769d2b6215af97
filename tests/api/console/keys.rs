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

    // It is never shown again.
    let page = olga.get("/apps/shop").await;
    assert!(!page.has(&key));
    assert!(!page.has("rk_key_"));

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
