//! The decision counts among many policies (README "Operations", the flusher): while a flush
//! carries 1,000 policies or more, a quiet policy's counts wait a few flushes; every count
//! still reaches Redis, each in its minute's and its hour's string.

use std::time::{Duration, Instant};

use futures_util::StreamExt;
use futures_util::stream;
use reqwest::StatusCode;

use crate::helpers::*;

/// More policies than a flush carries before quiet ones wait.
const POLICIES: usize = 1_100;

/// The grants in every policy's minutes strings (`m`) or hours strings (`h`) in Redis: each
/// a string of big-endian u32 pairs, granted then denied.
async fn granted_in_redis(app: &TestApp, span: &str) -> u64 {
    let mut redis = app.redis.clone();
    let pattern = format!("{}:activity:{{p*}}:{span}:*", app.settings.redis_prefix);
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg(&pattern)
        .query_async(&mut redis)
        .await
        .unwrap();
    let mut granted = 0;
    for key in keys {
        let raw: Vec<u8> = redis::cmd("GET")
            .arg(&key)
            .query_async(&mut redis)
            .await
            .unwrap();
        granted += raw
            .chunks_exact(8)
            .map(|pair| u64::from(u32::from_be_bytes(pair[..4].try_into().unwrap())))
            .sum::<u64>();
    }
    granted
}

/// One acquire of each policy, 32 at once; how many were granted.
async fn acquire_each_once(app: &TestApp, key: &str) -> u64 {
    stream::iter(0..POLICIES)
        .map(|i| async move { app.acquire(key, &format!("p{i}"), 1).await.status() })
        .buffer_unordered(32)
        .fold(0, |granted, status| async move {
            assert_eq!(status, StatusCode::OK);
            granted + 1
        })
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quiet_policies_counts_wait_among_many_and_every_one_reaches_redis() {
    let app = spawn_app(Db::Sqlite).await;
    app.create_app("shop").await;
    let key = app.create_key("shop").await;
    let mut file = String::from("app: shop\npolicies:\n");
    for i in 0..POLICIES {
        file.push_str(&format!(
            "  - name: p{i}\n    rate: 1000000\n    max_permits: 1000000\n"
        ));
    }
    let applied = app
        .client
        .post(app.url("/api/v1/apply"))
        .bearer_auth(&app.admin_token)
        .header("content-type", "application/yaml")
        .body(file)
        .send()
        .await
        .unwrap();
    assert_eq!(applied.status(), StatusCode::OK);

    // Rounds of one acquire per policy until a flush took the counts of 1,000 policies or
    // more and held the quiet ones (each has one or a few decisions).
    let mut granted = 0;
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut held = 0.0;
    while held == 0.0 && Instant::now() < deadline {
        granted += acquire_each_once(&app, &key).await;
        held = app
            .metric("ratekeeper_counts_held_policies")
            .await
            .expect("the gauge is exported");
    }
    assert!(held > 0.0, "no flush held quiet policies' counts");

    // With the load over, flushes carry few policies and write what was held: every grant
    // is in its minute's and in its hour's string, none lost, none twice.
    let written = eventually(Duration::from_secs(60), || {
        let app = &app;
        async move {
            granted_in_redis(app, "m").await == granted
                && granted_in_redis(app, "h").await == granted
        }
    })
    .await;
    assert!(
        written,
        "{granted} granted; in Redis: {} by minute, {} by hour",
        granted_in_redis(&app, "m").await,
        granted_in_redis(&app, "h").await
    );
    assert_eq!(
        app.metric("ratekeeper_counts_held_policies").await,
        Some(0.0)
    );
}
