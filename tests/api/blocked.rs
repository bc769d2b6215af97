//! Mode `block` (README "Blocking a resource"): every acquire of an enabled policy in mode
//! `block` is denied by the instance, without Redis, after the checks an enforced policy
//! makes (the app allowed, the permits within the capacity); an all-or-nothing call with a
//! blocked item takes nothing from its other buckets; a disabled policy still grants; and
//! lifting the block finds the bucket as it was.

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::helpers::*;

async fn body_of(response: reqwest::Response) -> (StatusCode, reqwest::header::HeaderMap, Value) {
    let status = response.status();
    let headers = response.headers().clone();
    (status, headers, response.json().await.expect("a JSON body"))
}

#[tokio::test]
async fn a_blocked_policy_denies_every_acquire_and_keeps_its_bucket() {
    let app = spawn_app(Db::Sqlite).await;
    let key = app.shop_with_policy("orders.create", 0.001, 5).await;
    app.create_app("other").await;
    let stranger = app.create_key("other").await;
    // Two permits taken while enforced: the bucket holds 3.
    expect_status(app.acquire(&key, "orders.create", 2).await, StatusCode::OK).await;

    let blocked = app
        .edit_policy("orders.create", json!({"mode": "block"}))
        .await;
    assert_eq!(blocked["mode"], "block");
    let (status, headers, body) = body_of(app.acquire(&key, "orders.create", 1).await).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{body}");
    assert_eq!(body["allowed"], false);
    assert_eq!(body["blocked"], true);
    assert_eq!(body["remaining"], 0);
    assert_eq!(body["limit"], 5);
    assert_eq!(body["retry_after_ms"], 1000);
    assert_eq!(headers["retry-after"], "1");
    assert!(headers.contains_key("ratelimit"), "{headers:?}");

    // Refused as an enforced policy refuses: another app, too many permits.
    expect_problem(
        app.acquire(&stranger, "orders.create", 1).await,
        StatusCode::FORBIDDEN,
    )
    .await;
    expect_problem(
        app.acquire(&key, "orders.create", 6).await,
        StatusCode::UNPROCESSABLE_ENTITY,
    )
    .await;

    // Counted as denials, where an owner looks.
    let denied = app
        .metric(r#"ratekeeper_decisions_total{outcome="denied",protocol="http"}"#)
        .await
        .unwrap_or_default();
    assert!(denied >= 1.0, "{}", app.metrics_text().await);

    // Disabled, it grants without counting; enforced again, the bucket is as it was.
    app.edit_policy("orders.create", json!({"enabled": false}))
        .await;
    let (status, _, body) = body_of(app.acquire(&key, "orders.create", 1).await).await;
    assert_eq!((status, &body["enforced"]), (StatusCode::OK, &json!(false)));
    app.edit_policy("orders.create", json!({"enabled": true, "mode": "enforce"}))
        .await;
    let (status, _, body) = body_of(app.acquire(&key, "orders.create", 1).await).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["remaining"], 2, "the block took nothing: {body}");
}

#[tokio::test]
async fn an_all_call_with_a_blocked_item_takes_nothing() {
    let app = spawn_app(Db::Sqlite).await;
    let key = app.shop_with_policy("burst", 0.001, 3).await;
    app.create_policy(
        json!({"name": "blocklist", "owner_app": "shop", "rate": 1.0,
                             "max_permits": 10, "scope": "per_key", "mode": "block"}),
    )
    .await;

    let all = json!({"all": [
        {"resource": "burst", "permits": 2},
        {"resource": "blocklist", "key": "50.0.0.5"}
    ]});
    let (status, _, body) = body_of(app.post("/v1/acquire", &key, all.clone()).await).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{body}");
    assert_eq!(body["allowed"], false);
    assert_eq!(body["results"][1]["blocked"], true, "{body}");
    assert_eq!(body["results"][1]["limit"], 10);
    assert_eq!(
        body["results"][0]["remaining"], 3,
        "the other item is only checked: {body}"
    );
    // The burst bucket is untouched: all three permits are there.
    let (status, _, body) = body_of(app.acquire(&key, "burst", 3).await).await;
    assert_eq!(status, StatusCode::OK, "{body}");

    // A per_key blocked policy still wants its key, as enforced.
    let missing = app
        .post("/v1/acquire", &key, json!({"resource": "blocklist"}))
        .await;
    expect_problem(missing, StatusCode::UNPROCESSABLE_ENTITY).await;
}

#[tokio::test]
async fn the_console_says_a_policy_is_blocked_and_offers_the_mode() {
    let app = spawn_app(Db::Sqlite).await;
    app.shop_with_policy("orders.create", 0.001, 5).await;
    app.edit_policy("orders.create", json!({"mode": "block"}))
        .await;
    let mut admin = app.sign_in_as_admin().await;

    let table = admin.get("/apps/shop").await;
    table.assert_status(StatusCode::OK);
    assert!(
        table.has("data-col=\"mode\" title=\"Every request denied until an owner lifts the block\">blocked</strong>"),
        "the application's table marks it"
    );
    let page = admin.get("/policies/orders.create/overview").await;
    page.assert_status(StatusCode::OK);
    assert!(page.has("<strong class=\"danger\">block: every request denied</strong>"));
    let form = admin.get("/policies/orders.create/edit").await;
    assert!(
        form.has("<option value=\"block\" selected>"),
        "the form keeps it"
    );
}
