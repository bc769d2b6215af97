//! `POST /v1/acquire` over HTTP: the reply, the headers and every error status.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use reqwest::StatusCode;
use serde_json::json;

use secrecy::ExposeSecret;

use crate::helpers::*;
use crate::on_every_backend;

async fn grants_until_empty_then_denies_with_headers(db: Db) {
    let app = spawn_app(db).await;
    // One permit per 100 s, capacity 3: no refill between the requests, however slow.
    let key = app.shop_with_policy("orders.create", 0.01, 3).await;

    for remaining in [2, 1, 0] {
        let r = app.acquire(&key, "orders.create", 1).await;
        assert_eq!(r.headers()["ratelimit-policy"], "\"orders.create\";q=3");
        let ratelimit = r.headers()["ratelimit"].to_str().unwrap().to_owned();
        assert!(r.headers().get("retry-after").is_none());
        let body = expect_status(r, StatusCode::OK).await;
        assert_eq!(body["allowed"], true);
        assert_eq!(body["remaining"], remaining);
        assert_eq!(body["limit"], 3);
        assert_eq!(body["retry_after_ms"], 0);
        assert_eq!(body["policy_version"], 1);
        assert!(body["reset_after_ms"].as_i64().unwrap() > 0);
        assert!(ratelimit.starts_with(&format!("\"orders.create\";r={remaining};t=")));
    }

    let r = app.acquire(&key, "orders.create", 1).await;
    let retry_after = r.headers()["retry-after"].to_str().unwrap().to_owned();
    let ratelimit = r.headers()["ratelimit"].to_str().unwrap().to_owned();
    let body = expect_status(r, StatusCode::TOO_MANY_REQUESTS).await;
    assert_eq!(body["allowed"], false);
    assert_eq!(body["remaining"], 0);
    let retry = body["retry_after_ms"].as_i64().unwrap();
    assert!((1..=100_000).contains(&retry), "retry_after_ms {retry}");
    let seconds = (retry + 999) / 1000;
    assert_eq!(
        retry_after,
        seconds.to_string(),
        "whole seconds, rounded up"
    );
    assert_eq!(ratelimit, format!("\"orders.create\";r=0;t={seconds}"));
    assert!(body.get("enforced").is_none());
}
on_every_backend!(
    grants_then_denies,
    grants_until_empty_then_denies_with_headers
);

async fn every_error_has_its_status(db: Db) {
    let app = spawn_app(db).await;
    let key = app.shop_with_policy("orders.create", 1.0, 3).await;
    app.create_app("other").await;
    let other_key = app.create_key("other").await;

    // 401: no key, an unknown key, a key of the wrong scheme.
    let r = app
        .client
        .post(app.url("/v1/acquire"))
        .json(&json!({"resource": "orders.create"}))
        .send()
        .await
        .unwrap();
    expect_problem(r, StatusCode::UNAUTHORIZED).await;
    expect_problem(
        app.acquire("rk_key_nope", "orders.create", 1).await,
        StatusCode::UNAUTHORIZED,
    )
    .await;
    let r = app
        .client
        .post(app.url("/v1/acquire"))
        .header("authorization", format!("Basic {key}"))
        .json(&json!({"resource": "orders.create"}))
        .send()
        .await
        .unwrap();
    expect_problem(r, StatusCode::UNAUTHORIZED).await;

    // 403: an application not in allowed_apps.
    let body = expect_problem(
        app.acquire(&other_key, "orders.create", 1).await,
        StatusCode::FORBIDDEN,
    )
    .await;
    assert!(body["detail"].as_str().unwrap().contains("other"));

    // 404: no such policy.
    expect_problem(
        app.acquire(&key, "orders.none", 1).await,
        StatusCode::NOT_FOUND,
    )
    .await;

    // 422: permits below 0 (0 is a check) or above the capacity, naming the field.
    for permits in [-1, 4] {
        let body = expect_problem(
            app.acquire(&key, "orders.create", permits).await,
            StatusCode::UNPROCESSABLE_ENTITY,
        )
        .await;
        assert_eq!(body["field"], "permits");
    }

    // 400: not JSON, no resource, a resource that cannot be a policy name.
    let r = app
        .client
        .post(app.url("/v1/acquire"))
        .bearer_auth(&key)
        .body("{not json")
        .send()
        .await
        .unwrap();
    expect_problem(r, StatusCode::BAD_REQUEST).await;
    let r = app.post("/v1/acquire", &key, json!({"permits": 1})).await;
    assert_eq!(
        expect_problem(r, StatusCode::BAD_REQUEST).await["field"],
        "resource"
    );
    let r = app
        .post("/v1/acquire", &key, json!({"resource": "a b"}))
        .await;
    assert_eq!(
        expect_problem(r, StatusCode::BAD_REQUEST).await["field"],
        "resource"
    );
    // A wrong type is named too, as a body that does not fit (400; 422 is only for a
    // permits count out of range).
    let r = app
        .post(
            "/v1/acquire",
            &key,
            json!({"resource": "orders.create", "permits": "2"}),
        )
        .await;
    assert_eq!(
        expect_problem(r, StatusCode::BAD_REQUEST).await["field"],
        "permits"
    );

    // None of the failures above took a permit: the whole capacity is still there.
    let body = expect_status(app.acquire(&key, "orders.create", 3).await, StatusCode::OK).await;
    assert_eq!(body["remaining"], 0);
}
on_every_backend!(errors, every_error_has_its_status);

