//! `POST /v1/refund`: permits given back, never above a bucket's capacity nor a window's
//! count below 0; concurrency policies keep `release`; the errors of an acquire.

use super::*;

async fn refund(
    app: &TestApp,
    api_key: &str,
    resource: &str,
    permits: i64,
    key: Option<&str>,
) -> Response {
    let mut body = json!({"resource": resource, "permits": permits});
    if let Some(key) = key {
        body["key"] = json!(key);
    }
    app.post("/v1/refund", api_key, body).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refund_gives_back_at_most_what_fits_on_every_algorithm() {
    let app = spawn_app(Db::Sqlite).await;
    let shop = shop(&app).await;
    for algorithm in ALGORITHMS.into_iter().filter(|a| *a != "concurrency") {
        for scope in ["global", "per_app", "per_key"] {
            let name = format!("{scope}.{algorithm}");
            app.create_policy(policy(&name, algorithm, scope, 5)).await;
            let key = key_of(scope);
            let r = acquire_all(&app, &shop, vec![item(&name, 4, key)]).await;
            expect_status(r, StatusCode::OK).await;
            // Two of the four back: one permit left becomes three.
            let r = refund(&app, &shop, &name, 2, key).await;
            let body = expect_status(r, StatusCode::OK).await;
            assert_eq!(
                (body["allowed"].clone(), body["remaining"].clone()),
                (json!(true), json!(3)),
                "{name}: {body}"
            );
            assert!(same(permits_now(&app, &name, scope).await, 3.0), "{name}");
            // Far more than was taken: full, never above the capacity (nor a count below 0).
            let r = refund(&app, &shop, &name, 1_000, key).await;
            let body = expect_status(r, StatusCode::OK).await;
            assert_eq!(body["remaining"], 5, "{name}: {body}");
            assert!(same(permits_now(&app, &name, scope).await, 5.0), "{name}");
            // And the bucket gives exactly its capacity again.
            let r = acquire_all(&app, &shop, vec![item(&name, 5, key)]).await;
            expect_status(r, StatusCode::OK).await;
            let r = acquire_all(&app, &shop, vec![item(&name, 1, key)]).await;
            expect_status(r, StatusCode::TOO_MANY_REQUESTS).await;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refund_ends_the_callers_remembered_denial() {
    let app = spawn_app(Db::Sqlite).await;
    let shop = shop(&app).await;
    app.create_policy(policy("p", "token_bucket", "global", 1))
        .await;
    expect_status(app.acquire(&shop, "p", 1).await, StatusCode::OK).await;
    // Denied twice: the second answered from this instance's denial cache.
    for _ in 0..2 {
        expect_status(
            app.acquire(&shop, "p", 1).await,
            StatusCode::TOO_MANY_REQUESTS,
        )
        .await;
    }
    expect_status(refund(&app, &shop, "p", 1, None).await, StatusCode::OK).await;
    expect_status(app.acquire(&shop, "p", 1).await, StatusCode::OK).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refund_is_refused_as_an_acquire_would_be() {
    let app = spawn_app(Db::Sqlite).await;
    let shop = shop(&app).await;
    app.create_app("other").await;
    let other = app.create_key("other").await;
    app.create_policy(policy("leases", "concurrency", "global", 2))
        .await;
    app.create_policy(policy("keyed", "gcra", "per_key", 2))
        .await;
    let problem = expect_problem(
        refund(&app, &shop, "leases", 1, None).await,
        StatusCode::UNPROCESSABLE_ENTITY,
    )
    .await;
    assert!(
        problem["detail"].as_str().unwrap().contains("/v1/release"),
        "{problem}"
    );
    expect_problem(
        refund(&app, &shop, "nothing", 1, None).await,
        StatusCode::NOT_FOUND,
    )
    .await;
    expect_problem(
        refund(&app, &other, "keyed", 1, Some("ann")).await,
        StatusCode::FORBIDDEN,
    )
    .await;
    let problem = expect_problem(
        refund(&app, &shop, "keyed", 1, None).await,
        StatusCode::UNPROCESSABLE_ENTITY,
    )
    .await;
    assert_eq!(problem["field"], "key");
    for permits in [0, -1, 1_000_000_001] {
        let problem = expect_problem(
            refund(&app, &shop, "keyed", permits, Some("ann")).await,
            StatusCode::UNPROCESSABLE_ENTITY,
        )
        .await;
        assert_eq!(problem["field"], "permits", "{permits}");
    }
    let r = app
        .post(
            "/v1/refund",
            &shop,
            json!({"resource": "keyed", "key": "ann"}),
        )
        .await;
    assert_eq!(
        expect_problem(r, StatusCode::UNPROCESSABLE_ENTITY).await["field"],
        "permits"
    );
    let r = app
        .post(
            "/v1/refund",
            "no-such-key",
            json!({"resource": "keyed", "permits": 1}),
        )
        .await;
    expect_problem(r, StatusCode::UNAUTHORIZED).await;
}
