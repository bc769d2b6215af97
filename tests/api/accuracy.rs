//! Exactness across instances, with acquires batched (crates/limiter/src/decide/batch.rs): three
//! instances on one database and one Redis, 64 clients hammering one token-bucket policy
//! through all three over HTTP. The test first takes every permit the bucket holds, so
//! that the count starts from an empty bucket; then, on Redis' own clock, the clients
//! were granted exactly what the bucket held at the start (less than one permit) plus
//! what the rate refilled, minus what it holds at the end: not one more (over-admission)
//! and not one less (a grant taken from the bucket that no client received). Nothing of
//! the refill can be lost to a full bucket: emptied, it takes fifty seconds to fill, far
//! longer than the load (checked), so the equation holds exactly, without a margin.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use reqwest::StatusCode;

use crate::helpers::*;

const CLIENTS: usize = 64;
const HAMMER: Duration = Duration::from_millis(2500);
// Fifty seconds of refill: far more than the load lasts.
const CAPACITY: f64 = 10_000.0;
const RATE: f64 = 200.0;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_instances_grant_exactly_what_the_bucket_holds() {
    let first = spawn_app(Db::Sqlite).await;
    let key = first
        .shop_with_policy("checkout", RATE, CAPACITY as i64)
        .await;
    let mut instances = vec![first];
    for _ in 0..2 {
        instances.push(spawn_app_with(instances[0].settings.clone()).await);
    }
    // Every instance knows the key and the policy (its first grant starts the bucket).
    for app in &instances[1..] {
        let known = eventually(Duration::from_secs(10), || async {
            app.acquire(&key, "checkout", 1).await.status() == StatusCode::OK
        })
        .await;
        assert!(known, "an instance learned of the key and the policy");
    }
    let instances = Arc::new(instances);
    let state = || {
        let instances = instances.clone();
        async move { instances[0].token_bucket_state("checkout").await.unwrap() }
    };
    // Empty the bucket: take every whole permit it holds (it only grows between the read
    // and the acquire, so the acquire is granted).
    let held = state().await.0.floor() as i64;
    expect_status(
        instances[0].acquire(&key, "checkout", held).await,
        StatusCode::OK,
    )
    .await;
    // From here on every grant is counted: the bucket as it stands, and its time.
    let (start_tokens, start_ms) = state().await;

    let key = Arc::new(key);
    let granted = Arc::new(AtomicU64::new(0));
    let denied = Arc::new(AtomicU64::new(0));
    let until = Instant::now() + HAMMER;
    let clients: Vec<_> = (0..CLIENTS)
        .map(|i| {
            let (instances, key) = (instances.clone(), key.clone());
            let (granted, denied) = (granted.clone(), denied.clone());
            tokio::spawn(async move {
                let app = &instances[i % instances.len()];
                while Instant::now() < until {
                    let reply = app.acquire(&key, "checkout", 1).await;
                    match reply.status() {
                        StatusCode::OK => granted.fetch_add(1, Ordering::Relaxed),
                        StatusCode::TOO_MANY_REQUESTS => denied.fetch_add(1, Ordering::Relaxed),
                        other => panic!("{other}: {}", reply.text().await.unwrap()),
                    };
                }
            })
        })
        .collect();
    for client in clients {
        client.await.unwrap();
    }
    let granted = granted.load(Ordering::Relaxed) as f64;
    let (end_tokens, end_ms) = state().await;
    let refilled = (end_ms - start_ms) * RATE / 1000.0;
    // The premise of an exact count: the bucket never filled up, so no refill was lost.
    assert!(
        start_tokens + refilled < CAPACITY,
        "the bucket could have filled up ({start_tokens:.3} + {refilled:.3} refilled): \
         a stall of seconds during the load"
    );
    let given = start_tokens + refilled - end_tokens;
    let asked = granted + denied.load(Ordering::Relaxed) as f64;
    // Floating-point sums over a few hundred grants: far below one permit.
    assert!(
        (granted - given).abs() < 1e-6,
        "{granted} granted, the bucket gave {given:.6} over {:.0} ms ({})",
        end_ms - start_ms,
        if granted > given {
            "over-admitted"
        } else {
            "under-admitted"
        }
    );
    assert!(
        asked > start_tokens + refilled,
        "the clients asked for more than the bucket could give: {asked} asked"
    );
}