#[tokio::test]
async fn permits_default_to_one_and_allowed_apps_may_share_a_policy() {
    let app = spawn_app(Db::Sqlite).await;
    app.create_app("shop").await;
    app.create_app("my-app").await;
    let shop = app.create_key("shop").await;
    let mine = app.create_key("my-app").await;
    app.create_policy(json!({
        "name": "search", "owner_app": "shop", "rate": 0.001, "max_permits": 2,
        "allowed_apps": ["shop", "my-app"]
    }))
    .await;
    let r = app
        .post("/v1/acquire", &shop, json!({"resource": "search"}))
        .await;
    assert_eq!(expect_status(r, StatusCode::OK).await["remaining"], 1);
    // The other app draws from the same bucket.
    let r = app
        .post("/v1/acquire", &mine, json!({"resource": "search"}))
        .await;
    assert_eq!(expect_status(r, StatusCode::OK).await["remaining"], 0);
    let r = app
        .post("/v1/acquire", &mine, json!({"resource": "search"}))
        .await;
    expect_status(r, StatusCode::TOO_MANY_REQUESTS).await;
}

#[tokio::test]
async fn a_disabled_policy_grants_unenforced_and_leaves_the_bucket_alone() {
    let app = spawn_app(Db::Sqlite).await;
    let key = app.shop_with_policy("exports", 0.001, 1).await;
    expect_status(app.acquire(&key, "exports", 1).await, StatusCode::OK).await;
    let r = app
        .send(
            "PATCH",
            "/api/v1/policies/exports",
            &app.admin_token,
            Some(json!({"enabled": false})),
        )
        .await;
    expect_status(r, StatusCode::OK).await;
    for _ in 0..3 {
        let body = expect_status(app.acquire(&key, "exports", 1).await, StatusCode::OK).await;
        assert_eq!(body["allowed"], true);
        assert_eq!(body["enforced"], false);
    }
    let r = app
        .send(
            "PATCH",
            "/api/v1/policies/exports",
            &app.admin_token,
            Some(json!({"enabled": true})),
        )
        .await;
    expect_status(r, StatusCode::OK).await;
    expect_status(
        app.acquire(&key, "exports", 1).await,
        StatusCode::TOO_MANY_REQUESTS,
    )
    .await;
}

