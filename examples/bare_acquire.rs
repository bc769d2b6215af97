//! The reference points bench/acquire.sh measures ratekeeper against, served in the same
//! run on the same machine, with the same HTTP stack (actix-web), Redis client and script:
//!
//! - `POST /noop`: parses the acquire body as ratekeeper's API does and answers a fixed
//!   reply; nothing else. The ceiling of the HTTP layer for this request.
//! - `POST /v1/acquire`: the same, plus one EVALSHA of ratekeeper's own token-bucket script
//!   (`lua/token_bucket.lua`) on one policy (its hash and state key, with its configuration
//!   passed as the server passes it), and the reply built from its answer. The bare
//!   one-script-per-request handler: no API key, no snapshot, no counts, no headers.
//!
//! - `POST /v1/acquire/batched`: the same, but the decision goes through the limiter
//!   crate's batcher (`Batcher`, on a global token bucket of its own with the same
//!   configuration), as ratekeeper's acquires do: the acquires that arrive while a call is in
//!   flight go together as one call of the batch script. What ratekeeper's decision costs
//!   without the platform around it (API key, snapshot, counts, headers).
//!
//! Each HTTP worker has its own Redis connection, and its own batcher, as ratekeeper's do.
//!
//!     cargo run --release --example bare_acquire -- 127.0.0.1:9000 redis://127.0.0.1:6379 'rbare:{p}' bench
//!
//! Arguments: the address to listen on, the Redis URL, the policy hash to decide on (it is
//! written at start with a limit never reached), and the application slug it allows.

#![forbid(unsafe_code)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use actix_web::{App, HttpResponse, HttpServer, web};
use ratekeeper_limiter::domain::{Algorithm, AppSlug, Permits, PolicyName};
use ratekeeper_limiter::scripts::TOKEN_BUCKET;
use ratekeeper_limiter::{AcquireOutcome, Batcher, Limiter, PolicyConfig};
use redis::aio::ConnectionManager;
use serde::{Deserialize, Serialize};

#[path = "shared/never_reached.rs"]
mod never_reached;
use never_reached::{NEVER_REACHED_PASSED, never_reached_policy};
#[path = "shared/never_reached_config.rs"]
mod never_reached_config;
use never_reached_config::never_reached;

/// The batched route's keys: outside ratekeeper's prefix, whose reconcile deletes the
/// policies SQL does not have.
const BATCHED_PREFIX: &str = "rbatched";

/// The acquire body, read as strictly as ratekeeper reads it.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AcquireBody {
    resource: String,
    #[serde(default)]
    permits: Option<i64>,
    #[serde(default)]
    key: Option<String>,
}

#[derive(Serialize)]
struct Reply {
    allowed: bool,
    remaining: i64,
    limit: i64,
    retry_after_ms: i64,
    reset_after_ms: i64,
    policy_version: i64,
}

impl Reply {
    /// 200 when granted, else 429, with the reply as the body.
    fn respond(self) -> HttpResponse {
        if self.allowed {
            HttpResponse::Ok().json(self)
        } else {
            HttpResponse::TooManyRequests().json(self)
        }
    }
}

/// What every worker shares: the policy hash and the app, and the connections to pick from.
struct Shared {
    policy_key: String,
    /// Its token bucket's state key.
    state_key: String,
    app: String,
    connections: Vec<ConnectionManager>,
    next: AtomicUsize,
    /// The batched route's policy, as the batcher takes it, and what it decides with.
    batched: PolicyConfig,
    app_slug: AppSlug,
    limiter: Limiter,
    redis_url: String,
}

async fn noop(body: web::Json<AcquireBody>) -> HttpResponse {
    let body = body.into_inner();
    // Touch the fields, so that reading them is not optimised away.
    let permits = body.permits.unwrap_or(1) + body.key.map_or(0, |k| k.len() as i64);
    HttpResponse::Ok().json(Reply {
        allowed: !body.resource.is_empty(),
        remaining: permits,
        limit: 0,
        retry_after_ms: 0,
        reset_after_ms: 0,
        policy_version: 0,
    })
}

