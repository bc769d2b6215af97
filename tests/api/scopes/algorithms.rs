//! Every algorithm works in every keyed scope: two callers, each with a bucket of two
//! permits, the third acquire of one caller denied while the other caller is granted; a
//! concurrency lease of a key given back with that key.

use super::*;

/// A policy of `algorithm` with capacity 2, slow enough not to refill during the test.
fn body(name: &str, algorithm: &str, scope: &str) -> Value {
    let mut body = json!({"name": name, "owner_app": "shop", "algorithm": algorithm,
                          "scope": scope, "max_permits": 2, "allowed_apps": ["shop", "other"]});
    match algorithm {
        "token_bucket" | "gcra" => body["rate"] = json!(0.001),
        "concurrency" => body["lease_ttl_ms"] = json!(3_600_000),
        _ => body["window_ms"] = json!(86_400_000),
    }
    body
}

const ALGORITHMS: [&str; 6] = [
    "token_bucket",
    "fixed_window",
    "sliding_log",
    "sliding_window",
    "concurrency",
    "gcra",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_algorithm_keeps_a_bucket_per_key_and_per_app() {
    let (app, shop, other) = two_apps(Db::Sqlite).await;
    for algorithm in ALGORITHMS {
        let name = format!("k.{algorithm}");
        app.create_policy(body(&name, algorithm, "per_key")).await;
        for _ in 0..2 {
            assert_eq!(
                status_for(&app, &shop, &name, Some("ann")).await,
                StatusCode::OK,
                "{name}"
            );
        }
        let r = acquire_for(&app, &other, &name, 1, Some("ann")).await;
        let retry = r.headers().get("retry-after").is_some();
        let denied = expect_status(r, StatusCode::TOO_MANY_REQUESTS).await;
        assert!(
            retry && denied["retry_after_ms"].as_i64().unwrap() > 0,
            "{name}: {denied}"
        );
        assert_eq!(
            status_for(&app, &shop, &name, Some("bob")).await,
            StatusCode::OK,
            "{name}"
        );

        let name = format!("a.{algorithm}");
        app.create_policy(body(&name, algorithm, "per_app")).await;
        for _ in 0..2 {
            assert_eq!(
                status_for(&app, &shop, &name, None).await,
                StatusCode::OK,
                "{name}"
            );
        }
        assert_eq!(
            status_for(&app, &shop, &name, None).await,
            StatusCode::TOO_MANY_REQUESTS,
            "{name}"
        );
        assert_eq!(
            status_for(&app, &other, &name, None).await,
            StatusCode::OK,
            "{name}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_keys_lease_is_given_back_with_its_key() {
    let (app, shop, _) = two_apps(Db::Sqlite).await;
    app.create_policy(body("jobs", "concurrency", "per_key"))
        .await;
    let granted = expect_status(
        acquire_for(&app, &shop, "jobs", 2, Some("ann")).await,
        StatusCode::OK,
    )
    .await;
    let lease = granted["lease_id"].as_str().unwrap().to_owned();
    assert_eq!(
        status_for(&app, &shop, "jobs", Some("ann")).await,
        StatusCode::TOO_MANY_REQUESTS
    );
    // Another key's bucket holds no such lease.
    let release = |key: Option<&str>| {
        let mut body = json!({"resource": "jobs", "lease_id": lease});
        if let Some(key) = key {
            body["key"] = json!(key);
        }
        app.post("/v1/release", &shop, body)
    };
    expect_problem(release(Some("bob")).await, StatusCode::NOT_FOUND).await;
    invalid(release(None).await, "key").await;
    let released = expect_status(release(Some("ann")).await, StatusCode::OK).await;
    assert_eq!(
        (&released["permits"], &released["remaining"]),
        (&json!(2), &json!(2))
    );
    assert_eq!(
        status_for(&app, &shop, "jobs", Some("ann")).await,
        StatusCode::OK
    );
}
