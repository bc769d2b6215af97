//! All or nothing on every algorithm and scope: a call with a denied item takes nothing
//! from any bucket (each bucket reads as before), a granted one takes from each.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_denied_call_leaves_every_bucket_as_it_was_on_every_algorithm_and_scope() {
    let app = spawn_app(Db::Sqlite).await;
    let shop = shop(&app).await;
    // The item that denies: a token bucket of one permit, taken.
    app.create_policy(policy("tight", "token_bucket", "global", 1))
        .await;
    assert_eq!(
        app.acquire(&shop, "tight", 1).await.status(),
        StatusCode::OK
    );
    for scope in ["global", "per_app", "per_key"] {
        for algorithm in ALGORITHMS {
            let name = format!("{scope}.{algorithm}");
            app.create_policy(policy(&name, algorithm, scope, 5)).await;
            let key = key_of(scope);
            // One permit taken first: the bucket is not new.
            let first = acquire_all(&app, &shop, vec![item(&name, 1, key)]).await;
            expect_status(first, StatusCode::OK).await;
            let before = permits_now(&app, &name, scope).await;
            assert!(same(before, 4.0), "{name}: {before}");

            let r = acquire_all(
                &app,
                &shop,
                vec![item(&name, 3, key), item("tight", 1, None)],
            )
            .await;
            assert!(r.headers().get("retry-after").is_some(), "{name}");
            let ratelimit = r.headers()["ratelimit"].to_str().unwrap().to_owned();
            let denied = expect_status(r, StatusCode::TOO_MANY_REQUESTS).await;
            assert_eq!(denied["allowed"], false, "{name}: {denied}");
            let results = denied["results"].as_array().unwrap();
            assert_eq!(results.len(), 2);
            // The first item was granted, and given back: its bucket as it was.
            assert_eq!(results[0]["allowed"], true, "{name}: {denied}");
            assert_eq!(results[0]["remaining"], 4, "{name}: {denied}");
            assert!(
                results[0].get("lease_id").is_none(),
                "{name}: a lease given back"
            );
            assert_eq!(results[1]["allowed"], false, "{name}: {denied}");
            assert!(
                ratelimit.starts_with("\"tight\";r=0"),
                "{name}: {ratelimit}"
            );
            let after = permits_now(&app, &name, scope).await;
            assert!(same(before, after), "{name}: {before} then {after}");

            // Granted: each item's bucket gives.
            let r = acquire_all(&app, &shop, vec![item(&name, 3, key)]).await;
            let granted = expect_status(r, StatusCode::OK).await;
            assert_eq!(granted["allowed"], true);
            assert_eq!(granted["results"][0]["remaining"], 1, "{name}: {granted}");
            let taken = permits_now(&app, &name, scope).await;
            assert!(same(taken, 1.0), "{name}: {taken}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_limits_on_one_caller_hold_together() {
    let app = spawn_app(Db::Sqlite).await;
    let shop = shop(&app).await;
    // A burst limit and a daily limit on the same user.
    app.create_policy(policy("burst", "token_bucket", "per_key", 3))
        .await;
    app.create_policy(policy("daily", "fixed_window", "per_key", 4))
        .await;
    let both = |permits: i64| {
        vec![
            item("burst", permits, Some("u")),
            item("daily", permits, Some("u")),
        ]
    };
    let r = acquire_all(&app, &shop, both(2)).await;
    let ratelimit = r.headers()["ratelimit"].to_str().unwrap().to_owned();
    let granted = expect_status(r, StatusCode::OK).await;
    assert_eq!(granted["results"][0]["remaining"], 1);
    assert_eq!(granted["results"][1]["remaining"], 2);
    // The most restrictive item: the fewest permits left.
    assert!(ratelimit.starts_with("\"burst\";r=1;"), "{ratelimit}");
    // Two more: the burst denies, and the day's count stays at 2.
    let denied = expect_status(
        acquire_all(&app, &shop, both(2)).await,
        StatusCode::TOO_MANY_REQUESTS,
    )
    .await;
    assert_eq!(denied["results"][0]["allowed"], false, "{denied}");
    assert_eq!(denied["results"][1]["remaining"], 2, "{denied}");
    let r = acquire_all(&app, &shop, both(1)).await;
    expect_status(r, StatusCode::OK).await;
    let daily = acquire_all(&app, &shop, vec![item("daily", 0, Some("u"))]).await;
    let daily = expect_status(daily, StatusCode::OK).await;
    assert_eq!(daily["results"][0]["remaining"], 1, "{daily}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_disabled_or_shadow_item_never_denies_the_call() {
    let app = spawn_app(Db::Sqlite).await;
    let shop = shop(&app).await;
    app.create_policy(policy("main", "gcra", "global", 2)).await;
    let mut off = policy("off", "sliding_log", "global", 1);
    off["enabled"] = json!(false);
    app.create_policy(off).await;
    let mut watched = policy("watched", "fixed_window", "per_app", 1);
    watched["mode"] = json!("shadow");
    app.create_policy(watched).await;
    for _ in 0..2 {
        let r = acquire_all(
            &app,
            &shop,
            vec![
                item("main", 1, None),
                item("off", 1, None),
                item("watched", 1, None),
            ],
        )
        .await;
        let body = expect_status(r, StatusCode::OK).await;
        assert_eq!(body["results"][1]["enforced"], false, "{body}");
    }
    let shadow = acquire_all(&app, &shop, vec![item("watched", 1, None)]).await;
    let shadow = expect_status(shadow, StatusCode::OK).await;
    assert_eq!(shadow["results"][0]["shadow_denied"], true, "{shadow}");
    let r = acquire_all(&app, &shop, vec![item("main", 1, None)]).await;
    expect_status(r, StatusCode::TOO_MANY_REQUESTS).await;
}
