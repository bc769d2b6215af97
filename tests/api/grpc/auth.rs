//! The caller is an application, by the API key in the metadata: missing, unknown,
//! revoked and expired keys are UNAUTHENTICATED, an application the policy does not allow
//! is PERMISSION_DENIED naming the policy.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_bad_revoked_or_expired_key_is_unauthenticated() {
    let (app, key) = shop_over_grpc().await;
    app.create_policy(json!({"name": "auth.p", "owner_app": "shop", "rate": 1,
                             "max_permits": 5}))
        .await;
    let named = || vec![descriptor(&[("generic_key", "auth.p")])];
    assert_eq!(overall(&ask(&app, &key, named()).await), Code::Ok);

    let missing = should_rate_limit(&app, None, named(), 0).await.unwrap_err();
    assert_eq!(missing.code(), tonic::Code::Unauthenticated);
    assert!(
        missing.message().contains("authorization: Bearer"),
        "{missing:?}"
    );
    let bad = should_rate_limit(&app, Some("rk_key_nope"), named(), 0)
        .await
        .unwrap_err();
    assert_eq!(bad.code(), tonic::Code::Unauthenticated);

    // Revoked: stops working at once.
    let made = expect_status(
        app.post(
            "/api/v1/apps/shop/keys",
            &app.admin_token,
            json!({"label": "gone"}),
        )
        .await,
        StatusCode::CREATED,
    )
    .await;
    let revoked = made["key"].as_str().unwrap();
    assert_eq!(overall(&ask(&app, revoked, named()).await), Code::Ok);
    let path = format!("/api/v1/apps/shop/keys/{}", made["id"].as_str().unwrap());
    expect_status(
        app.send("DELETE", &path, &app.admin_token, None).await,
        StatusCode::NO_CONTENT,
    )
    .await;
    let refused = should_rate_limit(&app, Some(revoked), named(), 0)
        .await
        .unwrap_err();
    assert_eq!(refused.code(), tonic::Code::Unauthenticated);
    assert!(refused.message().contains("revoked"), "{refused:?}");

    // Expired: rotated with the old key ending now; refused saying it expired.
    let made = expect_status(
        app.post(
            "/api/v1/apps/shop/keys",
            &app.admin_token,
            json!({"label": "old"}),
        )
        .await,
        StatusCode::CREATED,
    )
    .await;
    let old = made["key"].as_str().unwrap();
    let path = format!(
        "/api/v1/apps/shop/keys/{}/rotate",
        made["id"].as_str().unwrap()
    );
    expect_status(
        app.post(
            &path,
            &app.admin_token,
            json!({"old_key_expires_at": "now"}),
        )
        .await,
        StatusCode::CREATED,
    )
    .await;
    let refused = should_rate_limit(&app, Some(old), named(), 0)
        .await
        .unwrap_err();
    assert_eq!(refused.code(), tonic::Code::Unauthenticated);
    assert!(refused.message().contains("expired at"), "{refused:?}");
    // The shop's first key still works.
    assert_eq!(overall(&ask(&app, &key, named()).await), Code::Ok);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_application_the_policy_does_not_allow_is_permission_denied() {
    let (app, key) = shop_over_grpc().await;
    app.create_app("other").await;
    let other = app.create_key("other").await;
    app.create_policy(json!({"name": "shop.only", "owner_app": "shop", "rate": 1,
                             "max_permits": 5}))
        .await;
    let named = || vec![descriptor(&[("generic_key", "shop.only")])];
    let refused = should_rate_limit(&app, Some(&other), named(), 0)
        .await
        .unwrap_err();
    assert_eq!(refused.code(), tonic::Code::PermissionDenied, "{refused:?}");
    assert!(refused.message().contains("\"other\""), "{refused:?}");
    assert!(refused.message().contains("\"shop.only\""), "{refused:?}");
    // Allowed once listed, as on HTTP.
    app.edit_policy("shop.only", json!({"allowed_apps": ["shop", "other"]}))
        .await;
    let reply = ask(&app, &other, named()).await;
    assert_eq!(overall(&reply), Code::Ok);
    assert_eq!(reply.statuses[0].limit_remaining, 4);
    assert_eq!(
        ask(&app, &key, named()).await.statuses[0].limit_remaining,
        3
    );
}
