//! Concurrency leases: given back with `POST /v1/release`, expiring, and refused releases.

use std::time::Duration;

use ratekeeper::domain::{Algorithm, AppSlug, MaxPermits, Millis, PolicyName};
use ratekeeper::startup::Core;
use ratekeeper_limiter::{LeaseId, PolicyConfig, ReleaseOutcome};
use reqwest::{Response, StatusCode};
use serde_json::{Value, json};

use super::{
    ALGORITHMS, admin_reads, is_lease_id, patch, release, shop_with_key, state_key, three_permits,
};
use crate::helpers::*;

/// A 404 saying the lease is not held.
async fn expect_not_held(response: Response) {
    let problem = expect_problem(response, StatusCode::NOT_FOUND).await;
    assert_eq!(
        problem["type"], "urn:ratekeeper:problem:lease-not-held",
        "{problem}"
    );
}

/// shop with a key and policy "jobs": `max` leases at once, each living `ttl_ms`.
async fn jobs(app: &TestApp, max: i64, ttl_ms: i64) -> String {
    let key = shop_with_key(app).await;
    app.create_policy(json!({
        "name": "jobs", "owner_app": "shop", "algorithm": "concurrency",
        "max_permits": max, "lease_ttl_ms": ttl_ms
    }))
    .await;
    key
}

async fn granted_lease(app: &TestApp, key: &str, permits: i64) -> String {
    let body = expect_status(app.acquire(key, "jobs", permits).await, StatusCode::OK).await;
    let lease = body["lease_id"]
        .as_str()
        .unwrap_or_else(|| panic!("a grant has a lease: {body}"))
        .to_owned();
    assert!(is_lease_id(&lease), "32 hex digits: {lease}");
    lease
}

