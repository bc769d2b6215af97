//! Builds the application (store, Redis, snapshot, sync task, HTTP server, and the gRPC
//! server when configured) and runs it until told to stop; one shutdown signal drains
//! both servers, then stops every background task.

use std::net::TcpListener;
use std::sync::Arc;

use actix_web::dev::Server;
use actix_web::{App, HttpRequest, HttpResponse, HttpServer, web};
use anyhow::Context;
use secrecy::{ExposeSecret, SecretString};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::acquire::DenialCache;
use crate::acquire::{Acquirer, FlushedDenials, Protocol, TallyRegistry, run_flusher};
use crate::api;
use crate::auth::LocalBuckets;
use crate::auth::oidc::flow::OidcFlow;
use crate::config::{KeyedExpiry, RedisState, Settings};
use crate::console;
use crate::control::Control;
use crate::grpc::{GrpcFrontEnd, MakeLimiter, RateLimiter};
use crate::notify::sender::Sender;
use crate::notify::watcher::Watcher;
use crate::snapshot::Snapshot;
use crate::state::AppState;
use crate::state::SignInMethods;
use crate::store::Store;
use crate::sync::Syncer;
use crate::telemetry::Metrics;
use ratekeeper_limiter::{Limiter, listen_for_changes};

/// How long a background task's Redis call may take at least (an acquire's is shorter).
const BACKGROUND_REDIS_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(1);

/// How long calls in flight may take to finish once the gRPC server stops accepting (the
/// HTTP server's `shutdown_timeout`).
const GRPC_DRAIN: std::time::Duration = std::time::Duration::from_secs(10);

/// The parts every command needs: the migrated store and the control operations on it.
pub struct Core {
    pub store: Store,
    pub limiter: Limiter,
    pub snapshot: Arc<Snapshot>,
    pub denials: Arc<DenialCache>,
    /// Every worker's decision counts and top callers, for the flusher.
    pub tallies: Arc<TallyRegistry>,
    /// This server's Prometheus metrics.
    pub metrics: Arc<Metrics>,
    /// The limiter of the background tasks, on a connection of their own.
    pub background: Limiter,
    pub sync: Syncer,
    pub control: Control,
}

impl Core {
    pub async fn build(settings: &Settings) -> anyhow::Result<Self> {
        let metrics = Arc::new(Metrics::new());
        let store =
            Store::connect_with_timeout(&settings.database_url, settings.database_timeout())
                .await?
                .counting_into(metrics.sql_statements_of("control"));
        store.migrate().await?;
        let redis_url = settings.redis_url.expose_secret();
        if settings.redis_state == RedisState::Hash {
            tracing::info!(
                "RATEKEEPER_REDIS_STATE=hash: token buckets' state stays in their policies' \
                 hashes; set packed once no instance of a version before the state key runs"
            );
        }
        if settings.keyed_expiry == KeyedExpiry::Exact {
            tracing::info!(
                "RATEKEEPER_KEYED_EXPIRY=exact: keyed buckets' expiry is set at every \
                 write; set held once no instance of a version before held expiries runs"
            );
        }
        let holds = settings.keyed_expiry == KeyedExpiry::Held;
        let limiter = Limiter::new(redis_url, &settings.redis_prefix, settings.redis_timeout())?
            .counting_into(metrics.redis_calls_of("control"))
            .moving_state(settings.redis_state == RedisState::Packed)
            .holding_keyed_expiry(holds);
        // The background tasks' own connection (sync passes, decision counts): they must
        // not queue ahead of acquires on the multiplexed connection of the hot path, and
        // they may wait longer for an answer than an acquire may.
        let background_timeout = settings.redis_timeout().max(BACKGROUND_REDIS_TIMEOUT);
        let background = Limiter::new(redis_url, &settings.redis_prefix, background_timeout)?
            .counting_into(metrics.redis_calls_of("background"))
            .moving_state(settings.redis_state == RedisState::Packed)
            .holding_keyed_expiry(holds);
        let snapshot = Arc::new(Snapshot::default());
        let denials = Arc::new(DenialCache::new(settings.sync_interval()));
        let sync = Syncer::new(
            store
                .clone()
                .counting_into(metrics.sql_statements_of("background")),
            background.clone(),
            snapshot.clone(),
            denials.clone(),
            metrics.clone(),
            settings.sync_interval(),
        );
        let control = Control::new(store.clone(), sync.clone(), limiter.clone())
            .allowing_private_receivers(settings.webhook_allow_private);
        Ok(Self {
            store,
            limiter,
            snapshot,
            denials,
            tallies: Arc::default(),
            metrics,
            background,
            sync,
            control,
        })
    }
}

