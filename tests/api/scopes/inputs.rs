//! The `key` of an acquire: required on a per_key policy, refused on the others, 1 to 256
//! bytes of UTF-8 without control characters; every mistake is named.

use super::*;

#[tokio::test]
async fn every_bad_key_is_named() {
    let (app, shop, _) = two_apps(Db::Sqlite).await;
    app.create_policy(
        json!({"name": "by.key", "owner_app": "shop", "scope": "per_key",
                             "rate": 1, "max_permits": 5}),
    )
    .await;
    app.create_policy(
        json!({"name": "by.app", "owner_app": "shop", "scope": "per_app",
                             "rate": 1, "max_permits": 5}),
    )
    .await;
    app.create_policy(json!({"name": "shared", "owner_app": "shop", "rate": 1, "max_permits": 5}))
        .await;

    invalid(acquire_for(&app, &shop, "by.key", 1, None).await, "key").await;
    invalid(
        acquire_for(&app, &shop, "by.app", 1, Some("x")).await,
        "key",
    )
    .await;
    invalid(
        acquire_for(&app, &shop, "shared", 1, Some("x")).await,
        "key",
    )
    .await;
    let (long, wide) = ("k".repeat(257), "é".repeat(129));
    for bad in ["", "tab\there", long.as_str(), wide.as_str()] {
        invalid(
            acquire_for(&app, &shop, "by.key", 1, Some(bad)).await,
            "key",
        )
        .await;
    }
    // Not a string: the body does not fit (400), the field named.
    let r = app
        .post(
            "/v1/acquire",
            &shop,
            json!({"resource": "by.key", "key": 42}),
        )
        .await;
    assert_eq!(
        expect_problem(r, StatusCode::BAD_REQUEST).await["field"],
        "key"
    );
    // Any other text is a key, braces, slashes and all.
    let longest = "k".repeat(256);
    for good in ["user-42", "Zoë {x} / 10.0.0.1", longest.as_str()] {
        assert_eq!(
            status_for(&app, &shop, "by.key", Some(good)).await,
            StatusCode::OK,
            "{good}"
        );
    }
    // An app not allowed is refused before any bucket is touched.
    let outsider = app.create_key("other").await;
    let r = acquire_for(&app, &outsider, "by.key", 1, Some("user-42")).await;
    expect_problem(r, StatusCode::FORBIDDEN).await;
}
