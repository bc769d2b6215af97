//! One decision, one shape: [`Decided`] is made from a script's reply and carried as it
//! is to the client's reply (the server's denial cache keeps it too, with its expiry).

use std::fmt;

use rand::Rng;

use crate::client::LimiterError;
use crate::decide::reply::Code;
use crate::domain::Algorithm;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    Granted,
    Denied,
    /// The policy is disabled: granted without touching the bucket.
    Unenforced,
    /// The policy is in shadow mode and would have denied: granted, nothing consumed.
    ShadowDenied,
    /// The policy blocks every request (mode `block`): denied by the instance, without Redis.
    Blocked,
}

impl Decision {
    /// Whether the client may go ahead.
    pub fn allowed(self) -> bool {
        !matches!(self, Self::Denied | Self::Blocked)
    }
}

/// The id of a concurrency lease: 128 random bits, shown as 32 hex digits.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct LeaseId([u8; 16]);

impl LeaseId {
    pub(crate) fn generate() -> Self {
        Self(rand::rng().random())
    }

    /// A lease id as a client sends it back; `None` if it cannot be one.
    pub fn parse(text: &str) -> Option<Self> {
        let bytes = hex::decode(text).ok()?;
        Some(Self(bytes.try_into().ok()?))
    }
}

impl fmt::Display for LeaseId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&hex::encode(self.0))
    }
}

impl fmt::Debug for LeaseId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "LeaseId({self})")
    }
}

/// A decision with everything a client is told about it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decided {
    pub decision: Decision,
    pub remaining: i64,
    pub retry_after_ms: i64,
    pub reset_after_ms: i64,
    pub limit: i64,
    pub version: i64,
    /// The lease a granted concurrency permit is held under, to be released.
    pub lease: Option<LeaseId>,
    /// The algorithm that decided (Redis' word, which a stale caller may not know).
    pub algorithm: Algorithm,
}

/// What the script answered, one variant per distinct answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AcquireOutcome {
    Decided(Decided),
    NoSuchPolicy,
    AppNotAllowed,
    PermitsAboveMax { limit: i64 },
}

/// An acquire's outcome from its reply; a reply that is not one is an error.
pub(crate) fn parse_reply(
    reply: &[i64],
    lease: Option<LeaseId>,
    algorithm: Algorithm,
) -> Result<AcquireOutcome, LimiterError> {
    let &[
        code,
        remaining,
        retry_after_ms,
        reset_after_ms,
        limit,
        version,
    ] = reply
    else {
        return Err(LimiterError::Reply(format!("{reply:?}")));
    };
    let decided = |decision| {
        AcquireOutcome::Decided(Decided {
            decision,
            remaining,
            retry_after_ms,
            reset_after_ms,
            limit,
            version,
            // A lease exists only when the script recorded one: a grant that was enforced.
            lease: if decision == Decision::Granted {
                lease
            } else {
                None
            },
            algorithm,
        })
    };
    Ok(match Code::of(code) {
        Some(Code::Granted) => decided(Decision::Granted),
        Some(Code::Denied) => decided(Decision::Denied),
        Some(Code::Unenforced) => decided(Decision::Unenforced),
        Some(Code::ShadowDenied) => decided(Decision::ShadowDenied),
        Some(Code::NoSuchPolicy) => AcquireOutcome::NoSuchPolicy,
        Some(Code::AppNotAllowed) => AcquireOutcome::AppNotAllowed,
        Some(Code::PermitsRefused) => AcquireOutcome::PermitsAboveMax { limit },
        Some(Code::WrongAlgorithm | Code::NotHeld) | None => {
            return Err(LimiterError::Reply(format!("{reply:?}")));
        }
    })
}