async fn denied(app: &TestApp, key: &str) -> Value {
    let body = expect_status(
        app.acquire(key, "jobs", 1).await,
        StatusCode::TOO_MANY_REQUESTS,
    )
    .await;
    assert!(
        body.get("lease_id").is_none(),
        "a denial has no lease: {body}"
    );
    body
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_released_lease_frees_its_permit_at_once() {
    let app = spawn_app(Db::Sqlite).await;
    let key = jobs(&app, 2, 3_600_000).await;

    let first = granted_lease(&app, &key, 1).await;
    let second = granted_lease(&app, &key, 1).await;
    assert_ne!(first, second);
    denied(&app, &key).await;

    let r = release(&app, &key, "jobs", &first).await;
    assert_eq!(
        expect_status(r, StatusCode::OK).await,
        json!({"released": true, "permits": 1, "remaining": 1})
    );
    // Granted at once: a concurrency denial is never answered from memory.
    let third = granted_lease(&app, &key, 1).await;
    denied(&app, &key).await;

    // A lease is given back once.
    expect_not_held(release(&app, &key, "jobs", &first).await).await;
    denied(&app, &key).await;

    for (lease, remaining) in [(&second, 1), (&third, 2)] {
        let r = release(&app, &key, "jobs", lease).await;
        assert_eq!(
            expect_status(r, StatusCode::OK).await,
            json!({"released": true, "permits": 1, "remaining": remaining})
        );
    }
    // A lease of two permits gives both back.
    let both = granted_lease(&app, &key, 2).await;
    denied(&app, &key).await;
    let r = release(&app, &key, "jobs", &both).await;
    assert_eq!(
        expect_status(r, StatusCode::OK).await,
        json!({"released": true, "permits": 2, "remaining": 2})
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_application_cannot_release_a_lease() {
    let app = spawn_app(Db::Sqlite).await;
    let shop = shop_with_key(&app).await;
    app.create_app("blog").await;
    let blog = app.create_key("blog").await;
    app.create_policy(json!({
        "name": "jobs", "owner_app": "shop", "algorithm": "concurrency",
        "max_permits": 2, "lease_ttl_ms": 3_600_000, "allowed_apps": ["shop", "blog"]
    }))
    .await;

    let first = granted_lease(&app, &shop, 1).await;
    granted_lease(&app, &shop, 1).await;

    // blog may acquire on jobs, but shop's lease is not blog's to give back.
    expect_not_held(release(&app, &blog, "jobs", &first).await).await;
    // The lease still holds, for everyone.
    denied(&app, &shop).await;
    denied(&app, &blog).await;
    let state = admin_reads(&app, "/api/v1/policies/jobs/state").await;
    assert_eq!(state["current_permits"], 0.0, "{state}");

    let r = release(&app, &shop, "jobs", &first).await;
    expect_status(r, StatusCode::OK).await;
    let blogs = granted_lease(&app, &blog, 1).await;
    expect_not_held(release(&app, &shop, "jobs", &blogs).await).await;
    denied(&app, &shop).await;
    let r = release(&app, &blog, "jobs", &blogs).await;
    assert_eq!(
        expect_status(r, StatusCode::OK).await,
        json!({"released": true, "permits": 1, "remaining": 1})
    );

    // An application taken off the policy may still give back what it holds.
    let held = granted_lease(&app, &blog, 1).await;
    let r = patch(&app, "jobs", json!({"allowed_apps": ["shop"]})).await;
    expect_status(r, StatusCode::OK).await;
    expect_problem(app.acquire(&blog, "jobs", 1).await, StatusCode::FORBIDDEN).await;
    let r = release(&app, &blog, "jobs", &held).await;
    assert_eq!(
        expect_status(r, StatusCode::OK).await,
        json!({"released": true, "permits": 1, "remaining": 1})
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_of_many_permits_is_given_back_whole() {
    let app = spawn_app(Db::Sqlite).await;
    let key = jobs(&app, 300, 3_600_000).await;
    // The script removes a lease's members in batches of 100: around the edges.
    for permits in [99, 100, 101, 200, 300] {
        let lease = granted_lease(&app, &key, permits).await;
        let r = release(&app, &key, "jobs", &lease).await;
        assert_eq!(
            expect_status(r, StatusCode::OK).await,
            json!({"released": true, "permits": permits, "remaining": 300}),
            "{permits} permits"
        );
    }
    let lease = granted_lease(&app, &key, 300).await;
    denied(&app, &key).await;
    expect_status(release(&app, &key, "jobs", &lease).await, StatusCode::OK).await;
    assert!(!app.redis_exists(&state_key(&app, "jobs", "leases")).await);
}

/// Redis' clock, in µs.
async fn redis_us(app: &TestApp) -> i64 {
    let mut conn = app.redis.clone();
    let (s, us): (i64, i64) = redis::cmd("TIME").query_async(&mut conn).await.unwrap();
    s * 1_000_000 + us
}

/// Makes every lease of `jobs` expire a moment ago on Redis' clock, as if its lifetime had
/// gone by.
async fn lifetimes_over(app: &TestApp) {
    let leases = state_key(app, "jobs", "leases");
    let mut conn = app.redis.clone();
    let members: Vec<String> = redis::cmd("ZRANGE")
        .arg(&leases)
        .arg(0)
        .arg(-1)
        .query_async(&mut conn)
        .await
        .unwrap();
    let past_ms = redis_us(app).await / 1000 - 1;
    for member in members {
        redis::cmd("ZADD")
            .arg(&leases)
            .arg("XX")
            .arg(past_ms)
            .arg(member)
            .query_async::<i64>(&mut conn)
            .await
            .unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_not_released_expires_by_itself() {
    // Leases of an hour, whose lifetime the test ends on Redis' clock: whether a lease is
    // held or expired never depends on how fast the machine runs.
    let app = spawn_app(Db::Sqlite).await;
    const TTL_MS: i64 = 3_600_000;
    let key = jobs(&app, 1, TTL_MS).await;

    let lease = granted_lease(&app, &key, 1).await;
    let body = denied(&app, &key).await;
    let retry = body["retry_after_ms"].as_i64().unwrap();
    assert!(
        (1..=TTL_MS).contains(&retry),
        "free when the lease expires: {body}"
    );

    // Nobody gives it back: once its lifetime is over, the permit is free again.
    lifetimes_over(&app).await;
    let again = granted_lease(&app, &key, 1).await;
    // Expired is not held: there is nothing to give back.
    expect_not_held(release(&app, &key, "jobs", &lease).await).await;
    // The new lease is held, and the expired one no longer counts.
    denied(&app, &key).await;
    let r = release(&app, &key, "jobs", &again).await;
    assert_eq!(
        expect_status(r, StatusCode::OK).await,
        json!({"released": true, "permits": 1, "remaining": 1})
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreleased_lease_and_its_set_go_by_themselves_in_real_time() {
    // Leases of 300 ms, waited for: nothing here depends on when they expire, only on
    // what Redis' clock says when the permit comes back.
    let app = spawn_app(Db::Sqlite).await;
    const TTL_MS: i64 = 300;
    let key = jobs(&app, 1, TTL_MS).await;
    let before_taking_us = redis_us(&app).await;
    let lease = granted_lease(&app, &key, 1).await;

    let granted_again = eventually(Duration::from_secs(10), || {
        let (app, key) = (&app, &key);
        async move { app.acquire(key, "jobs", 1).await.status() == StatusCode::OK }
    })
    .await;
    assert!(granted_again, "the expired lease's permit is free again");
    assert!(
        redis_us(&app).await >= before_taking_us + TTL_MS * 1000,
        "not before the lease's lifetime, on Redis' clock"
    );
    expect_not_held(release(&app, &key, "jobs", &lease).await).await;

    // An idle policy leaves no lease set behind once its last lease expires.
    let leases = state_key(&app, "jobs", "leases");
    assert!(
        eventually(Duration::from_secs(10), || {
            let (app, leases) = (&app, &leases);
            async move { !app.redis_exists(leases).await }
        })
        .await,
        "the lease set expires with its last lease"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_disabled_concurrency_policy_grants_without_leases() {
    let app = spawn_app(Db::Sqlite).await;
    let key = jobs(&app, 1, 3_600_000).await;
    let held = granted_lease(&app, &key, 1).await;
    let r = patch(&app, "jobs", json!({"enabled": false})).await;
    expect_status(r, StatusCode::OK).await;

    for _ in 0..3 {
        let body = expect_status(app.acquire(&key, "jobs", 1).await, StatusCode::OK).await;
        assert_eq!(body["enforced"], false, "{body}");
        assert!(
            body.get("lease_id").is_none(),
            "nothing to give back: {body}"
        );
    }
    // Switched on again, the lease taken before still holds.
    let r = patch(&app, "jobs", json!({"enabled": true})).await;
    expect_status(r, StatusCode::OK).await;
    denied(&app, &key).await;
    let r = release(&app, &key, "jobs", &held).await;
    expect_status(r, StatusCode::OK).await;
    granted_lease(&app, &key, 1).await;
}

/// Another instance turns token bucket `name` into a concurrency limit of one lease at a
/// time, in SQL and in Redis, as its `policy_saved` does; its change notice is lost (the
/// subscriber was reconnecting), so this server learns of it only at its next reconcile
/// pass, up to one sync interval later (crates/limiter/src/sync_writes/changes.rs: "a lost message costs at most one sync
/// interval, never correctness"). Returns the other instance.
async fn made_concurrency_elsewhere_unannounced(app: &TestApp, name: &str) -> Core {
    let other = app.core().await;
    let mut tx = other.store.begin().await.unwrap();
    let current = tx
        .policy_by_name_for_update(name)
        .await
        .unwrap()
        .expect("the policy");
    let mut spec = current.spec.clone();
    spec.algorithm = Algorithm::Concurrency;
    spec.rate = None;
    spec.max_permits = MaxPermits::parse_field("max_permits", 1).unwrap();
    spec.lease_ttl_ms = Some(Millis::parse_field("lease_ttl_ms", 3_600_000).unwrap());
    let updated = tx.update_policy(&current, &spec).await.unwrap().unwrap();
    tx.commit().await.unwrap();
    let config = PolicyConfig::new(&updated.spec, updated.created_ms, updated.version);
    assert!(other.limiter.push_policy(&config).await.unwrap());
    other
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_granted_before_this_instance_heard_of_the_change_can_be_released() {
    let app = spawn_app(Db::Sqlite).await;
    let key = shop_with_key(&app).await;
    app.create_policy(three_permits("jobs", "token_bucket"))
        .await;
    made_concurrency_elsewhere_unannounced(&app, "jobs").await;

    // The acquire path finds the right algorithm in Redis: a lease is granted.
    let lease = granted_lease(&app, &key, 1).await;
    // Giving it back must work too (or at worst fail with a retryable status), not be
    // refused as if the policy handed out no leases.
    let r = release(&app, &key, "jobs", &lease).await;
    assert_eq!(
        expect_status(r, StatusCode::OK).await,
        json!({"released": true, "permits": 1, "remaining": 1})
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_concurrency_denial_is_never_answered_from_memory_even_before_the_snapshot_knows() {
    let app = spawn_app(Db::Sqlite).await;
    let key = shop_with_key(&app).await;
    app.create_policy(three_permits("jobs", "token_bucket"))
        .await;
    let other = made_concurrency_elsewhere_unannounced(&app, "jobs").await;

    let lease = granted_lease(&app, &key, 1).await;
    denied(&app, &key).await;
    // The client gives the lease back through the instance that knows the policy.
    let released = other
        .limiter
        .release(
            &PolicyName::parse("jobs").unwrap(),
            &AppSlug::parse("shop").unwrap(),
            LeaseId::parse(&lease).unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(
        released,
        ReleaseOutcome::Released {
            remaining: 1,
            permits: 1
        }
    );
    // The permit is free in Redis: this instance must ask Redis, not repeat the denial.
    granted_lease(&app, &key, 1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_concurrency_policies_take_a_release() {
    let app = spawn_app(Db::Sqlite).await;
    let key = shop_with_key(&app).await;
    let lease = "0123456789abcdef0123456789abcdef";
    for algorithm in ALGORITHMS.into_iter().filter(|a| *a != "concurrency") {
        app.create_policy(three_permits(algorithm, algorithm)).await;
        expect_status(app.acquire(&key, algorithm, 1).await, StatusCode::OK).await;
        let problem = expect_problem(
            release(&app, &key, algorithm, lease).await,
            StatusCode::CONFLICT,
        )
        .await;
        assert_eq!(
            problem["type"], "urn:ratekeeper:problem:not-a-lease-policy",
            "{algorithm}: {problem}"
        );
        assert!(
            problem["detail"].as_str().unwrap().contains(algorithm),
            "{problem}"
        );
    }
    // No policy of that name at all.
    let problem = expect_problem(
        release(&app, &key, "nothing", lease).await,
        StatusCode::NOT_FOUND,
    )
    .await;
    assert_eq!(problem["type"], "urn:ratekeeper:problem:not-found");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_release_is_refused() {
    let app = spawn_app(Db::Sqlite).await;
    let key = jobs(&app, 2, 3_600_000).await;
    let lease = granted_lease(&app, &key, 1).await;

    for bad in [
        "xyz".to_owned(),
        String::new(),
        "abc".to_owned(),
        lease[..31].to_owned(),
        format!("{lease}00"),
        "g".repeat(32),
        format!("{{{lease}}}"),
    ] {
        let problem = expect_problem(
            release(&app, &key, "jobs", &bad).await,
            StatusCode::BAD_REQUEST,
        )
        .await;
        assert_eq!(problem["field"], "lease_id", "{bad:?}: {problem}");
    }
    let r = app
        .post("/v1/release", &key, json!({"resource": "jobs"}))
        .await;
    assert_eq!(
        expect_problem(r, StatusCode::BAD_REQUEST).await["field"],
        "lease_id"
    );
    let r = app
        .post("/v1/release", &key, json!({"lease_id": lease}))
        .await;
    assert_eq!(
        expect_problem(r, StatusCode::BAD_REQUEST).await["field"],
        "resource"
    );
    let r = release(&app, &key, "bad name", &lease).await;
    assert_eq!(
        expect_problem(r, StatusCode::BAD_REQUEST).await["field"],
        "resource"
    );
    let r = app
        .client
        .post(app.url("/v1/release"))
        .bearer_auth(&key)
        .body("{not json")
        .send()
        .await
        .unwrap();
    expect_problem(r, StatusCode::BAD_REQUEST).await;
    // A field the endpoint does not know: a body that does not fit, named.
    let r = app
        .post(
            "/v1/release",
            &key,
            json!({"resource": "jobs", "lease_id": lease, "permits": 1}),
        )
        .await;
    assert_eq!(
        expect_problem(r, StatusCode::BAD_REQUEST).await["field"],
        "permits"
    );
    // No key, or an unknown one.
    let r = app
        .client
        .post(app.url("/v1/release"))
        .json(&json!({"resource": "jobs", "lease_id": lease}))
        .send()
        .await
        .unwrap();
    expect_problem(r, StatusCode::UNAUTHORIZED).await;
    expect_problem(
        release(&app, "rk_key_nope", "jobs", &lease).await,
        StatusCode::UNAUTHORIZED,
    )
    .await;

    // None of it touched the lease.
    let r = release(&app, &key, "jobs", &lease).await;
    assert_eq!(
        expect_status(r, StatusCode::OK).await,
        json!({"released": true, "permits": 1, "remaining": 2})
    );
}
