//! Sign-in attempts are limited per username and per client address, by ratekeeper's
//! own token buckets in Redis. Every attempt takes a permit before the password is
//! checked (so parallel guesses cannot slip through); a good sign-in gives the user's
//! bucket back in full. If Redis cannot be reached, sign-in still works (logged): an
//! outage of the limiter must not lock the admins out of the console.

use std::net::IpAddr;

use crate::auth::hash_secret;
use crate::limiter::{Limiter, OwnBucket};

/// Ten attempts at once for one username, then one every 30 seconds.
pub const PER_USER: OwnBucket = OwnBucket {
    max_permits: 10,
    rate: 1.0 / 30.0,
};

/// Thirty attempts at once from one address, then one every 2 seconds.
pub const PER_ADDRESS: OwnBucket = OwnBucket {
    max_permits: 30,
    rate: 0.5,
};

fn user_bucket(username: &str) -> String {
    // Hashed: a username may hold characters a key should not, and the key leaks nothing.
    format!(
        "login-user:{}",
        &hash_secret(&username.to_lowercase())[..32]
    )
}

fn address_bucket(address: Option<IpAddr>) -> String {
    let address = address.map_or_else(|| "unknown".to_owned(), |a| a.to_string());
    format!("login-addr:{}", &hash_secret(&address)[..32])
}

/// `Some(seconds to wait)` when this attempt is over the limit.
pub async fn take_attempt(
    limiter: &Limiter,
    username: &str,
    address: Option<IpAddr>,
) -> Option<i64> {
    let mut wait_ms = 0;
    for (bucket, limit) in [
        (user_bucket(username), PER_USER),
        (address_bucket(address), PER_ADDRESS),
    ] {
        match limiter.take_own_permit(&bucket, limit).await {
            Ok(Some(ms)) => wait_ms = wait_ms.max(ms),
            Ok(None) => {}
            Err(e) => tracing::warn!(error = %e, "sign-in limit not checked: redis unavailable"),
        }
    }
    (wait_ms > 0).then(|| (wait_ms + 999) / 1000)
}

/// After a good sign-in, the user's failed attempts are forgiven.
pub async fn forgive(limiter: &Limiter, username: &str) {
    if let Err(e) = limiter.forget_own_bucket(&user_bucket(username)).await {
        tracing::warn!(error = %e, "sign-in limit not reset: redis unavailable");
    }
}
