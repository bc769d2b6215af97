//! A policy's page (`/policies/{name}`, its permalink): how full its bucket is, and its
//! granted and denied acquires over the last hour, day and week, drawn from the per-minute
//! and per-hour counts every instance adds to Redis (README, "The web console").

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::json;

use crate::helpers::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_shows_fullness_and_usage_over_three_spans() {
    let app = spawn_app(Db::Sqlite).await;
    let key = app.shop_with_policy("orders.create", 0.001, 3).await;
    let mut admin = app.sign_in_as_admin().await;

    let page = admin.get("/policies/orders.create").await;
    page.assert_status(StatusCode::OK);
    assert!(page.has("data-fact=\"gauge\">3 / 3<"), "{}", page.body);
    assert!(page.has("data-status=\"ok\""));

    for _ in 0..5 {
        app.acquire(&key, "orders.create", 1).await;
    }
    // The counts reach Redis with the instance's next flush (every 2 s).
    let counted = eventually(Duration::from_secs(10), || {
        let mut admin = admin.clone();
        async move {
            let page = admin.get("/policies/orders.create").await;
            page.body.matches("data-total=\"granted\">3<").count() == 3
                && page.body.matches("data-total=\"denied\">2<").count() == 3
        }
    })
    .await;
    assert!(
        counted,
        "the hour, day and week charts each count 3 granted, 2 denied"
    );
    // The applications list says which application is denying, from the same counts
    // summed per application (written by the same flush, right after).
    let denying = "<span class=\"badge denying\">Denying 40%</span> \
                   <small class=\"muted\">last 10 min: 3 granted, 2 denied (40%)</small>";
    let listed = eventually(Duration::from_secs(10), || {
        let mut admin = admin.clone();
        async move { admin.get("/apps").await.has(denying) }
    })
    .await;
    assert!(listed, "{}", admin.get("/apps").await.body);
    let page = admin.get("/policies/orders.create").await;
    assert!(page.has("data-fact=\"gauge\">0 / 3<"), "{}", page.body);
    assert!(page.has("data-status=\"at-limit\""));
    assert!(page.has("aria-label=\"Last hour: 3 granted, 2 denied\""));
    // Bars: one minute (granted and denied) in each chart, nothing else.
    assert_eq!(page.body.matches("<rect class=\"g\"").count(), 3);
    assert_eq!(page.body.matches("<rect class=\"d\"").count(), 3);

    // The counts are two small strings per policy with an expiry: a day of minutes, a
    // month of hours.
    let mut redis = app.redis.clone();
    let pattern = format!("{}:activity:{{orders.create}}:*", app.settings.redis_prefix);
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg(&pattern)
        .query_async(&mut redis)
        .await
        .unwrap();
    assert_eq!(keys.len(), 2, "{keys:?}");
    for key in keys {
        let (len, ttl): (i64, i64) = redis::pipe()
            .cmd("STRLEN")
            .arg(&key)
            .cmd("PTTL")
            .arg(&key)
            .query_async(&mut redis)
            .await
            .unwrap();
        let (most_bytes, most_ms) = if key.contains(":m:") {
            (480, 25 * 3_600_000)
        } else {
            (192, 31 * 86_400_000)
        };
        assert!(len > 0 && len <= most_bytes, "{key}: {len} bytes");
        assert!(ttl > 0 && ttl <= most_ms, "{key}: expires in {ttl} ms");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_policy_has_a_permalink_even_one_named_like_an_action() {
    let app = spawn_app(Db::Sqlite).await;
    app.create_app("shop").await;
    for name in ["orders", "orders/edit"] {
        app.create_policy(json!({"name": name, "owner_app": "shop", "rate": 1, "max_permits": 5}))
            .await;
    }
    let mut admin = app.sign_in_as_admin().await;
    let list = admin.get("/apps/shop").await;
    assert!(list.has("href=\"/policies/orders\""), "{}", list.body);
    // "/policies/orders/edit" is the edit form of "orders": the page of "orders/edit" is
    // linked by its unambiguous alias.
    assert!(list.has("href=\"/policies/orders/edit/overview\""));
    let page = admin.get("/policies/orders").await;
    page.assert_status(StatusCode::OK);
    assert!(page.has("Policy <code>orders</code>"));
    let page = admin.get("/policies/orders/edit/overview").await;
    page.assert_status(StatusCode::OK);
    assert!(page.has("Policy <code>orders/edit</code>"));
    let form = admin.get("/policies/orders/edit").await;
    assert!(form.has("<form"), "the edit form of orders");
    admin
        .get("/policies/nope")
        .await
        .assert_status(StatusCode::NOT_FOUND);
}

/// Before deleting a policy, its delete page says what the policy decided in the last hour
/// and offers shadow mode or disabling instead.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_delete_page_says_what_the_policy_served_in_the_last_hour() {
    let app = spawn_app(Db::Sqlite).await;
    let key = app.shop_with_policy("orders.create", 0.001, 3).await;
    let mut admin = app.sign_in_as_admin().await;
    let quiet = admin.get("/policies/orders.create/delete").await;
    quiet.assert_status(StatusCode::OK);
    assert_eq!(
        quiet.text_of("last-hour").as_deref(),
        Some("No client acquired it in the last hour.")
    );
    assert!(quiet.has("href=\"/policies/orders.create/edit#mode\">put it in shadow mode</a>"));
    assert!(quiet.has("href=\"/policies/orders.create/edit#enabled\">stop enforcing it</a>"));

    for _ in 0..5 {
        app.acquire(&key, "orders.create", 1).await;
    }
    let said = "In the last hour it decided 5 acquires (3 granted, 2 denied): those clients would get 404 instead.";
    let counted = eventually(Duration::from_secs(10), || {
        let mut admin = admin.clone();
        async move {
            let page = admin.get("/policies/orders.create/delete").await;
            page.text_of("last-hour").as_deref() == Some(said)
        }
    })
    .await;
    let page = admin.get("/policies/orders.create/delete").await;
    assert!(counted, "{:?}", page.text_of("last-hour"));
}

/// A caller looked up on a keyed policy's page shows its own last hour, minute by minute,
/// and since when it is denied (from the top callers: no key is a metric label).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_looked_up_caller_shows_its_last_hour_and_since_when_it_is_denied() {
    let app = spawn_app(Db::Sqlite).await;
    app.create_app("shop").await;
    let key = app.create_key("shop").await;
    app.create_policy(json!({
        "name": "search", "owner_app": "shop", "rate": 0.001, "max_permits": 3, "scope": "per_key"
    }))
    .await;
    for _ in 0..5 {
        app.post(
            "/v1/acquire",
            &key,
            json!({"resource": "search", "permits": 1, "key": "ann"}),
        )
        .await;
    }
    app.post(
        "/v1/acquire",
        &key,
        json!({"resource": "search", "permits": 1, "key": "bob"}),
    )
    .await;
    let mut admin = app.sign_in_as_admin().await;
    let counted = eventually(Duration::from_secs(10), || {
        let mut admin = admin.clone();
        async move {
            let page = admin.get("/policies/search/overview?key=ann").await;
            page.text_of("caller-hour")
                .is_some_and(|t| t.contains("3 granted, 2 denied"))
        }
    })
    .await;
    let page = admin.get("/policies/search/overview?key=ann").await;
    assert!(counted, "{:?}", page.text_of("caller-hour"));
    let denials = page.text_of("caller-denials").unwrap();
    // (Its acquires may straddle a minute's end: one minute or two.)
    assert!(
        denials.starts_with("Denied in ")
            && denials.contains(" of the last 60 minutes: first at ")
            && denials.ends_with(" UTC."),
        "{denials}"
    );
    // Each caller's counts are its own.
    let bob = admin.get("/policies/search/overview?key=bob").await;
    let bob_hour = bob.text_of("caller-hour").unwrap();
    assert!(bob_hour.contains("1 granted, 0 denied"), "{bob_hour}");
    assert_eq!(
        bob.text_of("caller-denials").as_deref(),
        Some("Not denied in the last 60 minutes.")
    );
    // A policy's charts say their ends in UTC, the last bar being the span so far.
    assert!(
        page.has(" UTC · now (the last bar so far)"),
        "{}",
        page.body
    );
}