/// What each worker thread (HTTP or gRPC) makes its own acquirer from.
#[derive(Clone)]
struct AcquirerParts {
    limiter: Limiter,
    redis_url: SecretString,
    snapshot: Arc<Snapshot>,
    denials: Arc<DenialCache>,
    metrics: Arc<Metrics>,
    tallies: Arc<TallyRegistry>,
}

impl AcquirerParts {
    /// The calling thread's acquirer: a Redis connection, batcher and tally of its own;
    /// its decisions go through the one denial cache and snapshot, and the flusher adds
    /// its tally to the others.
    fn on_this_thread(&self, protocol: Protocol) -> Acquirer {
        Acquirer::new(
            self.limiter
                .for_this_thread(self.redis_url.expose_secret())
                .counting_into(self.metrics.redis_calls_of("acquire")),
            self.snapshot.clone(),
            self.denials.clone(),
            self.metrics.clone(),
            self.tallies.for_worker(),
            protocol,
        )
    }
}

pub struct Application {
    port: u16,
    server: Server,
    /// Envoy's rate limit service, when `grpc_listen` is set: its address and its task,
    /// which stops accepting (and drains) when `grpc_stop` is cancelled.
    grpc: Option<(std::net::SocketAddr, JoinHandle<anyhow::Result<()>>)>,
    grpc_stop: CancellationToken,
    sync_task: JoinHandle<()>,
    listener_task: JoinHandle<()>,
    flusher_task: JoinHandle<()>,
    /// The webhook watcher and sender.
    notify_tasks: [JoinHandle<()>; 2],
    shutdown: CancellationToken,
    store: Store,
}