#[tokio::test]
async fn a_redis_outage_fails_closed_or_open_as_the_policy_says() {
    let mut redis = PrivateRedis::start().await;
    let db = fresh_database(Db::Sqlite).await;
    // The subject is the outage: a Redis call gives up after the production default
    // (100 ms), not the tests' seconds.
    let mut s = settings(&db, &redis.url(), "outage");
    s.redis_timeout_ms = 100;
    let app = spawn_app_with(s).await;
    let key = app.shop_with_policy("closed.one", 100.0, 100).await;
    app.create_policy(json!({
        "name": "open.one", "owner_app": "shop", "rate": 100, "max_permits": 100,
        "failure_mode": "open"
    }))
    .await;
    expect_status(app.acquire(&key, "closed.one", 1).await, StatusCode::OK).await;

    redis.stop();

    expect_problem(
        app.acquire(&key, "closed.one", 1).await,
        StatusCode::SERVICE_UNAVAILABLE,
    )
    .await;
    let body = expect_status(app.acquire(&key, "open.one", 1).await, StatusCode::OK).await;
    assert_eq!(body["allowed"], true);
    assert_eq!(body["degraded"], true);
    let r = app.client.get(app.url("/readyz")).send().await.unwrap();
    assert_eq!(
        expect_status(r, StatusCode::SERVICE_UNAVAILABLE).await["redis"],
        "unreachable"
    );
}

/// Every operation the server serves under `/v1/` and `/api/v1/` (`api::routes`), with
/// the path as the OpenAPI document spells it.
const API_OPERATIONS: [(&str, &str); 32] = [
    ("post", "/v1/acquire"),
    ("post", "/v1/release"),
    ("post", "/v1/refund"),
    ("get", "/api/v1/apps"),
    ("post", "/api/v1/apps"),
    ("get", "/api/v1/apps/{slug}"),
    ("patch", "/api/v1/apps/{slug}"),
    ("delete", "/api/v1/apps/{slug}"),
    ("post", "/api/v1/apps/{slug}/keys"),
    ("delete", "/api/v1/apps/{slug}/keys/{id}"),
    ("post", "/api/v1/apps/{slug}/keys/{id}/rotate"),
    ("put", "/api/v1/apps/{slug}/members/{username}"),
    ("delete", "/api/v1/apps/{slug}/members/{username}"),
    ("post", "/api/v1/apps/{slug}/webhooks"),
    ("get", "/api/v1/apps/{slug}/webhooks"),
    ("delete", "/api/v1/apps/{slug}/webhooks/{id}"),
    ("post", "/api/v1/apps/{slug}/webhooks/{id}/rotate-secret"),
    (
        "post",
        "/api/v1/apps/{slug}/webhooks/{id}/deliveries/{delivery}/send-again",
    ),
    ("get", "/api/v1/policies"),
    ("post", "/api/v1/policies"),
    ("get", "/api/v1/policies/{name}"),
    ("patch", "/api/v1/policies/{name}"),
    ("delete", "/api/v1/policies/{name}"),
    ("get", "/api/v1/policies/{name}/state"),
    ("delete", "/api/v1/policies/{name}/state"),
    ("get", "/api/v1/policies/{name}/top"),
    ("get", "/api/v1/policies/{name}/versions"),
    ("post", "/api/v1/policies/{name}/rollback"),
    ("get", "/api/v1/audit"),
    ("get", "/api/v1/export"),
    ("post", "/api/v1/apply"),
    ("get", "/api/v1/policies/schema.json"),
];

const METHODS: [&str; 5] = ["get", "post", "put", "patch", "delete"];

/// The (method, path) pairs of an OpenAPI document's `paths`.
fn documented_operations(doc: &serde_json::Value) -> BTreeSet<(String, String)> {
    const HTTP_METHODS: [&str; 8] = [
        "get", "put", "post", "delete", "options", "head", "patch", "trace",
    ];
    let mut operations = BTreeSet::new();
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for (method, _) in item.as_object().expect("a path item") {
            if HTTP_METHODS.contains(&method.as_str()) {
                operations.insert((method.clone(), path.clone()));
            }
        }
    }
    operations
}

