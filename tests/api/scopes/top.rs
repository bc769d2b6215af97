//! Who is being limited: a policy's top callers by grants and by denials over the last
//! minutes, summed over instances through Redis, never a metric label.

use std::time::Duration;

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_callers_denied_most_are_named() {
    let (app, shop, other) = two_apps(Db::Sqlite).await;
    app.create_policy(
        json!({"name": "login", "owner_app": "shop", "scope": "per_key",
                             "rate": 0.001, "max_permits": 1, "allowed_apps": ["shop", "other"]}),
    )
    .await;
    app.create_policy(json!({"name": "shared", "owner_app": "shop", "rate": 0.001,
                             "max_permits": 3, "allowed_apps": ["shop", "other"]}))
        .await;
    for i in 0..50 {
        status_for(&app, &shop, "login", Some(&format!("user-{i}"))).await;
    }
    for _ in 0..20 {
        status_for(&app, &shop, "login", Some("mallory")).await;
    }
    for _ in 0..5 {
        status_for(&app, &other, "shared", None).await;
    }
    let top = |policy: &str, minutes: i64| {
        let path = format!("/api/v1/policies/{policy}/top?minutes={minutes}");
        let app = &app;
        async move { expect_status(app.get(&path, &app.admin_token).await, StatusCode::OK).await }
    };
    // Counts reach Redis with the next flush, every couple of seconds.
    let named = eventually(Duration::from_secs(15), || async {
        top("login", 5).await["denied"][0]["key"] == "mallory"
    })
    .await;
    assert!(named, "{}", top("login", 5).await);
    let login = top("login", 60).await;
    assert_eq!(login["minutes"], 60);
    assert_eq!(login["denied"][0], json!({"key": "mallory", "count": 19}));
    assert_eq!(
        login["granted"].as_array().unwrap().len(),
        10,
        "the top 10 only"
    );
    // A global policy's callers are applications.
    let shared = eventually(Duration::from_secs(15), || async {
        top("shared", 5).await["denied"] == json!([{"key": "other", "count": 2}])
    })
    .await;
    assert!(shared, "{}", top("shared", 5).await);
    // No key ever becomes a metric label.
    let metrics = app.metrics_text().await;
    assert!(!metrics.contains("mallory") && !metrics.contains("user-1"));
    // Minutes from 1 to 60.
    for bad in [0, 61] {
        let path = format!("/api/v1/policies/login/top?minutes={bad}");
        invalid(app.get(&path, &app.admin_token).await, "minutes").await;
    }
}
