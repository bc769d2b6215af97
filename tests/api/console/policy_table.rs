//! An application's policies table at scale: filtered by name, sorted by how close each
//! policy is to its limit, 50 rows to a page, and a live refresh that sends only the rows
//! whose state changed since the page last drew them.

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::helpers::*;

async fn shop_with_policies(app: &TestApp, count: usize) -> String {
    app.create_app("shop").await;
    for i in 0..count {
        app.create_policy(json!({"name": format!("p{i:03}"), "owner_app": "shop",
                                 "rate": 0.001, "max_permits": 5}))
            .await;
    }
    app.create_key("shop").await
}

fn rows(page: &Page) -> Vec<String> {
    page.body
        .split("<tr data-policy=\"")
        .skip(1)
        .map(|s| s.split('"').next().unwrap().to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_policies_are_paged_filtered_and_sorted() {
    let app = spawn_app(Db::Sqlite).await;
    let key = shop_with_policies(&app, 120).await;
    let mut admin = app.sign_in_as_admin().await;

    let first = admin.get("/apps/shop").await;
    first.assert_status(StatusCode::OK);
    assert_eq!(rows(&first).len(), 50);
    assert_eq!(rows(&first)[0], "p000");
    assert!(first.has("href=\"?page=3#policies\""), "a pager to page 3");
    let last = admin.get("/apps/shop?page=3").await;
    assert_eq!(rows(&last).len(), 20);
    assert_eq!(rows(&last)[19], "p119");

    let filtered = admin.get("/apps/shop?q=P11").await;
    assert_eq!(
        rows(&filtered),
        (110..120).map(|i| format!("p{i}")).collect::<Vec<_>>()
    );
    let none = admin.get("/apps/shop?q=nothing-like-it").await;
    assert!(none.has("id=\"no-match\""));

    // p077 drained: sorted by status it comes first, marked at its limit.
    for _ in 0..5 {
        expect_status(app.acquire(&key, "p077", 1).await, StatusCode::OK).await;
    }
    let sorted = admin.get("/apps/shop?sort=status").await;
    assert_eq!(rows(&sorted)[0], "p077");
    assert!(sorted.has("<span class=\"badge at-limit\">At its limit</span>"));

    for (query, message) in [
        (
            "sort=size",
            "sort must be one of attention, name, status or denied",
        ),
        (
            "status=loud",
            "status must be one of all, denying, would-deny, attention or quiet",
        ),
        ("page=abc", "page must be a whole number from 1"),
        ("page=0", "page must be a whole number from 1"),
    ] {
        let page = admin.get(&format!("/apps/shop?{query}")).await;
        page.assert_status(StatusCode::BAD_REQUEST);
        assert!(page.has(message), "{query}: {}", page.body);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_refresh_sends_only_the_rows_that_changed() {
    let app = spawn_app(Db::Sqlite).await;
    let key = shop_with_policies(&app, 60).await;
    let mut admin = app.sign_in_as_admin().await;

    // Without `seen`: every row on the page (the first 50).
    let live = admin.get("/apps/shop/live").await;
    live.assert_status(StatusCode::OK);
    let body: Value = live.json();
    assert_eq!(body["policies"].as_array().unwrap().len(), 50);
    let digests: Vec<String> = body["digests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_str().unwrap().to_owned())
        .collect();
    assert_eq!(digests.len(), 50);
    // The page drew the same state: the same digests.
    let page = admin.get("/apps/shop").await;
    assert!(page.has(&format!("data-digest=\"{}\"", digests[3])));

    let seen = digests.join(".");
    let live = admin.get(&format!("/apps/shop/live?seen={seen}")).await;
    assert_eq!(live.json()["policies"], json!([]), "nothing changed");

    expect_status(app.acquire(&key, "p007", 2).await, StatusCode::OK).await;
    let live = admin.get(&format!("/apps/shop/live?seen={seen}")).await;
    let changed = live.json()["policies"].as_array().unwrap().clone();
    assert_eq!(changed.len(), 1, "{changed:?}");
    assert_eq!(changed[0]["name"], "p007");
    assert_eq!(changed[0]["current"], "3");
    assert_eq!(changed[0]["status"], "ok");

    // The second page's rows, by the page's own query.
    let live = admin.get("/apps/shop/live?page=2").await;
    let names: Vec<String> = live.json()["policies"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(names.len(), 10);
    assert_eq!(names[0], "p050");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_refresh_reads_only_the_rows_on_screen() {
    let app = spawn_app(Db::Sqlite).await;
    shop_with_policies(&app, 60).await;
    let mut admin = app.sign_in_as_admin().await;
    // The page's script names its rows: only those come back, in its order, however
    // the page was sorted.
    let live = admin
        .get("/apps/shop/live?sort=attention&rows=p007,p003,nothing-such")
        .await;
    live.assert_status(StatusCode::OK);
    let body: Value = live.json();
    let names: Vec<&str> = body["policies"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["p007", "p003"]);
    assert_eq!(body["digests"].as_array().unwrap().len(), 2);
}
