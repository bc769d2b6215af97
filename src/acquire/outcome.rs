//! What an acquire comes to, in the terms the API renders: a decision with its numbers,
//! a degraded grant, or a refusal before any decision.

use ratekeeper_limiter::Decided;

/// How an acquire that was answered ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Decided by Redis, or by this instance from a denial that still holds.
    Decided(Decided),
    /// Redis could not be reached, and the policy fails open or is disabled: granted
    /// without a bucket.
    Degraded {
        /// The policy's capacity, when this instance knows the policy.
        limit: Option<i64>,
        /// `false` when the policy is disabled (it would not have been limited anyway).
        enforced: bool,
    },
}

/// Why an acquire gets no decision at all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    NoSuchPolicy,
    /// The calling application is not in the policy's allowed apps.
    AppNotAllowed,
    /// More permits than the policy's capacity: never satisfiable.
    PermitsAboveMax {
        limit: i64,
    },
    /// Redis could not be reached and the policy fails closed.
    Unavailable,
    /// A per_key policy, and no key named.
    KeyRequired,
    /// A key named for a policy that is not per_key.
    KeyNotTaken,
    /// A refund of a concurrency policy: its leases are released, not refunded.
    NotRefundable,
}

/// An acquire's outcome, with the caller whose bucket it drew on (keyed policies).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Acquired {
    pub outcome: Outcome,
    pub partition: Option<super::Partition>,
}

/// What a client sending a revoked key hears (over HTTP and gRPC alike).
pub const REVOKED: &str = "this API key was revoked; use its replacement or make a new one";

/// Why a presented API key opens nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyRefused {
    /// No key has this text (never made, revoked long ago, or its application deleted).
    Unknown,
    /// The key was revoked (lately: see `REVOKED_KEYS_KEPT_MS`).
    Revoked,
    /// The key expired at this Unix ms.
    Expired { at_ms: i64 },
}