/// Whether the server answered that no route takes `method path` (404, or 405 where the
/// path is served with other methods), rather than a route that refused the request,
/// e.g. for want of a credential.
async fn no_route(app: &TestApp, method: &str, path: &str) -> bool {
    let r = app
        .send(
            &method.to_uppercase(),
            path,
            "rk_not_a_credential",
            (method != "get").then(|| json!({})),
        )
        .await;
    let status = r.status();
    let body: serde_json::Value = r.json().await.unwrap_or_default();
    // A path no route takes is 404 "no route"; a path served with other methods only is
    // 405 (with Allow).
    let no_route = (status == StatusCode::NOT_FOUND
        && body["detail"]
            .as_str()
            .is_some_and(|d| d.starts_with("no route for")))
        || status == StatusCode::METHOD_NOT_ALLOWED;
    // The policy file's schema is public (editors fetch it without a token).
    let public = method == "get" && path == "/api/v1/policies/schema.json";
    assert!(
        no_route || status == StatusCode::UNAUTHORIZED || (public && status == StatusCode::OK),
        "{method} {path}: {status} {body}"
    );
    no_route
}

/// Whether the server routes `path` to the operation of `template`: a placeholder takes
/// one segment, but `{name}` takes one or more (policy names may contain '/'), except
/// that a policy path ending in `/state` is the state resource's only.
fn routes_to(template: &str, path: &str) -> bool {
    fn matches(template: &[&str], path: &[&str]) -> bool {
        match (template.split_first(), path.split_first()) {
            (None, None) => true,
            (Some((&"{name}", t)), Some(_)) => (1..=path.len()).any(|n| matches(t, &path[n..])),
            (Some((t0, t)), Some((p0, p))) => {
                (t0 == p0 || (t0.starts_with('{') && !p0.is_empty())) && matches(t, p)
            }
            _ => false,
        }
    }
    // A path ending in /state, /top, /versions or /rollback is that resource's: its other
    // methods answer 405 (a policy whose name ends so is reached percent-encoded, %2F).
    for own in ["/state", "/top", "/versions", "/rollback"] {
        if path.starts_with("/api/v1/policies/") && path.ends_with(own) && !template.ends_with(own)
        {
            return false;
        }
    }
    let template: Vec<&str> = template.split('/').collect();
    let path: Vec<&str> = path.split('/').collect();
    matches(&template, &path)
}

/// One sample of a Prometheus text exposition.
#[derive(Debug)]
struct Sample {
    name: String,
    labels: BTreeMap<String, String>,
    value: f64,
}

/// The samples of a Prometheus text exposition (format 0.0.4), comments skipped.
fn prometheus_samples(text: &str) -> Vec<Sample> {
    let mut samples = Vec::new();
    for line in text.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let name_end = line.find(['{', ' ']).expect("a sample has a value");
        let name = line[..name_end].to_owned();
        let mut labels = BTreeMap::new();
        let mut rest = &line[name_end..];
        if let Some(inside) = rest.strip_prefix('{') {
            let mut chars = inside.char_indices();
            let mut label = String::new();
            let close = loop {
                let (i, c) = chars.next().expect("labels are closed");
                match c {
                    '}' => break i,
                    ',' | ' ' => {}
                    '=' => {
                        assert_eq!(chars.next().map(|(_, c)| c), Some('"'), "{line}");
                        let mut value = String::new();
                        loop {
                            match chars.next().expect("a label value is closed").1 {
                                '"' => break,
                                '\\' => match chars.next().unwrap().1 {
                                    'n' => value.push('\n'),
                                    other => value.push(other),
                                },
                                other => value.push(other),
                            }
                        }
                        labels.insert(std::mem::take(&mut label), value);
                    }
                    other => label.push(other),
                }
            };
            rest = &inside[close + 1..];
        }
        let value = rest.split_whitespace().next().expect("a value");
        let value = match value {
            "+Inf" => f64::INFINITY,
            "-Inf" => f64::NEG_INFINITY,
            v => v.parse().unwrap_or_else(|_| panic!("not a number: {line}")),
        };
        samples.push(Sample {
            name,
            labels,
            value,
        });
    }
    samples
}

/// The samples named `name`, each as its labels and value.
fn series(samples: &[Sample], name: &str) -> Vec<(Vec<(String, String)>, f64)> {
    samples
        .iter()
        .filter(|s| s.name == name)
        .map(|s| (s.labels.clone().into_iter().collect(), s.value))
        .collect()
}

/// The value of the sample `name` with exactly these labels.
fn value(samples: &[Sample], name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    let wanted: BTreeMap<String, String> = labels
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    samples
        .iter()
        .find(|s| s.name == name && s.labels == wanted)
        .map(|s| s.value)
}

