//! The live state of a policy of each algorithm, through the API and the console.

use reqwest::StatusCode;

use super::{
    ALGORITHMS, DAY_MS, admin_reads, cell, for_each_algorithm, own_parameter, shop_with_key,
    three_permits,
};
use crate::helpers::*;

async fn the_state_shows_the_permits_left(algorithm: &str) {
    let app = spawn_app(Db::Sqlite).await;
    let key = shop_with_key(&app).await;
    app.create_policy(three_permits("p", algorithm)).await;
    let rate = if own_parameter(algorithm) == "rate" {
        0.001
    } else {
        0.0
    };

    let fresh = admin_reads(&app, "/api/v1/policies/p/state").await;
    assert_eq!(fresh["current_permits"], 3.0, "{fresh}");
    assert_eq!(fresh["full_in_ms"], 0, "{fresh}");
    assert_eq!(fresh["max_permits"], 3);
    assert_eq!(fresh["version"], 1);
    assert_eq!(fresh["rate"], rate, "{fresh}");

    for _ in 0..2 {
        expect_status(app.acquire(&key, "p", 1).await, StatusCode::OK).await;
    }
    let state = admin_reads(&app, "/api/v1/policies/p/state").await;
    let current = state["current_permits"].as_f64().unwrap();
    if algorithm == "token_bucket" {
        // A token bucket refills continuously: a hair above 1 at 1 per 1000 s.
        assert!((1.0..1.01).contains(&current), "{state}");
    } else {
        assert_eq!(current, 1.0, "{state}");
    }
    let full_in = state["full_in_ms"].as_i64().unwrap();
    assert!((1..=2 * DAY_MS).contains(&full_in), "{state}");
    assert_eq!(state["max_permits"], 3);
    assert_eq!(state["version"], 1);
    assert_eq!(state["rate"], rate, "{state}");
}
for_each_algorithm!(state_after_two_of_three, the_state_shows_the_permits_left);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_live_view_shows_the_permits_left_of_every_algorithm() {
    let app = spawn_app(Db::Sqlite).await;
    let key = shop_with_key(&app).await;
    for algorithm in ALGORITHMS {
        app.create_policy(three_permits(algorithm, algorithm)).await;
    }
    app.create_user("vic", Some(("shop", "viewer"))).await;
    let mut vic = app.sign_in("vic").await;
    let of = |live: &Page, name: &str| {
        live.json()["policies"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("{name} is listed: {}", live.body))
    };

    let live = vic.get("/apps/shop/live").await;
    live.assert_status(StatusCode::OK);
    for algorithm in ALGORITHMS {
        let policy = of(&live, algorithm);
        assert_eq!(policy["current"], "3", "{policy}");
        assert_eq!(policy["max_permits"], 3, "{policy}");
        assert_eq!(policy["full_in"], "full", "{policy}");
    }

    for algorithm in ALGORITHMS {
        for _ in 0..2 {
            expect_status(app.acquire(&key, algorithm, 1).await, StatusCode::OK).await;
        }
    }
    let live = vic.get("/apps/shop/live").await;
    let page = vic.get("/apps/shop").await;
    page.assert_status(StatusCode::OK);
    for algorithm in ALGORITHMS {
        let policy = of(&live, algorithm);
        assert_eq!(policy["current"], "1", "{policy}");
        assert_eq!(policy["max_permits"], 3, "{policy}");
        let full_in = policy["full_in"].as_str().unwrap();
        assert!(full_in.starts_with("in "), "{policy}");
        assert_eq!(cell(&page, algorithm, "current"), "1", "{algorithm}");
        assert!(
            cell(&page, algorithm, "full-in").starts_with("in "),
            "{algorithm}"
        );
        let named = cell(&page, algorithm, "algorithm");
        assert!(
            !named.is_empty() && named != algorithm,
            "{algorithm} reads as {named}"
        );
    }
}