impl Application {
    pub async fn build(settings: Settings) -> anyhow::Result<Self> {
        let core = Core::build(&settings).await?;
        if let Some(password) = core.control.bootstrap_admin().await? {
            announce_first_admin(&password);
        }
        // Load keys and policies before serving, so the first acquire already finds them;
        // a Redis that is down now is repaired by a later pass.
        if let Err(e) = core.sync.reconcile_once().await {
            tracing::warn!(
                error = format!("{e:#}"),
                "first sync pass failed; retrying on the interval"
            );
        }

        let listener = TcpListener::bind(&settings.listen)
            .with_context(|| format!("cannot listen on {}", settings.listen))?;
        let port = listener.local_addr()?.port();
        tracing::info!(address = %listener.local_addr()?, "ratekeeper listening");

        let shutdown = CancellationToken::new();
        // Another instance's change is in Redis before its notice is sent: denials this
        // one remembers may no longer hold (a switch to shadow mode, a raised limit), so
        // they go as soon as the notice is heard, before the reload from SQL.
        let denials = core.denials.clone();
        let listener_task = tokio::spawn(listen_for_changes(
            settings.redis_url.expose_secret().to_owned(),
            core.limiter.keys().changes_channel(),
            core.sync.instance().to_owned(),
            core.sync.wake(),
            move || denials.forget_all(),
            shutdown.clone(),
        ));
        let sync_task = tokio::spawn(
            core.sync
                .clone()
                .run(settings.sync_interval(), shutdown.clone()),
        );
        let denials_flushed = Arc::new(FlushedDenials::default());
        let flusher_task = tokio::spawn(run_flusher(
            core.tallies.clone(),
            core.background.clone(),
            core.snapshot.clone(),
            denials_flushed.clone(),
            core.metrics.counts_held.clone(),
            shutdown.clone(),
        ));
        if settings.public_url.is_none() && settings.listens_everywhere() {
            tracing::warn!(
                listen = %settings.listen,
                "RATEKEEPER_PUBLIC_URL is not set: webhook events link to {}, which no browser \
                 reaches; set it to the console's address",
                settings.public_base(port)
            );
        }
        // Webhooks: events found in what the flusher took, and sent from the outbox. Their
        // statements count as the background's, apart from the pages' and requests'.
        let background_store = core
            .store
            .clone()
            .counting_into(core.metrics.sql_statements_of("background"));
        let sender = Sender::new(
            background_store.clone(),
            settings.public_base(port),
            settings.webhook_allow_private,
        );
        let watcher = Watcher::new(
            background_store,
            core.background.clone(),
            core.snapshot.clone(),
            denials_flushed,
            sender.wake.clone(),
        );
        let notify_tasks = [
            tokio::spawn(watcher.run(shutdown.clone())),
            tokio::spawn(sender.run(shutdown.clone())),
        ];
        let oidc = match settings.oidc() {
            Some(oidc) => Some(Arc::new(OidcFlow::new(oidc, &settings.public_base(port))?)),
            None => None,
        };
        let sign_in = SignInMethods {
            password: settings.password_sign_in,
            oidc,
            oidc_name: settings.oidc_name.clone(),
        };
        let state = web::Data::new(AppState {
            control: core.control,
            limiter: core.limiter.clone(),
            store: core.store.clone(),
            metrics: core.metrics.clone(),
            console_load: Arc::new(tokio::sync::Semaphore::new(settings.console_concurrency())),
            sign_in_fallback: LocalBuckets::default(),
            sign_in,
        });
        let parts = AcquirerParts {
            limiter: core.limiter.clone(),
            redis_url: settings.redis_url.clone(),
            snapshot: core.snapshot.clone(),
            denials: core.denials.clone(),
            metrics: core.metrics.clone(),
            tallies: core.tallies.clone(),
        };
        let grpc_stop = CancellationToken::new();
        let grpc = match &settings.grpc_listen {
            Some(address) => {
                let front_end = GrpcFrontEnd::bind(address).await?;
                // Each gRPC worker thread has its own acquirer, like an HTTP worker.
                let parts = parts.clone();
                let make: MakeLimiter = Arc::new(move || {
                    let acquirer = parts.on_this_thread(Protocol::Grpc);
                    RateLimiter::new(acquirer, parts.snapshot.clone(), parts.metrics.clone())
                });
                let workers = settings.workers.unwrap_or_else(|| {
                    std::thread::available_parallelism().map_or(1, std::num::NonZero::get)
                });
                let address = front_end.address();
                Some((address, front_end.serve(make, workers, grpc_stop.clone())))
            }
            None => None,
        };
        let mut server = HttpServer::new(move || {
            // Runs on each worker thread: its acquire path gets that thread's connection.
            let acquirer = parts.on_this_thread(Protocol::Http);
            App::new()
                .app_data(state.clone())
                .app_data(web::Data::new(acquirer))
                .configure(api::routes)
                .configure(console::routes)
                .default_service(web::to(not_found))
        })
        .disable_signals()
        .shutdown_timeout(10)
        .listen(listener)?;
        if let Some(workers) = settings.workers {
            server = server.workers(workers);
        }
        Ok(Self {
            port,
            server: server.run(),
            grpc,
            grpc_stop,
            sync_task,
            listener_task,
            flusher_task,
            notify_tasks,
            shutdown,
            store: core.store,
        })
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// The port of Envoy's rate limit service (gRPC), when it is served.
    pub fn grpc_port(&self) -> Option<u16> {
        self.grpc.as_ref().map(|(address, _)| address.port())
    }

    /// Serves until `stop` resolves, then stops gracefully: no new connections, in-flight
    /// requests (HTTP and gRPC) finished, the sync task stopped, the pool closed.
    pub async fn run_until(self, stop: impl Future<Output = ()>) -> anyhow::Result<()> {
        let handle = self.server.handle();
        let server = tokio::spawn(self.server);
        stop.await;
        tracing::info!("shutting down");
        self.grpc_stop.cancel();
        handle.stop(true).await;
        server.await??;
        if let Some((_, grpc)) = self.grpc {
            // Bounded like the HTTP server's drain (`shutdown_timeout`).
            match tokio::time::timeout(GRPC_DRAIN, grpc).await {
                Ok(served) => served??,
                Err(_) => tracing::warn!("gRPC calls still in flight after the drain; stopped"),
            }
        }
        self.shutdown.cancel();
        self.sync_task.await?;
        self.listener_task.await?;
        self.flusher_task.await?;
        for task in self.notify_tasks {
            task.await?;
        }
        self.store.close().await;
        Ok(())
    }

    /// Serves until the process gets SIGINT or SIGTERM.
    pub async fn run_until_signalled(self) -> anyhow::Result<()> {
        self.run_until(shutdown_signal()).await
    }
}

/// Any path no route claims: problem+json under the APIs, an HTML page elsewhere.
async fn not_found(req: HttpRequest) -> HttpResponse {
    if api::is_api_path(req.path()) {
        api::not_found(&req)
    } else {
        console::not_found(&req).await
    }
}

fn announce_first_admin(password: &SecretString) {
    // Printed once, on stderr with the logs: the only time anyone sees it.
    eprintln!(
        "\n  No user existed, so ratekeeper created the admin user 'admin' with the password\n  \
         {}\n  It is shown this once: keep it (it stays valid; change it under your account\n  \
         in the console if you like). Lost it? `ratekeeper user create NAME --admin` makes\n  \
         another admin, who can reset it under Users.\n",
        password.expose_secret()
    );
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {}
        _ = term => {}
    }
}
