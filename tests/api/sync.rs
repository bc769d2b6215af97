//! The SQL -> Redis sync: write-through after each change, and the reconcile pass that
//! repairs Redis after a flush, a missed push or another instance's stale view.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::json;

use crate::helpers::*;
use crate::on_every_backend;

async fn patch(app: &TestApp, name: &str, body: serde_json::Value) -> serde_json::Value {
    let r = app
        .send(
            "PATCH",
            &format!("/api/v1/policies/{name}"),
            &app.admin_token,
            Some(body),
        )
        .await;
    expect_status(r, StatusCode::OK).await
}

async fn changes_take_effect_on_the_next_acquire(db: Db) {
    let app = spawn_app(db).await;
    // Nearly no refill: what happens is the sync's doing, not time's.
    let key = app.shop_with_policy("reports", 0.001, 2).await;
    expect_status(app.acquire(&key, "reports", 2).await, StatusCode::OK).await;

    // A change that touches neither rate nor capacity never refills the bucket.
    let p = patch(&app, "reports", json!({"description": "monthly reports"})).await;
    assert_eq!(p["version"], 2);
    let body = expect_status(
        app.acquire(&key, "reports", 1).await,
        StatusCode::TOO_MANY_REQUESTS,
    )
    .await;
    assert_eq!(
        body["policy_version"], 2,
        "the new version is in Redis at once"
    );

    // A higher capacity is in force at the next acquire.
    patch(&app, "reports", json!({"max_permits": 5})).await;
    let body = expect_status(
        app.acquire(&key, "reports", 1).await,
        StatusCode::TOO_MANY_REQUESTS,
    )
    .await;
    assert_eq!(body["limit"], 5);

    // So is a faster rate: 1000 per second refills a permit within a millisecond.
    patch(&app, "reports", json!({"rate": 1000})).await;
    let refilled = eventually(Duration::from_secs(5), || async {
        app.acquire(&key, "reports", 1).await.status() == StatusCode::OK
    })
    .await;
    assert!(refilled, "the new rate refills");

    // A lowered capacity clamps the bucket at once.
    patch(&app, "reports", json!({"max_permits": 1, "rate": 0.001})).await;
    let r = app.acquire(&key, "reports", 2).await;
    assert_eq!(
        expect_problem(r, StatusCode::UNPROCESSABLE_ENTITY).await["field"],
        "permits"
    );
    let state = expect_status(
        app.get("/api/v1/policies/reports/state", &app.admin_token)
            .await,
        StatusCode::OK,
    )
    .await;
    assert!(state["current_permits"].as_f64().unwrap() <= 1.0);
    assert_eq!(state["max_permits"], 1);
}
on_every_backend!(changes_take_effect, changes_take_effect_on_the_next_acquire);

async fn a_deleted_policy_leaves_nothing_in_redis(db: Db) {
    let app = spawn_app(db).await;
    let key = app.shop_with_policy("gone.soon", 1.0, 2).await;
    expect_status(app.acquire(&key, "gone.soon", 1).await, StatusCode::OK).await;
    assert!(app.redis_exists(&app.policy_key("gone.soon")).await);
    let r = app
        .send(
            "DELETE",
            "/api/v1/policies/gone.soon",
            &app.admin_token,
            None,
        )
        .await;
    expect_status(r, StatusCode::NO_CONTENT).await;
    assert!(!app.redis_exists(&app.policy_key("gone.soon")).await);
    expect_problem(
        app.acquire(&key, "gone.soon", 1).await,
        StatusCode::NOT_FOUND,
    )
    .await;

    // Created again under the same name, it is a new policy with a full bucket.
    app.create_policy(
        json!({"name": "gone.soon", "owner_app": "shop", "rate": 0.001, "max_permits": 3}),
    )
    .await;
    let body = expect_status(app.acquire(&key, "gone.soon", 3).await, StatusCode::OK).await;
    assert_eq!(body["policy_version"], 1);
}
on_every_backend!(deletes, a_deleted_policy_leaves_nothing_in_redis);

