//! A flood of acquires from callers who are denied: N tasks, K keys (task i is key
//! i mod K), for S seconds, each task acquiring as fast as it can. Prints one JSON
//! object: the calls made, the requests that reached the server (calls not answered by
//! the denial cache), the grants, and per key the same counts plus the most server
//! requests seen in any window of `--window-ms` (a per_key policy's retry time).
//!
//! ```sh
//! cargo run --release -p ratekeeper-client --example denied_flood -- \
//!     --url http://127.0.0.1:8080 --api-key rk_... --resource flood --tasks 8 --keys 4 \
//!     --seconds 10 [--cache-size 0]
//! ```

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ratekeeper_client::{AcquireOptions, Client};

struct Args {
    url: String,
    api_key: String,
    resource: String,
    tasks: usize,
    keys: usize,
    seconds: u64,
    window_ms: u64,
    cache_size: usize,
}

fn args() -> Args {
    let mut args = Args {
        url: "http://127.0.0.1:8080".into(),
        api_key: std::env::var("RATEKEEPER_API_KEY").unwrap_or_default(),
        resource: "flood".into(),
        tasks: 8,
        keys: 4,
        seconds: 10,
        window_ms: 1000,
        cache_size: ratekeeper_client::DEFAULT_DENIAL_CACHE_SIZE,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().unwrap_or_else(|| panic!("{flag} needs a value"));
        let number = || {
            value
                .parse::<u64>()
                .unwrap_or_else(|_| panic!("{flag}: {value}"))
        };
        match flag.as_str() {
            "--url" => args.url = value.clone(),
            "--api-key" => args.api_key = value.clone(),
            "--resource" => args.resource = value.clone(),
            "--tasks" => args.tasks = number() as usize,
            "--keys" => args.keys = number() as usize,
            "--seconds" => args.seconds = number(),
            "--window-ms" => args.window_ms = number(),
            "--cache-size" => args.cache_size = number() as usize,
            other => panic!("unknown flag {other}"),
        }
    }
    args
}

/// One task's counts.
#[derive(Default)]
struct Counts {
    calls: u64,
    sent: u64,
    grants: u64,
    degraded: u64,
    errors: u64,
    /// When each request that reached the server was sent.
    sent_at: Vec<Instant>,
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args = args();
    let client = Client::builder(args.url.as_str(), args.api_key.as_str())
        .denial_cache_size(args.cache_size)
        .build()
        .expect("a client");
    let resource: Arc<str> = Arc::from(args.resource.as_str());
    let end = Instant::now() + Duration::from_secs(args.seconds);
    let mut handles = Vec::new();
    for task in 0..args.tasks {
        let (client, resource) = (client.clone(), resource.clone());
        let key = format!("k{}", task % args.keys);
        handles.push(tokio::spawn(async move {
            let mut counts = Counts::default();
            while Instant::now() < end {
                let at = Instant::now();
                counts.calls += 1;
                match client
                    .acquire(&resource, AcquireOptions::new().key(key.as_str()))
                    .await
                {
                    Ok(d) => {
                        if !d.cached && !d.degraded {
                            counts.sent += 1;
                            counts.sent_at.push(at);
                        }
                        counts.grants += u64::from(d.allowed && !d.degraded);
                        counts.degraded += u64::from(d.degraded);
                    }
                    Err(_) => counts.errors += 1,
                }
                // A local answer does not wait for anything: let the other tasks run.
                tokio::task::yield_now().await;
            }
            (key, counts)
        }));
    }
    let mut per_key: std::collections::BTreeMap<String, Counts> = Default::default();
    for handle in handles {
        let (key, counts) = handle.await.expect("a task");
        let total = per_key.entry(key).or_default();
        total.calls += counts.calls;
        total.sent += counts.sent;
        total.grants += counts.grants;
        total.degraded += counts.degraded;
        total.errors += counts.errors;
        total.sent_at.extend(counts.sent_at);
    }
    let window = Duration::from_millis(args.window_ms);
    let mut keys = serde_json::Map::new();
    let (mut calls, mut sent, mut grants, mut degraded, mut errors) = (0, 0, 0, 0, 0);
    for (key, counts) in &mut per_key {
        counts.sent_at.sort();
        // The most requests in any window of `window` (sliding over the send times).
        let mut open: VecDeque<Instant> = VecDeque::new();
        let mut most = 0;
        for &at in &counts.sent_at {
            while open
                .front()
                .is_some_and(|&first| at.duration_since(first) >= window)
            {
                open.pop_front();
            }
            open.push_back(at);
            most = most.max(open.len());
        }
        calls += counts.calls;
        sent += counts.sent;
        grants += counts.grants;
        degraded += counts.degraded;
        errors += counts.errors;
        keys.insert(
            key.clone(),
            serde_json::json!({
                "calls": counts.calls,
                "server_requests": counts.sent,
                "grants": counts.grants,
                "max_server_requests_per_window": most,
            }),
        );
    }
    let report = serde_json::json!({
        "client": "rust",
        "tasks": args.tasks,
        "keys": args.keys,
        "seconds": args.seconds,
        "window_ms": args.window_ms,
        "denial_cache_size": args.cache_size,
        "calls": calls,
        "server_requests": sent,
        "grants": grants,
        "degraded": degraded,
        "errors": errors,
        "per_key": keys,
    });
    println!("{report}");
}
