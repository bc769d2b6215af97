//! The live state of an application's policies, as a viewer watches it.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};

use super::shop_and_people;
use crate::helpers::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_viewer_watches_the_live_state_of_shops_policies() {
    let app = spawn_app(Db::Sqlite).await;
    shop_and_people(&app).await;
    // Three permits, refilled one every 1000 s: none come back during the test.
    app.create_policy(json!({
        "name": "search", "owner_app": "shop", "rate": 0.001, "max_permits": 3
    }))
    .await;
    let key = app.create_key("shop").await;
    let mut vic = app.sign_in("vic").await;

    let live = vic.get("/apps/shop/live").await;
    live.assert_status(StatusCode::OK);
    assert_eq!(live.header("cache-control"), Some("no-store"));
    assert!(
        live.header("content-type")
            .unwrap()
            .starts_with("application/json")
    );
    let search = |live: &Page| {
        live.json()["policies"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == "search")
            .cloned()
            .expect("search is listed")
    };
    assert_eq!(search(&live)["current"], "3");
    assert_eq!(search(&live)["max_permits"], 3);

    for _ in 0..3 {
        expect_status(app.acquire(&key, "search", 1).await, StatusCode::OK).await;
    }
    let live = vic.get("/apps/shop/live").await;
    assert_eq!(search(&live)["current"], "0");

    // Counts reach Redis every couple of seconds.
    let totals = |policy: &Value| {
        policy["activity"]
            .as_array()
            .unwrap()
            .iter()
            .fold((0, 0), |(g, d), m| {
                (
                    g + m["granted"].as_u64().unwrap(),
                    d + m["denied"].as_u64().unwrap(),
                )
            })
    };
    let activity_is = |want: (u64, u64)| {
        let vic = vic.clone();
        move || {
            let mut vic = vic.clone();
            async move { totals(&search(&vic.get("/apps/shop/live").await)) == want }
        }
    };
    assert!(
        eventually(Duration::from_secs(15), activity_is((3, 0))).await,
        "the three grants are counted"
    );

    expect_status(
        app.acquire(&key, "search", 1).await,
        StatusCode::TOO_MANY_REQUESTS,
    )
    .await;
    assert!(
        eventually(Duration::from_secs(15), activity_is((3, 1))).await,
        "the denial is counted"
    );

    // Someone who does not belong to shop sees none of it.
    let mut otto = app.sign_in("otto").await;
    otto.get("/apps/shop/live")
        .await
        .assert_status(StatusCode::FORBIDDEN);
    app.browser()
        .get("/apps/shop/live")
        .await
        .assert_redirect("/login?next=/apps/shop/live");
}
