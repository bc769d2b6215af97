//! How a descriptor names its policy and bucket (`generic_key` or `resource` first, the
//! other entries' values the per_key bucket's key), its hits, and what a status says.

use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::rate_limit::Unit;

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn generic_key_and_resource_name_a_policy_and_the_status_tells_its_limit() {
    let (app, key) = shop_over_grpc().await;
    // 0.5 per second is 30 per minute; two permits of burst.
    app.create_policy(json!({"name": "edge.api", "owner_app": "shop", "rate": 0.5,
                             "max_permits": 2}))
        .await;
    for naming in ["generic_key", "resource"] {
        let reply = ask(&app, &key, vec![descriptor(&[(naming, "edge.api")])]).await;
        assert_eq!(overall(&reply), Code::Ok, "{naming}: {reply:?}");
        let [status] = reply.statuses.as_slice() else {
            panic!("one status per descriptor: {reply:?}");
        };
        assert_eq!(code(status), Code::Ok);
        let limit = status.current_limit.as_ref().expect("a policy's limit");
        assert_eq!(limit.name, "edge.api");
        assert_eq!(
            (limit.requests_per_unit, limit.unit),
            (30, Unit::Minute as i32),
            "the rate in the smallest unit where it is whole"
        );
        assert!(header(&reply, "ratelimit-policy") == Some(r#""edge.api";q=2"#));
    }
    // The burst is spent: over the limit, with when to retry.
    let reply = ask(&app, &key, vec![descriptor(&[("generic_key", "edge.api")])]).await;
    assert_eq!(overall(&reply), Code::OverLimit, "{reply:?}");
    let status = &reply.statuses[0];
    assert_eq!(code(status), Code::OverLimit);
    assert_eq!(status.limit_remaining, 0);
    let reset = status.duration_until_reset.expect("when to retry");
    assert!(
        reset.seconds > 0 || reset.nanos > 0,
        "a denial says when to retry: {reset:?}"
    );
    assert!(
        reset.seconds <= 2,
        "one permit comes back within 2 s: {reset:?}"
    );
    let retry_after: i64 = header(&reply, "retry-after")
        .expect("Retry-After when over the limit")
        .parse()
        .unwrap();
    assert!((1..=2).contains(&retry_after), "{retry_after}");
    let ratelimit = header(&reply, "ratelimit").expect("RateLimit");
    assert!(
        ratelimit.starts_with(r#""edge.api";r=0;t="#),
        "as on HTTP: {ratelimit}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_descriptor_that_names_no_policy_is_ok_without_a_limit() {
    let (app, key) = shop_over_grpc().await;
    app.create_policy(json!({"name": "known", "owner_app": "shop", "rate": 1,
                             "max_permits": 5}))
        .await;
    for entries in [
        vec![("generic_key", "no.such.policy")],
        vec![("remote_address", "10.0.0.1")],
        vec![("destination_cluster", "known")],
        vec![("generic_key", "not a policy name!")],
    ] {
        let reply = ask(&app, &key, vec![descriptor(&entries)]).await;
        assert_eq!(overall(&reply), Code::Ok, "{entries:?}");
        assert_eq!(reply.statuses.len(), 1);
        assert_eq!(code(&reply.statuses[0]), Code::Ok);
        assert_eq!(reply.statuses[0].current_limit, None, "{entries:?}");
        assert!(reply.response_headers_to_add.is_empty());
    }
    // Beside a known one: one status each, in order, the known one decided.
    let reply = ask(
        &app,
        &key,
        vec![
            descriptor(&[("remote_address", "10.0.0.1")]),
            descriptor(&[("generic_key", "known")]),
        ],
    )
    .await;
    assert_eq!(reply.statuses.len(), 2);
    assert_eq!(reply.statuses[0].current_limit, None);
    let limit = reply.statuses[1].current_limit.as_ref().expect("decided");
    assert_eq!(limit.name, "known");
    assert_eq!(reply.statuses[1].limit_remaining, 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_entries_after_the_first_are_a_per_key_policys_bucket_key() {
    let (app, key) = shop_over_grpc().await;
    app.create_policy(
        json!({"name": "per.user", "owner_app": "shop", "scope": "per_key",
                             "rate": 0.001, "max_permits": 10}),
    )
    .await;
    let one = descriptor(&[("generic_key", "per.user"), ("user", "ann")]);
    let reply = ask(&app, &key, vec![one]).await;
    assert_eq!(reply.statuses[0].limit_remaining, 9, "{reply:?}");
    assert_eq!(bucket_permits(&app, "per.user", "ann").await, 9.0);
    // Several entries: their values joined with `|`, in order.
    let two = descriptor(&[
        ("resource", "per.user"),
        ("tenant", "acme"),
        ("user", "bob"),
    ]);
    let reply = ask(&app, &key, vec![with_hits(two, 3)]).await;
    assert_eq!(reply.statuses[0].limit_remaining, 7, "{reply:?}");
    assert_eq!(bucket_permits(&app, "per.user", "acme|bob").await, 7.0);
    let pk = header(&reply, "ratelimit").expect("RateLimit");
    // The partition key, base64 of "acme|bob", as HTTP writes it.
    assert!(pk.ends_with(";pk=:YWNtZXxib2I=:"), "{pk}");
    // The other bucket was not touched.
    assert_eq!(bucket_permits(&app, "per.user", "ann").await, 9.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn entries_that_do_not_fit_the_policys_scope_are_invalid_naming_the_descriptor() {
    let (app, key) = shop_over_grpc().await;
    app.create_policy(json!({"name": "global.p", "owner_app": "shop", "rate": 1,
                             "max_permits": 5}))
        .await;
    app.create_policy(
        json!({"name": "keyed.p", "owner_app": "shop", "scope": "per_key",
                             "rate": 1, "max_permits": 5}),
    )
    .await;
    let cases = [
        (
            descriptor(&[("generic_key", "global.p"), ("user", "ann")]),
            "\"global.p\" is not a per_key policy",
        ),
        (
            descriptor(&[("generic_key", "keyed.p")]),
            "\"keyed.p\" is a per_key policy",
        ),
        (
            with_hits(descriptor(&[("generic_key", "global.p")]), 6),
            "hits_addend",
        ),
    ];
    for (bad, says) in cases {
        let refused = should_rate_limit(
            &app,
            Some(&key),
            vec![descriptor(&[("remote_address", "x")]), bad],
            0,
        )
        .await
        .expect_err("invalid");
        assert_eq!(refused.code(), tonic::Code::InvalidArgument, "{refused:?}");
        assert!(
            refused.message().starts_with("descriptors[1]"),
            "names the descriptor: {}",
            refused.message()
        );
        assert!(refused.message().contains(says), "{}", refused.message());
    }
    let refused = should_rate_limit(&app, Some(&key), vec![], 0)
        .await
        .expect_err("no descriptors");
    assert_eq!(refused.code(), tonic::Code::InvalidArgument);
    // Nothing was taken by the refused calls.
    let reply = ask(&app, &key, vec![descriptor(&[("generic_key", "global.p")])]).await;
    assert_eq!(reply.statuses[0].limit_remaining, 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_descriptors_hits_addend_wins_over_the_requests() {
    let (app, key) = shop_over_grpc().await;
    app.create_policy(json!({"name": "hits.p", "owner_app": "shop", "rate": 0.001,
                             "max_permits": 100}))
        .await;
    let named = || descriptor(&[("generic_key", "hits.p")]);
    let remaining = |reply: RateLimitResponse| reply.statuses[0].limit_remaining;
    // The request's hits_addend: 0 (unset) is one hit, as Envoy means it.
    let reply = should_rate_limit(&app, Some(&key), vec![named()], 0)
        .await
        .unwrap();
    assert_eq!(remaining(reply), 99);
    let reply = should_rate_limit(&app, Some(&key), vec![named()], 5)
        .await
        .unwrap();
    assert_eq!(remaining(reply), 94);
    // The descriptor's own wins.
    let reply = should_rate_limit(&app, Some(&key), vec![with_hits(named(), 10)], 5)
        .await
        .unwrap();
    assert_eq!(remaining(reply), 84);
    // Over what the bucket holds: denied, nothing taken.
    let reply = should_rate_limit(&app, Some(&key), vec![with_hits(named(), 90)], 1)
        .await
        .unwrap();
    assert_eq!(overall(&reply), Code::OverLimit);
    assert_eq!(remaining(reply), 84);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_window_of_one_unit_is_told_per_that_unit() {
    let (app, key) = shop_over_grpc().await;
    app.create_policy(json!({"name": "per.minute", "owner_app": "shop",
                             "algorithm": "fixed_window", "window_ms": 60000,
                             "max_permits": 100}))
        .await;
    let reply = ask(
        &app,
        &key,
        vec![descriptor(&[("generic_key", "per.minute")])],
    )
    .await;
    let status = &reply.statuses[0];
    let limit = status.current_limit.as_ref().expect("a limit");
    assert_eq!(
        (limit.requests_per_unit, limit.unit),
        (100, Unit::Minute as i32)
    );
    assert_eq!(status.limit_remaining, 99);
    let reset = status.duration_until_reset.expect("until the window ends");
    assert!(reset.seconds <= 60, "{reset:?}");
}
