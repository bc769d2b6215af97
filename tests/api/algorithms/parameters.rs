//! Each algorithm with exactly its own parameters, through the admin API.

use reqwest::StatusCode;
use serde_json::json;

use super::{
    ALGORITHMS, DAY_MS, admin_reads, expect_invalid, field_names, own_parameter, patch,
    policy_fields, policy_path, three_permits, value_of,
};
use crate::helpers::*;
use crate::on_every_backend;

/// The parameters an algorithm does not use.
fn foreign_parameters(algorithm: &str) -> Vec<&'static str> {
    ["rate", "window_ms", "lease_ttl_ms"]
        .into_iter()
        .filter(|p| *p != own_parameter(algorithm))
        .collect()
}

async fn a_policy_of_each_algorithm_round_trips(db: Db) {
    let app = spawn_app(db).await;
    app.create_app("shop").await;
    let bodies = [
        json!({"name": "p.token_bucket", "owner_app": "shop", "algorithm": "token_bucket",
               "rate": 0.2, "max_permits": 5}),
        json!({"name": "p.fixed_window", "owner_app": "shop", "algorithm": "fixed_window",
               "window_ms": 60_000, "max_permits": 5}),
        json!({"name": "p.sliding_log", "owner_app": "shop", "algorithm": "sliding_log",
               "window_ms": 1, "max_permits": 10}),
        json!({"name": "p.sliding_window", "owner_app": "shop", "algorithm": "sliding_window",
               "window_ms": DAY_MS, "max_permits": 1000}),
        json!({"name": "p.concurrency", "owner_app": "shop", "algorithm": "concurrency",
               "lease_ttl_ms": 30_000, "max_permits": 8}),
        json!({"name": "p.gcra", "owner_app": "shop", "algorithm": "gcra",
               "rate": 2.5, "max_permits": 4}),
    ];
    let mut created = Vec::new();
    for body in bodies {
        let algorithm = body["algorithm"].as_str().unwrap();
        let name = body["name"].as_str().unwrap();
        let policy = app.create_policy(body.clone()).await;
        assert_eq!(
            field_names(&policy),
            policy_fields(algorithm),
            "{algorithm}: exactly its own fields: {policy}"
        );
        for (field, value) in body.as_object().unwrap() {
            assert_eq!(policy[field], *value, "{algorithm}: {field} as given");
        }
        assert_eq!(policy["version"], 1);
        assert_eq!(policy["allowed_apps"], json!(["shop"]));

        // Read back from the store: the same.
        assert_eq!(
            admin_reads(&app, &policy_path(name)).await,
            policy,
            "{algorithm}"
        );
        // Sent again as it is, it changes nothing: the stored row parses back to the
        // very same policy (a float rate included).
        let mut again = body.clone();
        again.as_object_mut().unwrap().remove("name");
        again.as_object_mut().unwrap().remove("owner_app");
        let same = expect_status(patch(&app, name, again).await, StatusCode::OK).await;
        assert_eq!(same, policy, "{algorithm}: a change to the same values");

        // Redis holds the same configuration.
        let hash = app.policy_key(name);
        // The default algorithm is not stored (a missing field means token_bucket).
        let stored = app.redis_field(&hash, "algorithm").await;
        assert_eq!(
            stored.as_deref().unwrap_or("token_bucket"),
            algorithm,
            "{algorithm}"
        );
        assert_eq!(stored.is_none(), algorithm == "token_bucket");
        let parameter = own_parameter(algorithm);
        if parameter != "rate" {
            assert_eq!(
                app.redis_field(&hash, parameter).await,
                Some(body[parameter].to_string()),
                "{algorithm}: {parameter} in redis"
            );
        }
        created.push(policy);
    }
    created.sort_by_key(|p| p["name"].as_str().unwrap().to_owned());
    let mut listed = admin_reads(&app, "/api/v1/policies?app=shop")
        .await
        .as_array()
        .unwrap()
        .clone();
    listed.sort_by_key(|p| p["name"].as_str().unwrap().to_owned());
    assert_eq!(listed, created);
}
on_every_backend!(
    each_algorithm_round_trips,
    a_policy_of_each_algorithm_round_trips
);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_algorithm_refuses_the_parameters_it_does_not_use() {
    let app = spawn_app(Db::Sqlite).await;
    app.create_app("shop").await;
    for algorithm in ALGORITHMS {
        for foreign in foreign_parameters(algorithm) {
            let mut body = three_permits("p", algorithm);
            body[foreign] = value_of(foreign);
            let r = app
                .post("/api/v1/policies", &app.admin_token, body.clone())
                .await;
            let problem = expect_invalid(r, foreign, &format!("is not used by {algorithm}")).await;
            assert_eq!(
                problem["errors"].as_array().unwrap().len(),
                1,
                "only the foreign parameter is wrong: {body} -> {problem}"
            );
        }
    }
    assert_eq!(admin_reads(&app, "/api/v1/policies").await, json!([]));
    assert!(!app.redis_exists(&app.policy_key("p")).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_algorithm_requires_its_parameter() {
    let app = spawn_app(Db::Sqlite).await;
    app.create_app("shop").await;
    for algorithm in ALGORITHMS {
        let parameter = own_parameter(algorithm);
        let mut body = three_permits("p", algorithm);
        body.as_object_mut().unwrap().remove(parameter);
        let r = app.post("/api/v1/policies", &app.admin_token, body).await;
        expect_invalid(r, parameter, &format!("is required for {algorithm}")).await;
    }
    // No algorithm named: a token bucket, which needs a rate.
    let r = app
        .post(
            "/api/v1/policies",
            &app.admin_token,
            json!({"name": "p", "owner_app": "shop", "max_permits": 3}),
        )
        .await;
    expect_invalid(r, "rate", "is required for token_bucket").await;

    // A lease lifetime where a window is wanted: both mistakes are named.
    let r = app
        .post(
            "/api/v1/policies",
            &app.admin_token,
            json!({"name": "p", "owner_app": "shop", "algorithm": "sliding_log",
                   "max_permits": 3, "lease_ttl_ms": 1000}),
        )
        .await;
    let problem = expect_invalid(r, "window_ms", "is required for sliding_log").await;
    assert!(
        problem["errors"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["field"] == "lease_ttl_ms"
                && e["message"]
                    .as_str()
                    .unwrap()
                    .contains("is not used by sliding_log")),
        "{problem}"
    );
    assert_eq!(admin_reads(&app, "/api/v1/policies").await, json!([]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn windows_and_lease_lifetimes_run_from_a_millisecond_to_a_day() {
    let app = spawn_app(Db::Sqlite).await;
    app.create_app("shop").await;
    let cases = [
        ("fixed_window", "window_ms"),
        ("sliding_log", "window_ms"),
        ("sliding_window", "window_ms"),
        ("concurrency", "lease_ttl_ms"),
    ];
    for (algorithm, parameter) in cases {
        let before = admin_reads(&app, "/api/v1/policies").await;
        for bad in [json!(0), json!(-1), json!(-60_000), json!(DAY_MS + 1)] {
            let mut body = three_permits("p", algorithm);
            body[parameter] = bad.clone();
            let r = app.post("/api/v1/policies", &app.admin_token, body).await;
            expect_invalid(r, parameter, "from 1 to 86400000").await;
        }
        // Not a whole number at all: refused naming the field too.
        for bad in [json!(1.5), json!("60000"), json!(1e30)] {
            let mut body = three_permits("p", algorithm);
            body[parameter] = bad.clone();
            let r = app.post("/api/v1/policies", &app.admin_token, body).await;
            expect_invalid(r, parameter, "").await;
        }
        assert_eq!(
            admin_reads(&app, "/api/v1/policies").await,
            before,
            "nothing refused was created"
        );

        // The bounds themselves are fine.
        for (suffix, good) in [("min", 1), ("max", DAY_MS)] {
            let name = format!("{algorithm}.{suffix}");
            let mut body = three_permits(&name, algorithm);
            body[parameter] = json!(good);
            let policy = app.create_policy(body).await;
            assert_eq!(policy[parameter], good);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_algorithm_is_refused_listing_the_choices() {
    let app = spawn_app(Db::Sqlite).await;
    app.create_app("shop").await;
    for bad in [
        json!("leaky_bucket"),
        json!("Token_Bucket"),
        json!("fixed window"),
        json!(""),
    ] {
        let r = app
            .post(
                "/api/v1/policies",
                &app.admin_token,
                json!({"name": "p", "owner_app": "shop", "algorithm": bad,
                       "rate": 1, "max_permits": 3}),
            )
            .await;
        let problem = expect_invalid(r, "algorithm", "must be one of").await;
        let message = problem["errors"][0]["message"].as_str().unwrap();
        for choice in ALGORITHMS {
            assert!(message.contains(choice), "{choice} listed: {message}");
        }
    }
    // Not even a string.
    let r = app
        .post(
            "/api/v1/policies",
            &app.admin_token,
            json!({"name": "p", "owner_app": "shop", "algorithm": 3,
                   "rate": 1, "max_permits": 3}),
        )
        .await;
    expect_invalid(r, "algorithm", "").await;
    assert_eq!(admin_reads(&app, "/api/v1/policies").await, json!([]));
}
