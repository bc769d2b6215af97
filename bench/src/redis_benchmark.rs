//! Scenario e: redis-benchmark running the token bucket's script on one bucket, straight
//! against the private Redis. The script, the policy hash and the call's arguments all come
//! from the limiter crate (the script as the server loads it, the hash as the sync writes
//! it, the call as the batcher sends a lone acquire): the protocol is written once.

#[path = "../../examples/shared/never_reached_config.rs"]
mod never_reached_config;
use never_reached_config::never_reached;

use std::time::Duration;

use anyhow::{Context, Result, bail};
use ratekeeper_limiter::domain::{Algorithm, AppSlug, PolicyName};
use ratekeeper_limiter::functions::LIBRARY;
use ratekeeper_limiter::{AcquireCall, Code, Limiter};

use crate::admin_api::APP;
use crate::knobs::Knobs;
use crate::private_redis::PrivateRedis;
use crate::procs;

/// Its bucket lives outside the server's prefix: the server's reconcile deletes every
/// `bench:{...}` key that has no policy in SQL, and would delete this one.
const PREFIX: &str = "rbench";
const POLICY: &str = "rb";

/// What it measured, and its raw CSV.
pub struct RedisBenchmark {
    pub rps: Option<f64>,
    pub p50_ms: Option<f64>,
    pub p99_ms: Option<f64>,
    pub csv: String,
}

pub async fn run(knobs: &Knobs, redis: &PrivateRedis) -> Result<RedisBenchmark> {
    crate::log!(
        "redis-benchmark: FCALL of token_bucket.lua, {} connections, {} requests",
        knobs.connections,
        knobs.redis_requests
    );
    let limiter = Limiter::new(&redis.url(), PREFIX, Duration::from_secs(5))?;
    let name = PolicyName::parse(POLICY).map_err(|e| anyhow::anyhow!("{e:?}"))?;
    let app = AppSlug::parse(APP).map_err(|e| anyhow::anyhow!("{e:?}"))?;
    limiter
        .push_policy(&never_reached(name.clone(), APP))
        .await
        .context("writing redis-benchmark's policy")?;
    let mut conn = redis.conn();
    LIBRARY
        .load_cmd()
        .query_async::<()>(&mut conn)
        .await
        .context("FUNCTION LOAD of the acquire scripts")?;
    let config = never_reached(name.clone(), APP);
    let call = AcquireCall::global(
        &limiter,
        &name,
        Algorithm::TokenBucket,
        1,
        &app,
        Some(&config),
    )
    .alone_cmd();
    let check = granted(&call, &mut conn).await;
    if !check {
        crate::log!("WARNING: the token bucket's call on {PREFIX}'s policy is not granted");
    }
    // The call's words as redis-benchmark takes them on its command line.
    let words = call
        .args_iter()
        .map(|arg| match arg {
            redis::Arg::Simple(bytes) => Ok(String::from_utf8_lossy(bytes).into_owned()),
            _ => bail!("a script call's word that is not plain bytes"),
        })
        .collect::<Result<Vec<_>>>()?;
    let mut command = procs::command("redis-benchmark", ["-h", "127.0.0.1", "-p"]);
    command
        .arg(redis.port.to_string())
        .arg("-c")
        .arg(knobs.connections.to_string())
        .arg("-n")
        .arg(knobs.redis_requests.to_string())
        .arg("--csv")
        .args(&words);
    let out = procs::run(command, Duration::from_secs(600)).await?;
    let mut result = RedisBenchmark {
        rps: None,
        p50_ms: None,
        p99_ms: None,
        csv: out.stdout.clone(),
    };
    if out.success {
        // "test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms","p99_latency_ms",...
        if let Some(line) = out.stdout.lines().rfind(|l| l.starts_with("\"FCALL")) {
            let fields: Vec<&str> = line.trim().trim_matches('"').split("\",\"").collect();
            let field = |i: usize| fields.get(i).and_then(|f| f.parse::<f64>().ok());
            (result.rps, result.p50_ms, result.p99_ms) = (field(1), field(4), field(6));
        }
    } else {
        crate::log!("WARNING: redis-benchmark failed: {}", out.tail());
    }
    if !granted(&call, &mut conn).await {
        crate::log!("WARNING: after redis-benchmark, the token bucket's call is not granted");
    }
    Ok(result)
}

/// Whether the call answers "granted".
async fn granted(call: &redis::Cmd, conn: &mut redis::aio::MultiplexedConnection) -> bool {
    call.query_async::<Vec<i64>>(conn)
        .await
        .is_ok_and(|reply| reply.first() == Some(&Code::Granted.number()))
}
