//! envoyproxy/ratelimit's Examples 3 and 7, as `import-envoy` converts them and a gateway
//! asks: a limit of 0 is a blocked policy (`OVER_LIMIT`, a `current_limit` of 0 per unit,
//! also while Redis is in no state to answer), and a pattern that `replaces` a policy
//! leaves that policy's descriptor unlimited in the same request, and only there.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_limit_of_zero_is_over_the_limit_before_any_bucket() {
    let (app, key) = shop_over_grpc().await;
    app.create_policy(json!({"name": "per-ip", "owner_app": "shop", "rate": 10.0,
        "max_permits": 10, "scope": "per_key",
        "descriptors": [{"domain": "edge", "entries": ["remote_address"]}]}))
        .await;
    app.create_policy(
        json!({"name": "blocked-ip", "owner_app": "shop", "algorithm": "fixed_window",
        "max_permits": 1, "window_ms": 1000, "mode": "block",
        "descriptors": [{"domain": "edge", "entries": ["remote_address=50.0.0.5"]}]}),
    )
    .await;

    let other = ask(
        &app,
        &key,
        vec![descriptor(&[("remote_address", "50.0.0.1")])],
    )
    .await;
    assert_eq!(overall(&other), Code::Ok, "{other:?}");
    assert_eq!(other.statuses[0].limit_remaining, 9);

    let blocked = ask(
        &app,
        &key,
        vec![descriptor(&[("remote_address", "50.0.0.5")])],
    )
    .await;
    assert_eq!(overall(&blocked), Code::OverLimit, "{blocked:?}");
    let limit = blocked.statuses[0].current_limit.as_ref().expect("a limit");
    assert_eq!(
        (limit.name.as_str(), limit.requests_per_unit),
        ("blocked-ip", 0)
    );
    assert_eq!(header(&blocked, "retry-after"), Some("1"));

    // With another descriptor of the same call: all or nothing, the other bucket untouched.
    let both = ask(
        &app,
        &key,
        vec![
            descriptor(&[("remote_address", "50.0.0.1")]),
            descriptor(&[("remote_address", "50.0.0.5")]),
        ],
    )
    .await;
    assert_eq!(overall(&both), Code::OverLimit, "{both:?}");
    assert_eq!(code(&both.statuses[0]), Code::Ok);
    assert_eq!(code(&both.statuses[1]), Code::OverLimit);
    assert_eq!(
        bucket_permits(&app, "per-ip", "50.0.0.1").await.floor(),
        9.0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replacing_pattern_lifts_the_replaced_limit_in_its_request_only() {
    let (app, key) = shop_over_grpc().await;
    app.create_policy(
        json!({"name": "specific_limit", "owner_app": "shop", "rate": 0.001,
        "max_permits": 1,
        "descriptors": [{"domain": "edge", "entries": ["key_1=value_1", "user=bkthomps"]}]}),
    )
    .await;
    let replacing = app
        .create_policy(
            json!({"name": "the-other", "owner_app": "shop", "rate": 0.001,
            "max_permits": 10,
            "descriptors": [{"domain": "edge", "entries": ["key_2=value_2", "user=bkthomps"],
                             "replaces": ["specific_limit"]}]}),
        )
        .await;
    assert_eq!(
        replacing["descriptors"][0]["replaces"],
        json!(["specific_limit"])
    );
    let first = || descriptor(&[("key_1", "value_1"), ("user", "bkthomps")]);
    let second = || descriptor(&[("key_2", "value_2"), ("user", "bkthomps")]);

    // Both in one request, three times: specific_limit (capacity 1) is not applied.
    for round in 0..3 {
        let reply = ask(&app, &key, vec![first(), second()]).await;
        assert_eq!(overall(&reply), Code::Ok, "round {round}: {reply:?}");
        assert!(
            reply.statuses[0].current_limit.is_none(),
            "replaced: no limit, as for an unknown descriptor: {reply:?}"
        );
        assert_eq!(reply.statuses[1].limit_remaining, 9 - round);
    }
    // Alone, specific_limit applies, with its bucket untouched by the calls above.
    let alone = ask(&app, &key, vec![first()]).await;
    assert_eq!(overall(&alone), Code::Ok, "{alone:?}");
    assert_eq!(
        alone.statuses[0].current_limit.as_ref().unwrap().name,
        "specific_limit"
    );
    let again = ask(&app, &key, vec![first()]).await;
    assert_eq!(overall(&again), Code::OverLimit, "{again:?}");

    // A replaced name that no policy has is fine (it may come later), a malformed one not.
    let bad = app
        .post(
            "/api/v1/policies",
            &app.admin_token,
            json!({"name": "bad", "owner_app": "shop", "rate": 1.0, "max_permits": 1,
                   "descriptors": [{"entries": ["k=v"], "replaces": ["no such", "later"]}]}),
        )
        .await;
    let problem = expect_problem(bad, StatusCode::UNPROCESSABLE_ENTITY).await;
    assert_eq!(problem["field"], "descriptors[0].replaces[0]", "{problem}");
}