async fn acquire(
    body: web::Json<AcquireBody>,
    shared: web::Data<Arc<Shared>>,
    conn: web::Data<ConnectionManager>,
) -> HttpResponse {
    let permits = body.permits.unwrap_or(1);
    // A handle on this worker's connection (a clone shares it).
    let mut conn = conn.get_ref().clone();
    let reply: Result<Vec<i64>, _> = TOKEN_BUCKET
        .key(&shared.policy_key)
        .key(&shared.state_key)
        .arg(permits)
        .arg(&shared.app)
        .arg(&NEVER_REACHED_PASSED)
        .invoke_async(&mut conn)
        .await;
    match reply.as_deref() {
        Ok(
            &[
                code,
                remaining,
                retry_after_ms,
                reset_after_ms,
                limit,
                policy_version,
            ],
        ) => {
            let reply = Reply {
                allowed: code == 1,
                remaining,
                limit,
                retry_after_ms,
                reset_after_ms,
                policy_version,
            };
            reply.respond()
        }
        _ => HttpResponse::ServiceUnavailable().finish(),
    }
}

async fn acquire_batched(
    body: web::Json<AcquireBody>,
    shared: web::Data<Arc<Shared>>,
    batcher: web::Data<Batcher>,
) -> HttpResponse {
    let Ok(permits) = Permits::parse(body.permits.unwrap_or(1)) else {
        return HttpResponse::BadRequest().finish();
    };
    let outcome = batcher
        .acquire(
            &shared.batched.name,
            Algorithm::TokenBucket,
            permits,
            &shared.app_slug,
            Some(&shared.batched),
        )
        .await;
    match outcome {
        Ok(AcquireOutcome::Decided(decided)) => {
            let reply = Reply {
                allowed: decided.decision.allowed(),
                remaining: decided.remaining,
                limit: decided.limit,
                retry_after_ms: decided.retry_after_ms,
                reset_after_ms: decided.reset_after_ms,
                policy_version: decided.version,
            };
            reply.respond()
        }
        _ => HttpResponse::ServiceUnavailable().finish(),
    }
}

#[actix_web::main]
async fn main() -> std::io::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [listen, redis_url, policy_key, app] = args.as_slice() else {
        eprintln!("usage: bare_acquire LISTEN_ADDR REDIS_URL POLICY_KEY APP");
        std::process::exit(2);
    };
    let client = redis::Client::open(redis_url.as_str()).map_err(std::io::Error::other)?;
    let workers = std::thread::available_parallelism().map_or(2, |n| n.get());
    let mut connections = Vec::with_capacity(workers);
    for _ in 0..workers {
        connections.push(
            ConnectionManager::new(client.clone())
                .await
                .map_err(std::io::Error::other)?,
        );
    }
    let mut first = connections[0].clone();
    let apps = format!(",{app},");
    redis::cmd("HSET")
        .arg(policy_key)
        .arg(&never_reached_policy(&apps))
        .query_async::<()>(&mut first)
        .await
        .map_err(std::io::Error::other)?;
    let limiter = Limiter::new(redis_url, BATCHED_PREFIX, Duration::from_secs(5))
        .map_err(std::io::Error::other)?;
    let name = PolicyName::parse("batched").map_err(|e| std::io::Error::other(format!("{e:?}")))?;
    let batched = never_reached(name, app);
    limiter
        .push_policy(&batched)
        .await
        .map_err(std::io::Error::other)?;
    let shared = Arc::new(Shared {
        policy_key: policy_key.clone(),
        state_key: format!("{policy_key}:tb"),
        app: app.clone(),
        connections,
        next: AtomicUsize::new(0),
        app_slug: AppSlug::parse(app).map_err(|e| std::io::Error::other(format!("{e:?}")))?,
        batched,
        limiter,
        redis_url: redis_url.clone(),
    });
    println!("bare_acquire listening on {listen}");
    HttpServer::new(move || {
        let i = shared.next.fetch_add(1, Ordering::Relaxed) % shared.connections.len();
        // The factory runs on each worker's own thread: its batcher's connection is that
        // thread's, as a ratekeeper worker's is.
        let batcher = Batcher::new(shared.limiter.for_this_thread(&shared.redis_url));
        App::new()
            .app_data(web::Data::new(shared.clone()))
            .app_data(web::Data::new(shared.connections[i].clone()))
            .app_data(web::Data::new(batcher))
            .route("/noop", web::post().to(noop))
            .route("/v1/acquire", web::post().to(acquire))
            .route("/v1/acquire/batched", web::post().to(acquire_batched))
    })
    .workers(workers)
    .bind(listen.as_str())?
    .run()
    .await
}