async fn metrics(app: &TestApp) -> Vec<Sample> {
    let r = app.client.get(app.url("/metrics")).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    prometheus_samples(&r.text().await.unwrap())
}

#[tokio::test]
async fn health_metrics_and_openapi_answer() {
    let app = spawn_app(Db::Sqlite).await;
    let key = app.shop_with_policy("orders.create", 0.001, 1).await;
    expect_status(app.acquire(&key, "orders.create", 1).await, StatusCode::OK).await;
    expect_status(
        app.acquire(&key, "orders.create", 1).await,
        StatusCode::TOO_MANY_REQUESTS,
    )
    .await;

    let r = app.client.get(app.url("/healthz")).send().await.unwrap();
    expect_status(r, StatusCode::OK).await;
    let r = app.client.get(app.url("/readyz")).send().await.unwrap();
    let body = expect_status(r, StatusCode::OK).await;
    assert_eq!(
        (body["sql"].as_str(), body["redis"].as_str()),
        (Some("ok"), Some("ok"))
    );

    // The server's own registry: exactly what this server did, nothing of other tests'.
    // The sync task's first pass runs at start, beside the requests above: wait for it.
    let pass_counted = eventually(Duration::from_secs(10), || async {
        value(
            &metrics(&app).await,
            "ratekeeper_sync_passes_total",
            &[("result", "ok")],
        )
        .is_some_and(|n| n >= 1.0)
    })
    .await;
    assert!(pass_counted, "the sync task's pass is counted");
    let samples = metrics(&app).await;
    let decisions = |outcome: &str| {
        value(
            &samples,
            "ratekeeper_decisions_total",
            &[("outcome", outcome), ("protocol", "http")],
        )
    };
    assert_eq!(decisions("granted"), Some(1.0));
    assert_eq!(decisions("denied"), Some(1.0));
    // Every outcome's series is there from the start (at 0 until counted), and no other.
    let outcomes = series(&samples, "ratekeeper_decisions_total");
    assert_eq!(outcomes.len(), 6, "the six outcomes: {outcomes:?}");
    for other in ["unenforced", "shadow_denied", "degraded", "unavailable"] {
        assert_eq!(
            decisions(other),
            Some(0.0),
            "no other decision: {outcomes:?}"
        );
    }
    assert_eq!(
        value(&samples, "ratekeeper_acquire_seconds_count", &[]),
        Some(2.0)
    );
    let buckets = series(&samples, "ratekeeper_acquire_seconds_bucket");
    assert_eq!(
        buckets.last().map(|(labels, n)| (labels.clone(), *n)),
        Some((vec![("le".to_owned(), "+Inf".to_owned())], 2.0))
    );
    assert!(
        buckets.windows(2).all(|w| w[0].1 <= w[1].1),
        "cumulative buckets: {buckets:?}"
    );
    // The batcher's own figures: the two acquires went one after the other, each alone in
    // its call (size 1), timed, and nothing waits now.
    assert_eq!(
        value(&samples, "ratekeeper_batch_size_count", &[]),
        Some(2.0)
    );
    assert_eq!(value(&samples, "ratekeeper_batch_size_sum", &[]), Some(2.0));
    assert_eq!(
        value(&samples, "ratekeeper_batch_call_seconds_count", &[]),
        Some(2.0)
    );
    assert_eq!(value(&samples, "ratekeeper_batch_queued", &[]), Some(0.0));
    // The interval is a minute and no other instance announces a change: the task has made
    // exactly its first pass, timed beside the pass made before serving.
    assert_eq!(
        series(&samples, "ratekeeper_sync_passes_total"),
        [(vec![("result".to_owned(), "ok".to_owned())], 1.0)]
    );
    assert_eq!(
        value(&samples, "ratekeeper_sync_pass_seconds_count", &[]),
        Some(2.0)
    );

    let r = app
        .client
        .get(app.url("/api/openapi.json"))
        .send()
        .await
        .unwrap();
    let doc = expect_status(r, StatusCode::OK).await;
    assert!(doc["openapi"].as_str().unwrap().starts_with("3.1"));
    // Every operation served is documented with its method, and nothing else is.
    let served: BTreeSet<(String, String)> = API_OPERATIONS
        .iter()
        .map(|(m, p)| ((*m).to_owned(), (*p).to_owned()))
        .collect();
    assert_eq!(documented_operations(&doc), served);
    // The list is what the server serves: each of its operations is routed, and no method
    // that no listed operation takes is routed on its paths.
    let paths: BTreeSet<&str> = API_OPERATIONS.iter().map(|(_, p)| *p).collect();
    for path in paths {
        let concrete = path
            .replace("{slug}", "shop")
            .replace("{id}", "0123456789abcdef")
            .replace("{username}", "olga")
            .replace("{delivery}", "msg_0123456789abcdef")
            .replace("{name}", "orders.create");
        for method in METHODS {
            let listed = API_OPERATIONS
                .iter()
                .any(|(m, template)| *m == method && routes_to(template, &concrete));
            assert_eq!(
                !no_route(&app, method, &concrete).await,
                listed,
                "{method} {concrete} is served: {}",
                listed
            );
        }
    }
    assert!(doc["components"]["schemas"]["PolicyInput"]["properties"]["rate"].is_object());

    let r = app
        .client
        .get(app.url("/api/v1/no/such/page"))
        .send()
        .await
        .unwrap();
    expect_problem(r, StatusCode::NOT_FOUND).await;
}

