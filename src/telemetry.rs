//! Logging and Prometheus metrics.

use prometheus::{
    Encoder, Histogram, HistogramOpts, IntCounter, IntCounterVec, IntGauge, Opts, Registry,
    TextEncoder,
};
use ratekeeper_limiter::BatchFigures;
use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;

mod outage_log;
pub use outage_log::{Outage, warn_outage};

/// Logs go to stderr (stdout belongs to CLI output, such as a new token).
pub fn init_tracing(json: bool) {
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new("info,sqlx=warn,actix_server=warn"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        // Colours only for a person at a terminal, not in a log file or a pipe.
        .with_ansi(std::io::stderr().is_terminal());
    // A second init (tests start many servers in one process) is not an error.
    let _ = if json {
        builder.json().try_init()
    } else {
        builder.try_init()
    };
}

/// The Prometheus metrics of one server: each instance (and each test's server) has its
/// own registry, so what one reports is what it did.
pub struct Metrics {
    pub registry: Registry,
    pub decisions: IntCounterVec,
    pub acquire_seconds: Histogram,
    /// `ShouldRateLimit` latency, every answer after the call arrived.
    pub grpc_request_seconds: Histogram,
    pub sync_passes: IntCounterVec,
    pub sync_drift: IntCounter,
    pub sync_last_success_ms: IntGauge,
    pub sync_pass_seconds: Histogram,
    /// SQL statements run by this instance (not BEGIN/COMMIT), by client: `control`
    /// (console, admin API) or `background` (sync).
    pub sql_statements: IntCounterVec,
    /// Calls to Redis by client: `acquire` (the hot path), `control` (console and admin
    /// API), `background` (sync, counts); a pipeline is one call.
    pub redis_calls: IntCounterVec,
    /// Policies whose decision counts wait for a later flush (`acquire/held_counts.rs`).
    pub counts_held: IntGauge,
    /// The acquire batchers' own figures (batch size, queue, call time).
    pub batch: BatchFigures,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let registry = Registry::new();
        let decisions = IntCounterVec::new(
            Opts::new(
                "ratekeeper_decisions_total",
                "Acquire decisions by protocol (http, grpc) and outcome: granted, denied, \
                 unenforced (policy disabled), shadow_denied (granted by a shadow policy \
                 that would have denied), degraded (granted without Redis), unavailable \
                 (refused without Redis: 503, or OVER_LIMIT on gRPC)",
            ),
            &["protocol", "outcome"],
        )
        .expect("valid metric");
        let acquire_seconds = Histogram::with_opts(
            HistogramOpts::new("ratekeeper_acquire_seconds", "Acquire latency, every answer after the API key (granted, denied, refused, unavailable)").buckets(
                vec![
                    0.0001, 0.00025, 0.0005, 0.001, 0.002, 0.004, 0.008, 0.016, 0.05, 0.1, 0.5,
                ],
            ),
        )
        .expect("valid metric");
        let grpc_request_seconds = Histogram::with_opts(
            HistogramOpts::new(
                "ratekeeper_grpc_request_seconds",
                "Envoy rate limit service (ShouldRateLimit) latency, every answer including \
                 refusals (unauthenticated, invalid argument)",
            )
            .buckets(vec![
                0.0001, 0.00025, 0.0005, 0.001, 0.002, 0.004, 0.008, 0.016, 0.05, 0.1, 0.5,
            ]),
        )
        .expect("valid metric");
        let sync_passes = IntCounterVec::new(
            Opts::new("ratekeeper_sync_passes_total", "Reconcile passes by result"),
            &["result"],
        )
        .expect("valid metric");
        let sync_drift = IntCounter::new(
            "ratekeeper_sync_drift_total",
            "Policies a reconcile pass found missing or stale in Redis and rewrote",
        )
        .expect("valid metric");
        let sync_last_success_ms = IntGauge::new(
            "ratekeeper_sync_last_success_ms",
            "Unix ms of the last successful reconcile pass (sync lag = now - this)",
        )
        .expect("valid metric");
        let sync_pass_seconds = Histogram::with_opts(HistogramOpts::new(
            "ratekeeper_sync_pass_seconds",
            "Duration of one reconcile pass",
        ))
        .expect("valid metric");
        let sql_statements = IntCounterVec::new(
            Opts::new(
                "ratekeeper_sql_statements_total",
                "SQL statements run (not counting BEGIN and COMMIT) by client: control \
                 (console and admin API) or background (sync)",
            ),
            &["client"],
        )
        .expect("valid metric");
        let redis_calls = IntCounterVec::new(
            Opts::new(
                "ratekeeper_redis_calls_total",
                "Calls to Redis (a pipeline is one) by client: acquire, control (console and \
                 admin API), background (sync and counts)",
            ),
            &["client"],
        )
        .expect("valid metric");
        let counts_held = IntGauge::new(
            "ratekeeper_counts_held_policies",
            "Policies whose decision counts wait for a later flush: quiet ones, while a flush \
             carries 1,000 policies or more (within 10 s, never past their minute)",
        )
        .expect("valid metric");
        for collector in [
            Box::new(decisions.clone()) as Box<dyn prometheus::core::Collector>,
            Box::new(acquire_seconds.clone()),
            Box::new(grpc_request_seconds.clone()),
            Box::new(sync_passes.clone()),
            Box::new(sync_drift.clone()),
            Box::new(sync_last_success_ms.clone()),
            Box::new(sync_pass_seconds.clone()),
            Box::new(sql_statements.clone()),
            Box::new(redis_calls.clone()),
            Box::new(counts_held.clone()),
        ] {
            registry
                .register(collector)
                .expect("metric registered once");
        }
        let batch = BatchFigures::registered(&registry).expect("metric registered once");
        Metrics {
            registry,
            decisions,
            acquire_seconds,
            grpc_request_seconds,
            sync_passes,
            sync_drift,
            sync_last_success_ms,
            sync_pass_seconds,
            sql_statements,
            redis_calls,
            counts_held,
            batch,
        }
    }

    /// The counter of one SQL client's statements.
    pub fn sql_statements_of(&self, client: &str) -> IntCounter {
        self.sql_statements.with_label_values(&[client])
    }

    /// The counter of one Redis client's calls.
    pub fn redis_calls_of(&self, client: &str) -> IntCounter {
        self.redis_calls.with_label_values(&[client])
    }

    /// The Prometheus text exposition of every metric.
    pub fn render(&self) -> String {
        let mut out = Vec::new();
        TextEncoder::new()
            .encode(&self.registry.gather(), &mut out)
            .expect("text encoding into a Vec cannot fail");
        String::from_utf8(out).expect("prometheus text is UTF-8")
    }
}
