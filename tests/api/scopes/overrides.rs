//! Overrides: a premium tenant (per_app) or a particular key (per_key) gets other limits;
//! the others keep the policy's. Every bad override is named.

use super::*;

async fn overrides_per_app_and_per_key(db: Db) {
    let (app, shop, other) = two_apps(db).await;
    app.create_policy(json!({
        "name": "search", "owner_app": "shop", "scope": "per_app", "rate": 0.001,
        "max_permits": 2, "allowed_apps": ["shop", "other"],
        "overrides": [{"match": "other", "max_permits": 5}]
    }))
    .await;
    let first = |key: String| {
        let app = &app;
        async move {
            expect_status(
                acquire_for(app, &key, "search", 1, None).await,
                StatusCode::OK,
            )
            .await
        }
    };
    assert_eq!(first(shop.clone()).await["limit"], 2);
    assert_eq!(
        first(other.clone()).await["limit"],
        5,
        "the premium tenant's capacity"
    );

    app.create_policy(json!({
        "name": "orders", "owner_app": "shop", "scope": "per_key", "rate": 0.001,
        "max_permits": 1, "overrides": [{"match": "vip-7", "max_permits": 3, "rate": 1000}]
    }))
    .await;
    for _ in 0..3 {
        assert_eq!(
            status_for(&app, &shop, "orders", Some("vip-7")).await,
            StatusCode::OK
        );
    }
    assert_eq!(
        status_for(&app, &shop, "orders", Some("user-1")).await,
        StatusCode::OK
    );
    assert_eq!(
        status_for(&app, &shop, "orders", Some("user-1")).await,
        StatusCode::TOO_MANY_REQUESTS
    );
    // More permits than an override allows: 422 with its limit; within it: granted.
    let r = acquire_for(&app, &shop, "orders", 2, Some("user-2")).await;
    invalid(r, "permits").await;

    // Overrides are part of the policy: shown, versioned, audited, replaced whole.
    let policy = expect_status(
        app.send(
            "PATCH",
            "/api/v1/policies/orders",
            &app.admin_token,
            Some(json!({"overrides": [{"match": "vip-8", "max_permits": 2}]})),
        )
        .await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(
        policy["overrides"],
        json!([{"match": "vip-8", "max_permits": 2}])
    );
    assert_eq!(policy["version"], 2);
    let events = app.audit("?policy=orders").await;
    assert_eq!(
        events[0]["before"]["overrides"],
        json!([{"match": "vip-7", "max_permits": 3, "rate": 1000.0}])
    );
    assert_eq!(events[0]["after"]["overrides"], policy["overrides"]);
}
crate::on_every_backend!(per_app_and_per_key, overrides_per_app_and_per_key);

#[tokio::test]
async fn every_bad_override_is_named() {
    let (app, _, _) = two_apps(Db::Sqlite).await;
    let create = |body: Value| {
        let app = &app;
        async move { app.post("/api/v1/policies", &app.admin_token, body).await }
    };
    let keyed = |overrides: Value| {
        json!({"name": "p", "owner_app": "shop", "scope": "per_key", "rate": 1,
               "max_permits": 5, "overrides": overrides})
    };
    // On a global policy.
    invalid(
        create(
            json!({"name": "p", "owner_app": "shop", "rate": 1, "max_permits": 5,
                      "overrides": [{"match": "x", "max_permits": 1}]}),
        )
        .await,
        "overrides",
    )
    .await;
    // Duplicates, no match, a limit that sets nothing, a parameter of another algorithm,
    // an invalid value, a key that cannot be one.
    invalid(
        create(keyed(
            json!([{"match": "a", "max_permits": 1}, {"match": "a", "max_permits": 2}]),
        ))
        .await,
        "overrides[1].match",
    )
    .await;
    invalid(
        create(keyed(json!([{"max_permits": 1}]))).await,
        "overrides[0].match",
    )
    .await;
    invalid(create(keyed(json!([{"match": "a"}]))).await, "overrides[0]").await;
    invalid(
        create(keyed(json!([{"match": "a", "window_ms": 1000}]))).await,
        "overrides[0].window_ms",
    )
    .await;
    invalid(
        create(keyed(json!([{"match": "a", "max_permits": 0}]))).await,
        "overrides[0].max_permits",
    )
    .await;
    invalid(
        create(keyed(json!([{"match": "a\u{7}", "max_permits": 1}]))).await,
        "overrides[0].match",
    )
    .await;
    invalid(
        create(keyed(json!([{"match": "k".repeat(257), "max_permits": 1}]))).await,
        "overrides[0].match",
    )
    .await;
    // Too many.
    let many: Vec<Value> = (0..1001)
        .map(|i| json!({"match": format!("user-{i}"), "max_permits": 1}))
        .collect();
    invalid(create(keyed(json!(many))).await, "overrides").await;
    // A per_app override names an application that exists.
    let r = create(
        json!({"name": "p", "owner_app": "shop", "scope": "per_app", "rate": 1,
                          "max_permits": 5, "overrides": [{"match": "nope", "max_permits": 1}]}),
    )
    .await;
    invalid(r, "overrides[0].match").await;
    // A thousand are fine.
    let thousand: Vec<Value> = (0..1000)
        .map(|i| json!({"match": format!("user-{i}"), "max_permits": 1}))
        .collect();
    expect_status(create(keyed(json!(thousand))).await, StatusCode::CREATED).await;
    // A change of scope gives the overrides again.
    let r = app
        .send(
            "PATCH",
            "/api/v1/policies/p",
            &app.admin_token,
            Some(json!({"scope": "per_app"})),
        )
        .await;
    invalid(r, "overrides").await;
}
