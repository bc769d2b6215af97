//! Warnings of an outage the server expects (the database or Redis unreachable or timing
//! out): one line each, with the cause chain (`{:#}`), never a backtrace, and at most one
//! a second per service, saying how many were left out meanwhile. During an outage every
//! console page and admin call fails the same way; a line per request (and, with
//! `RUST_BACKTRACE` set, the backtrace anyhow captured) would bury everything else.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

/// A service whose outage is expected and answered (503), not a bug.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outage {
    Database,
    Redis,
}

impl Outage {
    fn index(self) -> usize {
        match self {
            Self::Database => 0,
            Self::Redis => 1,
        }
    }
}

/// The last line's time (Unix ms) and the lines left out since, per service.
static LAST_MS: [AtomicI64; 2] = [AtomicI64::new(i64::MIN), AtomicI64::new(i64::MIN)];
static LEFT_OUT: [AtomicU64; 2] = [AtomicU64::new(0), AtomicU64::new(0)];

/// How often a line per service is written at most.
const EVERY_MS: i64 = 1_000;

/// Logs that `what` failed for want of `outage`, caused by `cause`.
pub fn warn_outage(outage: Outage, what: &str, cause: &anyhow::Error) {
    let i = outage.index();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
    let last = LAST_MS[i].load(Ordering::Relaxed);
    let due = now.saturating_sub(last) >= EVERY_MS
        && LAST_MS[i]
            .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok();
    if !due {
        LEFT_OUT[i].fetch_add(1, Ordering::Relaxed);
        return;
    }
    let left_out = LEFT_OUT[i].swap(0, Ordering::Relaxed);
    let error = format!("{cause:#}");
    match outage {
        Outage::Database => {
            tracing::warn!(error, left_out, "{what}: the database is unavailable")
        }
        Outage::Redis => tracing::warn!(error, left_out, "{what}: redis is unavailable"),
    }
}