#[tokio::test]
async fn after_flushall_every_policy_is_back_within_one_interval() {
    let redis = PrivateRedis::start().await;
    let db = fresh_database(Db::Sqlite).await;
    let mut s = settings(&db, &redis.url(), "flush");
    s.sync_interval_ms = 200;
    let app = spawn_app_with(s).await;
    let key = app.shop_with_policy("p1", 1.0, 5).await;
    app.create_policy(json!({"name": "p2", "owner_app": "shop", "rate": 1, "max_permits": 5}))
        .await;

    // A field no sync writes: a hash that still has it was never flushed and rewritten.
    let mut conn = app.redis.clone();
    for name in ["p1", "p2"] {
        redis::cmd("HSET")
            .arg(app.policy_key(name))
            .arg("test_marker")
            .arg("before the flush")
            .query_async::<i64>(&mut conn)
            .await
            .unwrap();
    }
    redis::cmd("FLUSHALL")
        .query_async::<String>(&mut conn)
        .await
        .unwrap();
    // The reconcile loop runs beside this request: the policy is unknown until it has
    // passed, and known (a new bucket) after; nothing else.
    let r = app.acquire(&key, "p1", 1).await;
    assert!(
        [StatusCode::NOT_FOUND, StatusCode::OK].contains(&r.status()),
        "{} {}",
        r.status(),
        r.text().await.unwrap()
    );

    let back = eventually(Duration::from_secs(10), || async {
        app.redis_exists(&app.policy_key("p1")).await
            && app.redis_exists(&app.policy_key("p2")).await
    })
    .await;
    assert!(back, "the reconcile pass restored both policies");
    for name in ["p1", "p2"] {
        assert_eq!(
            app.redis_field(&app.policy_key(name), "test_marker").await,
            None,
            "{name} was written anew after the flush"
        );
    }
    expect_status(app.acquire(&key, "p2", 1).await, StatusCode::OK).await;
}

#[tokio::test]
async fn two_instances_side_by_side_do_not_fight() {
    let app = spawn_app(Db::Postgres).await;
    let key = app.shop_with_policy("shared", 0.001, 10).await;
    let other = app.core().await; // a second instance on the same SQL and Redis
    expect_status(app.acquire(&key, "shared", 4).await, StatusCode::OK).await;

    // The other instance reconciles: Redis already agrees, so it rewrites nothing and
    // the bucket keeps its 6 permits.
    let report = other.sync.reconcile_once().await.unwrap();
    assert_eq!((report.policies, report.rewritten, report.swept), (1, 0, 0));

    // A change made through the first instance...
    patch(&app, "shared", json!({"max_permits": 20})).await;
    // ...is not undone by the other instance's older view pushed late.
    let stale = ratekeeper_limiter::PolicyConfig {
        name: ratekeeper::domain::PolicyName::parse("shared").unwrap(),
        created_ms: app
            .redis_field(&app.policy_key("shared"), "created_ms")
            .await
            .unwrap()
            .parse()
            .unwrap(),
        version: 1,
        algorithm: ratekeeper::domain::Algorithm::TokenBucket,
        max_permits: 10,
        rate: 0.001,
        window_ms: None,
        lease_ttl_ms: None,
        apps: ",shop,".into(),
        enabled: true,
        scope: ratekeeper::domain::Scope::Global,
        mode: ratekeeper::domain::Mode::Enforce,
    };
    assert!(
        !other.limiter.push_policy(&stale).await.unwrap(),
        "an older version is refused"
    );
    assert_eq!(
        app.redis_field(&app.policy_key("shared"), "max_permits")
            .await
            .as_deref(),
        Some("20")
    );

    // Both reconcile again: nothing to do for either, and the bucket was never refilled.
    assert_eq!(other.sync.reconcile_once().await.unwrap().rewritten, 0);
    assert_eq!(
        app.core()
            .await
            .sync
            .reconcile_once()
            .await
            .unwrap()
            .rewritten,
        0
    );
    let body = expect_status(app.acquire(&key, "shared", 6).await, StatusCode::OK).await;
    assert_eq!(body["remaining"], 0);
}

