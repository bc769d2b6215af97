//! What the console says a limit is doing over the last minutes (README, "The web
//! console"): how much it denies, with severity, shadow mode's would-be denials in amber
//! beside real denials, what needs attention first, and a filter by status.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::json;

use crate::helpers::*;

/// Whether `path` says `text` within 10 s (the counts reach Redis with a flush every 2 s).
async fn page_comes_to_say(browser: &Browser, path: &str, text: &str) -> bool {
    eventually(Duration::from_secs(10), || {
        let mut browser = browser.clone();
        async move { browser.get(path).await.has(text) }
    })
    .await
}

fn rows(page: &Page) -> Vec<String> {
    page.body
        .split("<tr data-policy=\"")
        .skip(1)
        .map(|s| s.split('"').next().unwrap().to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn denials_and_would_be_denials_are_told_apart_and_come_first() {
    let app = spawn_app(Db::Sqlite).await;
    app.create_app("shop").await;
    let key = app.create_key("shop").await;
    for (name, mode) in [
        ("a.quiet", "enforce"),
        ("b.denying", "enforce"),
        ("c.shadow", "shadow"),
    ] {
        app.create_policy(json!({"name": name, "owner_app": "shop", "rate": 0.001,
                                 "max_permits": 1, "mode": mode}))
            .await;
    }
    // Each of the two: one grant, then three the limit denies (or would deny).
    for name in ["b.denying", "c.shadow"] {
        for _ in 0..4 {
            app.acquire(&key, name, 1).await;
        }
    }
    let mut admin = app.sign_in_as_admin().await;
    let counted = eventually(Duration::from_secs(10), || {
        let mut admin = admin.clone();
        async move {
            let page = admin.get("/apps/shop").await;
            page.has(">Denying 75%</span>") && page.has(">Would deny 75%</span>")
        }
    })
    .await;
    let page = admin.get("/apps/shop").await;
    assert!(counted, "{}", page.body);
    assert!(page.has("<span class=\"badge denying\" data-col=\"recent-badge\">Denying 75%"));
    assert!(page.has("<span class=\"badge would-deny\" data-col=\"recent-badge\">Would deny 75%"));
    assert!(
        page.has("1 granted, 0 denied, 3 would have been denied"),
        "{}",
        page.body
    );
    assert!(page.has("1 granted, 3 denied (75%)"), "{}", page.body);
    // What needs attention first: the denying one, then the shadow one, then the rest.
    assert_eq!(rows(&page), ["b.denying", "c.shadow", "a.quiet"]);
    assert!(
        page.has("<strong>1 of 3 denying</strong>, 1 would deny (shadow)"),
        "{}",
        page.body
    );
    // By name on request.
    let by_name = admin.get("/apps/shop?sort=name").await;
    assert_eq!(rows(&by_name), ["a.quiet", "b.denying", "c.shadow"]);
    // Most denied counts would-be denials after real ones.
    let most = admin.get("/apps/shop?sort=denied").await;
    assert_eq!(rows(&most), ["b.denying", "c.shadow", "a.quiet"]);

    for (status, expected) in [
        ("denying", vec!["b.denying"]),
        ("would-deny", vec!["c.shadow"]),
        ("attention", vec!["b.denying", "c.shadow"]),
        ("quiet", vec!["a.quiet"]),
    ] {
        let page = admin.get(&format!("/apps/shop?status={status}")).await;
        page.assert_status(StatusCode::OK);
        assert_eq!(rows(&page), expected, "{status}");
    }

    // The applications list: the application's share denied and its would-be denials.
    let listed = page_comes_to_say(
        &admin,
        "/apps",
        "2 granted, 3 denied (38%), 3 would have been denied",
    )
    .await;
    let apps = admin.get("/apps").await;
    assert!(listed, "{}", apps.body);
    assert!(
        apps.has("<span class=\"badge denying\">Denying 38%</span>"),
        "{}",
        apps.body
    );
    // Across the applications, what needs attention now: the denying one, then the one
    // that would deny; the quiet one is not listed.
    let attention = apps
        .text_of("attention")
        .expect("a list of what needs attention");
    assert!(
        attention.contains("2 policies of your applications are denying, refusing or would deny"),
        "{attention}"
    );
    assert_eq!(rows(&apps), ["b.denying", "c.shadow"]);
    // Someone who sees no application with trouble gets no such list.
    app.create_app("calm").await;
    app.create_user("cleo", Some(("calm", "owner"))).await;
    let mut cleo = app.sign_in("cleo").await;
    assert!(!cleo.get("/apps").await.has("id=\"attention\""));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_application_of_only_would_be_denials_is_amber_not_green() {
    let app = spawn_app(Db::Sqlite).await;
    app.create_app("shop").await;
    let key = app.create_key("shop").await;
    app.create_policy(json!({"name": "trial", "owner_app": "shop", "rate": 0.001,
                             "max_permits": 1, "mode": "shadow"}))
        .await;
    for _ in 0..2 {
        app.acquire(&key, "trial", 1).await;
    }
    let mut admin = app.sign_in_as_admin().await;
    let listed = page_comes_to_say(
        &admin,
        "/apps",
        "<span class=\"badge would-deny\">Would deny 50%</span>",
    )
    .await;
    assert!(listed, "{}", admin.get("/apps").await.body);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acquires_of_a_policy_that_does_not_exist_are_counted_per_application() {
    let app = spawn_app(Db::Sqlite).await;
    app.create_app("shop").await;
    let key = app.create_key("shop").await;
    app.create_policy(json!({"name": "orders", "owner_app": "shop", "rate": 1,
                             "max_permits": 5}))
        .await;
    for name in ["orders.old", "orders.old", "typo"] {
        assert_eq!(
            app.acquire(&key, name, 1).await.status(),
            StatusCode::NOT_FOUND
        );
    }
    let mut admin = app.sign_in_as_admin().await;
    let listed = page_comes_to_say(
        &admin,
        "/apps",
        "0 granted, 0 denied, 3 named no policy (404)",
    )
    .await;
    assert!(listed, "{}", admin.get("/apps").await.body);
    let page = admin.get("/apps/shop").await;
    assert!(
        page.has("<span class=\"badge denying-some\">3 named no policy</span>"),
        "{}",
        page.body
    );
}

/// A revoked (or expired) key still in use is refused with 401 and counted for its
/// application, whose page says so; a key never made counts for no one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revoked_key_still_in_use_is_counted_for_its_application() {
    let app = spawn_app(Db::Sqlite).await;
    app.create_app("shop").await;
    let r = app
        .post(
            "/api/v1/apps/shop/keys",
            &app.admin_token,
            json!({"label": "old"}),
        )
        .await;
    let created = expect_status(r, StatusCode::CREATED).await;
    let (id, key) = (
        created["id"].as_str().unwrap().to_owned(),
        created["key"].as_str().unwrap().to_owned(),
    );
    app.create_policy(json!({"name": "orders", "owner_app": "shop", "rate": 1,
                             "max_permits": 5}))
        .await;
    let r = app
        .client
        .delete(app.url(&format!("/api/v1/apps/shop/keys/{id}")))
        .bearer_auth(&app.admin_token)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::NO_CONTENT);
    for _ in 0..2 {
        let refused = app.acquire(&key, "orders", 1).await;
        assert_eq!(refused.status(), StatusCode::UNAUTHORIZED);
        let problem: serde_json::Value = refused.json().await.unwrap();
        assert_eq!(
            problem["detail"],
            "this API key was revoked; use its replacement or make a new one"
        );
    }
    let stranger = app.acquire("rk_key_never-made", "orders", 1).await;
    assert_eq!(stranger.status(), StatusCode::UNAUTHORIZED);
    let mut admin = app.sign_in_as_admin().await;
    let shown = page_comes_to_say(
        &admin,
        "/apps/shop",
        "<span class=\"badge denying-some\">2 with a revoked key</span>",
    )
    .await;
    assert!(shown, "{}", admin.get("/apps/shop").await.body);
    assert!(
        admin
            .get("/apps")
            .await
            .has("0 granted, 0 denied, 2 refused with a revoked or expired key (401)")
    );
}
