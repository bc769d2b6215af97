//! Sign-in attempts are limited per (username, client address) pair and per client
//! address, by ratekeeper's own token buckets in Redis. Every attempt takes a permit
//! before the password is checked (so parallel guesses cannot slip through); a good
//! sign-in gives the pair's bucket back in full.
//!
//! Not per username alone: then anyone who knows a name could keep its owner locked out
//! from everywhere with one bad try every 30 s. Per pair, a guesser elsewhere exhausts
//! only their own pair; a guess spread over many addresses is still slowed at each one.
//! If Redis cannot be reached, the same buckets are counted in this process instead
//! (`fallback`, logged): an outage of the limiter must neither lock the admins
//! out of the console nor leave guessing unlimited. Each instance then counts on its own,
//! so N instances allow up to N times the attempts for as long as Redis is away.

use std::net::IpAddr;
use std::time::Instant;

use ratekeeper_limiter::Limiter;

use super::fallback::LocalBuckets;
use super::own_buckets::{OwnBucket, forget_own_bucket, take_own_permit};
use crate::auth::hash_secret;

/// Ten attempts at once for one username from one address, then one every 30 seconds.
pub const PER_USER_AND_ADDRESS: OwnBucket = OwnBucket {
    max_permits: 10,
    rate: 1.0 / 30.0,
};

/// Thirty attempts at once from one address, whatever the usernames, then one every 2 s.
pub const PER_ADDRESS: OwnBucket = OwnBucket {
    max_permits: 30,
    rate: 0.5,
};

fn address_text(address: Option<IpAddr>) -> String {
    address.map_or_else(|| "unknown".to_owned(), |a| a.to_string())
}

fn pair_bucket(username: &str, address: Option<IpAddr>) -> String {
    // Hashed: a username may hold characters a key should not, and the key leaks nothing.
    let pair = format!("{}\n{}", username.to_lowercase(), address_text(address));
    format!("login-pair:{}", &hash_secret(&pair)[..32])
}

fn address_bucket(address: Option<IpAddr>) -> String {
    format!("login-addr:{}", &hash_secret(&address_text(address))[..32])
}

/// `Some(seconds to wait)` when this attempt is over the limit.
pub async fn take_attempt(
    limiter: &Limiter,
    fallback: &LocalBuckets,
    username: &str,
    address: Option<IpAddr>,
) -> Option<i64> {
    let mut wait_ms = 0;
    for (bucket, limit) in [
        (pair_bucket(username, address), PER_USER_AND_ADDRESS),
        (address_bucket(address), PER_ADDRESS),
    ] {
        let wait = match take_own_permit(limiter, &bucket, limit).await {
            Ok(wait) => wait,
            Err(e) => {
                tracing::warn!(error = %e, "sign-in limit counted in this process: redis unavailable");
                fallback.take(&bucket, limit, Instant::now())
            }
        };
        wait_ms = wait_ms.max(wait.unwrap_or(0));
    }
    (wait_ms > 0).then(|| (wait_ms + 999) / 1000)
}

/// After a good sign-in, the failed attempts of this user from this address are forgiven.
pub async fn forgive(
    limiter: &Limiter,
    fallback: &LocalBuckets,
    username: &str,
    address: Option<IpAddr>,
) {
    let bucket = pair_bucket(username, address);
    fallback.forget(&bucket);
    if let Err(e) = forget_own_bucket(limiter, &bucket).await {
        tracing::warn!(error = %e, "sign-in limit not reset: redis unavailable");
    }
}