#[tokio::test]
async fn reconcile_repairs_a_missed_push_and_sweeps_orphans() {
    let app = spawn_app(Db::Sqlite).await;
    let key = app.shop_with_policy("kept", 1.0, 3).await;
    let mut conn = app.redis.clone();
    // A push that never arrived: the key is gone from Redis alone.
    redis::cmd("DEL")
        .arg(app.policy_key("kept"))
        .query_async::<i64>(&mut conn)
        .await
        .unwrap();
    // A key left by a policy deleted long ago (created_ms far in the past).
    redis::cmd("HSET")
        .arg(app.policy_key("orphan"))
        .arg(&[
            "created_ms",
            "1",
            "version",
            "1",
            "max_permits",
            "1",
            "rate",
            "1",
            "apps",
            ",shop,",
            "enabled",
            "1",
        ])
        .query_async::<i64>(&mut conn)
        .await
        .unwrap();

    let report = app.core().await.sync.reconcile_once().await.unwrap();
    assert_eq!((report.rewritten, report.swept), (1, 1));
    assert!(app.redis_exists(&app.policy_key("kept")).await);
    assert!(!app.redis_exists(&app.policy_key("orphan")).await);
    expect_status(app.acquire(&key, "kept", 3).await, StatusCode::OK).await;
}

#[tokio::test]
async fn keys_and_policies_made_elsewhere_arrive_with_the_next_pass() {
    let app = spawn_app(Db::MySql).await;
    app.create_app("shop").await;
    // Another instance creates a key and a policy: this one learns of them by reconciling.
    let other = app.core().await;
    let actor = ratekeeper::auth::Actor::operator();
    let created = other
        .control
        .create_key(
            &actor,
            "shop",
            ratekeeper::control::KeyInput {
                label: Some("elsewhere".into()),
                expires_at: None,
            },
            ratekeeper::control::Reveal::InReply,
        )
        .await
        .unwrap();
    let policy = ratekeeper::control::PolicyInput {
        name: Some("elsewhere".into()),
        owner_app: Some("shop".into()),
        rate: Some(1.0),
        max_permits: Some(1),
        ..Default::default()
    };
    other.control.create_policy(&actor, policy).await.unwrap();
    // An instance started afterwards loads both before it serves its first request.
    let third = spawn_app_with(app.settings.clone()).await;
    expect_status(
        third.acquire(&created.key, "elsewhere", 1).await,
        StatusCode::OK,
    )
    .await;
}

