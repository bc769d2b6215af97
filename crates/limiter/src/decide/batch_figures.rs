//! The batcher's own figures, for the server to export as metrics: how many acquires go
//! in one call, how many wait for their turn, and how long each call to Redis takes.

use prometheus::{Histogram, HistogramOpts, IntGauge, Registry};

#[derive(Clone)]
pub struct BatchFigures {
    /// Acquires per call (one script call, or one per slot on a cluster).
    pub size: Histogram,
    /// Acquires waiting for a call, over every worker's batcher, as each saw its queue
    /// when it last formed a batch.
    pub queued: IntGauge,
    /// Seconds of one script call, from sending to its reply.
    pub call_seconds: Histogram,
}

impl BatchFigures {
    /// Figures kept but not exported (tests, tools).
    pub fn unregistered() -> Self {
        Self::new().expect("valid metrics")
    }

    /// Figures registered in `registry` as `ratekeeper_batch_size`,
    /// `ratekeeper_batch_queued` and `ratekeeper_batch_call_seconds`.
    pub fn registered(registry: &Registry) -> prometheus::Result<Self> {
        let figures = Self::new()?;
        registry.register(Box::new(figures.size.clone()))?;
        registry.register(Box::new(figures.queued.clone()))?;
        registry.register(Box::new(figures.call_seconds.clone()))?;
        Ok(figures)
    }

    fn new() -> prometheus::Result<Self> {
        Ok(Self {
            size: Histogram::with_opts(
                HistogramOpts::new(
                    "ratekeeper_batch_size",
                    "Acquires decided by one call of the batcher to Redis",
                )
                .buckets(vec![1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0]),
            )?,
            queued: IntGauge::new(
                "ratekeeper_batch_queued",
                "Acquires waiting in the batchers' queues for their call to Redis, as each batcher saw its queue when it last formed a batch",
            )?,
            call_seconds: Histogram::with_opts(
                HistogramOpts::new(
                    "ratekeeper_batch_call_seconds",
                    "Duration of one call of the batcher to Redis, sent to answered",
                )
                .buckets(vec![
                    0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.002, 0.004, 0.008, 0.016, 0.05, 0.1,
                ]),
            )?,
        })
    }
}
