//! What travels over the wire: console pages and admin API replies are compressed when the
//! client accepts it (an application page of 200 policies is ~10x smaller); acquire
//! replies never are (tiny, and on the hot path). Static files are linked by
//! content-hashed names a browser may keep for a year; their plain names must be checked
//! again on every use.

use std::io::Read;

use reqwest::StatusCode;
use reqwest::header::{ACCEPT_ENCODING, CACHE_CONTROL, CONTENT_ENCODING};
use serde_json::{Value, json};

use crate::helpers::*;

fn gunzip(bytes: &[u8]) -> String {
    let mut out = String::new();
    flate2::read::GzDecoder::new(bytes)
        .read_to_string(&mut out)
        .expect("a gzip body");
    out
}

#[tokio::test]
async fn console_and_admin_replies_are_compressed_acquires_are_not() {
    let app = spawn_app(Db::Sqlite).await;
    let key = app.shop_with_policy("orders.create", 10.0, 10).await;

    let plain: Value = app
        .get("/api/v1/policies", &app.admin_token)
        .await
        .json()
        .await
        .unwrap();
    let r = app
        .client
        .get(app.url("/api/v1/policies"))
        .bearer_auth(&app.admin_token)
        .header(ACCEPT_ENCODING, "gzip")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(r.headers()[CONTENT_ENCODING], "gzip");
    let unpacked: Value = serde_json::from_str(&gunzip(&r.bytes().await.unwrap())).unwrap();
    assert_eq!(unpacked, plain);

    let r = app
        .client
        .get(app.url("/login"))
        .header(ACCEPT_ENCODING, "br")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(r.headers()[CONTENT_ENCODING], "br");

    let r = app
        .client
        .post(app.url("/v1/acquire"))
        .bearer_auth(&key)
        .header(ACCEPT_ENCODING, "gzip, br")
        .json(&json!({"resource": "orders.create", "permits": 1}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert!(r.headers().get(CONTENT_ENCODING).is_none());
    assert_eq!(r.json::<Value>().await.unwrap()["allowed"], true);
}

#[tokio::test]
async fn static_files_have_content_hashed_names_cached_for_a_year() {
    let app = spawn_app(Db::Sqlite).await;
    let mut browser = app.browser();
    let login = browser.get("/login").await;
    let href = login
        .body
        .split("href=\"")
        .skip(1)
        .filter_map(|s| s.split('"').next())
        .find(|h| h.starts_with("/static/style."))
        .expect("the page links the style sheet")
        .to_owned();
    assert_ne!(
        href, "/static/style.css",
        "the link carries the content hash"
    );

    let hashed = browser.get(&href).await;
    hashed.assert_status(StatusCode::OK);
    let cache = hashed.header(CACHE_CONTROL.as_str()).unwrap();
    assert!(cache.contains("max-age=31536000"), "{cache}");
    assert!(cache.contains("immutable"), "{cache}");

    let plain = browser.get("/static/style.css").await;
    plain.assert_status(StatusCode::OK);
    assert_eq!(plain.body, hashed.body);
    assert_eq!(plain.header(CACHE_CONTROL.as_str()), Some("no-cache"));

    // A name with a hash that is not the file's is not served.
    browser
        .get("/static/style.0000000000.css")
        .await
        .assert_status(StatusCode::NOT_FOUND);
}
