//! Support tools for a keyed policy: one caller's bucket looked up (anyone who may see the
//! policy) and reset to full (owners and admins, audited).

use std::time::Duration;

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_callers_bucket_is_looked_up_and_reset() {
    let (app, shop, _) = two_apps(Db::Sqlite).await;
    app.create_policy(
        json!({"name": "orders", "owner_app": "shop", "scope": "per_key",
                             "rate": 0.001, "max_permits": 5,
                             "overrides": [{"match": "vip", "max_permits": 9}]}),
    )
    .await;
    assert_eq!(
        acquire_for(&app, &shop, "orders", 5, Some("ann"))
            .await
            .status(),
        StatusCode::OK
    );
    let state = |key: &str| {
        let path = format!("/api/v1/policies/orders/state?key={}", percent_encode(key));
        let app = &app;
        async move { expect_status(app.get(&path, &app.admin_token).await, StatusCode::OK).await }
    };
    let ann = state("ann").await;
    assert_eq!(
        (&ann["current_permits"], &ann["max_permits"]),
        (&json!(0.0), &json!(5))
    );
    assert!(ann["full_in_ms"].as_i64().unwrap() > 0);
    let vip = state("vip").await;
    assert_eq!(
        (&vip["current_permits"], &vip["max_permits"]),
        (&json!(9.0), &json!(9))
    );
    assert_eq!(
        state("Zoë {x}").await["full_in_ms"],
        0,
        "a key never seen is full"
    );

    // A viewer may look, not reset.
    let viewer = app.create_user("vic", Some(("shop", "viewer"))).await;
    expect_status(
        app.get("/api/v1/policies/orders/state?key=ann", &viewer)
            .await,
        StatusCode::OK,
    )
    .await;
    let r = app
        .send(
            "DELETE",
            "/api/v1/policies/orders/state?key=ann",
            &viewer,
            None,
        )
        .await;
    expect_problem(r, StatusCode::FORBIDDEN).await;
    assert_eq!(state("ann").await["current_permits"], 0.0);

    // An owner resets: full at once, and the audit log says who and which key.
    let r = app
        .send(
            "DELETE",
            "/api/v1/policies/orders/state?key=ann",
            &app.admin_token,
            None,
        )
        .await;
    expect_status(r, StatusCode::NO_CONTENT).await;
    assert_eq!(state("ann").await["current_permits"], 5.0);
    assert_eq!(
        acquire_for(&app, &shop, "orders", 5, Some("ann"))
            .await
            .status(),
        StatusCode::OK
    );
    let events = app.audit("?policy=orders").await;
    assert_eq!(
        (
            &events[0]["action"],
            &events[0]["actor"],
            &events[0]["after"]
        ),
        (
            &json!("reset_bucket"),
            &json!("admin"),
            &json!({"key": "ann"})
        )
    );

    // Mistakes are named.
    let r = app
        .send(
            "DELETE",
            "/api/v1/policies/orders/state",
            &app.admin_token,
            None,
        )
        .await;
    invalid(r, "key").await;
    invalid(
        app.get("/api/v1/policies/orders/state", &app.admin_token)
            .await,
        "key",
    )
    .await;
    let long = "k".repeat(257);
    invalid(
        app.get(
            &format!("/api/v1/policies/orders/state?key={long}"),
            &app.admin_token,
        )
        .await,
        "key",
    )
    .await;
    // Bytes that are not UTF-8 are no key (not the bucket of U+FFFD): 400, naming it.
    for path in [
        "/api/v1/policies/orders/state?key=%ff",
        "/api/v1/policies/orders/state?key=%E2%9C",
    ] {
        let problem = expect_problem(
            app.get(path, &app.admin_token).await,
            StatusCode::BAD_REQUEST,
        )
        .await;
        assert_eq!(problem["field"], "key", "{path}: {problem}");
    }
    let reset = app
        .client
        .delete(app.url("/api/v1/policies/orders/state?key=%ff"))
        .bearer_auth(&app.admin_token)
        .send()
        .await
        .unwrap();
    assert_eq!(
        expect_problem(reset, StatusCode::BAD_REQUEST).await["field"],
        "key"
    );
    let mut admin = app.sign_in_as_admin().await;
    admin
        .get("/policies/orders/overview?key=%ff")
        .await
        .assert_status(StatusCode::BAD_REQUEST);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_per_app_bucket_is_named_by_the_app() {
    let (app, shop, _) = two_apps(Db::Sqlite).await;
    app.create_policy(
        json!({"name": "search", "owner_app": "shop", "scope": "per_app",
                             "rate": 0.001, "max_permits": 3}),
    )
    .await;
    app.create_policy(json!({"name": "shared", "owner_app": "shop", "rate": 1, "max_permits": 3}))
        .await;
    assert_eq!(
        acquire_for(&app, &shop, "search", 2, None).await.status(),
        StatusCode::OK
    );
    let state = expect_status(
        app.get("/api/v1/policies/search/state?key=shop", &app.admin_token)
            .await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(state["current_permits"], 1.0);
    invalid(
        app.get(
            "/api/v1/policies/search/state?key=Not%20A%20Slug",
            &app.admin_token,
        )
        .await,
        "key",
    )
    .await;
    invalid(
        app.get("/api/v1/policies/shared/state?key=shop", &app.admin_token)
            .await,
        "key",
    )
    .await;
    let r = app
        .send(
            "DELETE",
            "/api/v1/policies/search/state?key=shop",
            &app.admin_token,
            None,
        )
        .await;
    expect_status(r, StatusCode::NO_CONTENT).await;
    assert_eq!(
        acquire_for(&app, &shop, "search", 3, None).await.status(),
        StatusCode::OK
    );
}

/// A reset ends the denials every instance remembers of the policy: the caller is granted
/// at once, not refused until the retry time of its last denial (1,000 s here), on the
/// instance that reset the bucket and on another one that only hears of it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reset_bucket_is_granted_at_once_on_every_instance() {
    let database = fresh_database(Db::Postgres).await;
    let prefix = test_prefix("reset");
    let first = spawn_app_with(settings(&database, &redis_url(), &prefix)).await;
    let second = spawn_app_with(settings(&database, &redis_url(), &prefix)).await;
    first.create_app("shop").await;
    let key = first.create_key("shop").await;
    first
        .create_policy(
            json!({"name": "orders", "owner_app": "shop", "scope": "per_key",
                              "rate": 0.001, "max_permits": 1}),
        )
        .await;
    let learned = eventually(Duration::from_secs(10), || async {
        acquire_for(&second, &key, "orders", 1, Some("ann"))
            .await
            .status()
            == StatusCode::OK
    })
    .await;
    assert!(learned, "the second instance learned of the key and policy");
    let reset = || async {
        let path = "/api/v1/policies/orders/state?key=ann";
        let r = first.send("DELETE", path, &first.admin_token, None).await;
        expect_status(r, StatusCode::NO_CONTENT).await;
    };
    // Both instances deny ann now, and remember it.
    for app in [&first, &second] {
        for _ in 0..2 {
            assert_eq!(
                acquire_for(app, &key, "orders", 1, Some("ann"))
                    .await
                    .status(),
                StatusCode::TOO_MANY_REQUESTS
            );
        }
    }

    reset().await;
    assert_eq!(
        acquire_for(&first, &key, "orders", 1, Some("ann"))
            .await
            .status(),
        StatusCode::OK,
        "the instance that reset the bucket grants at once"
    );
    // That grant took the one permit: reset again, for the second instance to find it.
    reset().await;
    let granted = eventually(Duration::from_secs(10), || async {
        acquire_for(&second, &key, "orders", 1, Some("ann"))
            .await
            .status()
            == StatusCode::OK
    })
    .await;
    assert!(
        granted,
        "the second instance hears of the reset and asks Redis again"
    );
}