#[tokio::test]
async fn a_quiet_pass_reads_little_and_a_flush_or_change_forces_a_full_one() {
    let redis = PrivateRedis::start().await;
    let db = fresh_database(Db::Postgres).await;
    // The server's own loop passes once at start, then not for an hour: only the passes
    // the test makes repair anything.
    let mut s = settings(&db, &redis.url(), "light");
    s.sync_interval_ms = 3_600_000;
    let app = spawn_app_with(s).await;
    let key = app.shop_with_policy("p1", 1.0, 5).await;
    let instance = app.core().await;
    let started = eventually(Duration::from_secs(10), || async {
        app.metric(r#"ratekeeper_sync_passes_total{result="ok"}"#)
            .await
            .is_some()
    })
    .await;
    assert!(started, "the server's loop made its first pass");

    let first = instance.sync.reconcile_once().await.unwrap();
    assert!(first.full, "nothing seen yet");
    let quiet = instance.sync.reconcile_once().await.unwrap();
    assert!(!quiet.full, "nothing changed: a light pass");
    assert_eq!((quiet.checked, quiet.rewritten), (1, 0));

    // A key lost on its own is restored by a light pass's slice.
    let mut conn = app.redis.clone();
    redis::cmd("DEL")
        .arg(app.policy_key("p1"))
        .query_async::<i64>(&mut conn)
        .await
        .unwrap();
    let repaired = instance.sync.reconcile_once().await.unwrap();
    assert!(!repaired.full);
    assert_eq!(repaired.rewritten, 1);

    // A change in SQL (made through another instance) makes the next pass full.
    app.create_policy(json!({"name": "p2", "owner_app": "shop", "rate": 1, "max_permits": 5}))
        .await;
    let changed = instance.sync.reconcile_once().await.unwrap();
    assert!(changed.full);
    assert_eq!(changed.policies, 2);

    // A flush takes the marker with it: full again, and everything is back.
    redis::cmd("FLUSHALL")
        .query_async::<String>(&mut conn)
        .await
        .unwrap();
    // An acquire of a flushed policy puts it back at once (from the server's snapshot)
    // and is decided; the next pass puts back the rest.
    expect_status(app.acquire(&key, "p2", 1).await, StatusCode::OK).await;
    let after_flush = instance.sync.reconcile_once().await.unwrap();
    assert!(after_flush.full);
    assert_eq!(
        after_flush.rewritten, 1,
        "the other policy; p2 was back already"
    );
    expect_status(app.acquire(&key, "p2", 1).await, StatusCode::OK).await;
}

#[tokio::test]
async fn a_key_revoked_on_one_instance_stops_working_on_the_others_at_once() {
    // Two instances on one database and one Redis, with a sync interval far longer than
    // the test: only the change notice can carry the news.
    let first = spawn_app(Db::Postgres).await;
    let second = spawn_app_with(first.settings.clone()).await;
    let key = first.shop_with_policy("orders.create", 100.0, 100).await;
    let learned = eventually(Duration::from_secs(10), || async {
        second.acquire(&key, "orders.create", 1).await.status() == StatusCode::OK
    })
    .await;
    assert!(
        learned,
        "the second instance learned of the new key and policy"
    );

    let id = expect_status(
        first.get("/api/v1/apps/shop", &first.admin_token).await,
        StatusCode::OK,
    )
    .await["keys"][0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let r = first
        .send(
            "DELETE",
            &format!("/api/v1/apps/shop/keys/{id}"),
            &first.admin_token,
            None,
        )
        .await;
    expect_status(r, StatusCode::NO_CONTENT).await;
    expect_problem(
        first.acquire(&key, "orders.create", 1).await,
        StatusCode::UNAUTHORIZED,
    )
    .await;
    let refused = eventually(Duration::from_secs(10), || async {
        second.acquire(&key, "orders.create", 1).await.status() == StatusCode::UNAUTHORIZED
    })
    .await;
    assert!(
        refused,
        "the second instance refuses the revoked key long before its next interval"
    );
}

#[tokio::test]
async fn an_api_keys_last_use_is_recorded_by_the_next_pass() {
    let db = fresh_database(Db::Sqlite).await;
    let mut s = settings(&db, &redis_url(), &test_prefix("app"));
    s.sync_interval_ms = 100;
    let app = spawn_app_with(s).await;
    let key = app.shop_with_policy("orders.create", 100.0, 100).await;
    let last_used = || async {
        let r = app.get("/api/v1/apps/shop", &app.admin_token).await;
        expect_status(r, StatusCode::OK).await["keys"][0]["last_used_at"].clone()
    };
    assert!(last_used().await.is_null(), "never used yet");

    // The acquire path only marks the key in memory; the sync task writes it to SQL.
    expect_status(app.acquire(&key, "orders.create", 1).await, StatusCode::OK).await;
    let recorded = eventually(Duration::from_secs(10), || async {
        last_used().await.is_string()
    })
    .await;
    assert!(recorded, "last_used_at recorded after the acquire");
}