#[tokio::test]
async fn the_acquire_path_reads_no_sql() {
    // Keys and policies come from the in-memory snapshot: with the database gone, acquire
    // still decides.
    let app = spawn_app(Db::Postgres).await;
    let key = app.shop_with_policy("orders.create", 0.001, 2).await;
    let db_name = app
        .settings
        .database_url
        .expose_secret()
        .rsplit('/')
        .next()
        .unwrap()
        .to_owned();
    let server = std::env::var("RK_TEST_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432".into());
    let mut admin =
        <sqlx::AnyConnection as sqlx::Connection>::connect(&format!("{server}/postgres"))
            .await
            .unwrap();
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "DROP DATABASE {db_name} WITH (FORCE)"
    )))
    .execute(&mut admin)
    .await
    .unwrap();
    expect_status(app.acquire(&key, "orders.create", 2).await, StatusCode::OK).await;
    expect_status(
        app.acquire(&key, "orders.create", 1).await,
        StatusCode::TOO_MANY_REQUESTS,
    )
    .await;
}

#[tokio::test]
async fn a_denial_is_repeated_locally_until_the_policy_changes() {
    let app = spawn_app(Db::Sqlite).await;
    let key = app.shop_with_policy("flooded", 0.001, 2).await;
    expect_status(app.acquire(&key, "flooded", 2).await, StatusCode::OK).await;
    let first = expect_status(
        app.acquire(&key, "flooded", 1).await,
        StatusCode::TOO_MANY_REQUESTS,
    )
    .await;

    // Refill the bucket behind the instance's back: an identical request is still
    // answered from the denial it already has, without asking Redis.
    app.set_token_bucket_tokens("flooded", 2.0).await;
    let r = app.acquire(&key, "flooded", 1).await;
    assert_eq!(r.headers()["retry-after"], first_retry_after_header(&first));
    let again = expect_status(r, StatusCode::TOO_MANY_REQUESTS).await;
    assert!(again["retry_after_ms"].as_i64().unwrap() <= first["retry_after_ms"].as_i64().unwrap());
    assert_eq!(again["policy_version"], 1);

    // A change of the policy drops what this instance knew: Redis decides again.
    let r = app
        .send(
            "PATCH",
            "/api/v1/policies/flooded",
            &app.admin_token,
            Some(json!({"description": "x"})),
        )
        .await;
    expect_status(r, StatusCode::OK).await;
    let body = expect_status(app.acquire(&key, "flooded", 1).await, StatusCode::OK).await;
    assert_eq!(body["policy_version"], 2);
}

fn first_retry_after_header(body: &serde_json::Value) -> String {
    let ms = body["retry_after_ms"].as_i64().unwrap();
    ((ms + 999) / 1000).max(1).to_string()
}
