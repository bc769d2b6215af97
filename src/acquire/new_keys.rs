//! Keys created on another instance a moment ago. The instance that creates a key
//! announces it in Redis before showing it (`Syncer::key_created`), so a client that
//! takes its new key to any instance at once is served, not refused until that instance
//! hears the change notice and reloads its keys. A key this instance does not know costs
//! one Redis read; it is accepted only if announced after the keys were last read from
//! SQL (a key announced earlier that SQL no longer listed has been revoked since), and is
//! then kept until the next read.

use std::sync::Arc;

use super::{Acquirer, KeyRefused};
use crate::auth::digest_secret;
use crate::snapshot::KeyEntry;
use crate::store::KeyGrant;

/// How far apart two instances' clocks may be: an announcement this much older than the
/// last read of the keys still counts as newer.
const CLOCK_SKEW_MS: i64 = 1000;

/// What is announced of a key: its id, application, expiry (`-` for none) and when it was
/// announced, space-separated (none of them holds a space).
pub fn announcement(grant: &KeyGrant, announced_ms: i64) -> String {
    let expires = grant
        .expires_ms
        .map_or_else(|| "-".to_owned(), |at| at.to_string());
    format!(
        "{} {} {expires} {announced_ms}",
        grant.key_id, grant.app_slug
    )
}

/// The key and its announcement time, from `announcement`'s text.
fn announced(digest_hex: String, text: &str) -> Option<(KeyGrant, i64)> {
    let mut parts = text.split(' ');
    let (key_id, app, expires, at) = (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() {
        return None;
    }
    let expires_ms = match expires {
        "-" => None,
        at => Some(at.parse().ok()?),
    };
    let grant = KeyGrant {
        key_hash: digest_hex,
        key_id: key_id.to_owned(),
        app_slug: app.to_owned(),
        expires_ms,
        revoked_ms: None,
    };
    Some((grant, at.parse().ok()?))
}

impl Acquirer {
    /// For a key the snapshot does not hold (`client` said `Unknown`): the live key from
    /// the keys announced since the snapshot's keys were read; `Unknown` also when Redis
    /// cannot say.
    pub async fn announced_client(&self, presented: &str) -> Result<Arc<KeyEntry>, KeyRefused> {
        let digest_hex = hex::encode(digest_secret(presented));
        let text = match self.limiter.new_key(&digest_hex).await {
            Ok(Some(text)) => text,
            Ok(None) => return Err(KeyRefused::Unknown),
            Err(e) => {
                tracing::debug!(error = %e, "could not look up announced api keys");
                return Err(KeyRefused::Unknown);
            }
        };
        let Some((grant, announced_ms)) = announced(digest_hex, &text) else {
            tracing::error!("an announced api key that cannot be read was ignored");
            return Err(KeyRefused::Unknown);
        };
        if announced_ms + CLOCK_SKEW_MS < self.snapshot.keys_read_ms() {
            return Err(KeyRefused::Unknown);
        }
        self.snapshot.add_key(grant);
        self.client(presented)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grant(expires_ms: Option<i64>) -> KeyGrant {
        KeyGrant {
            key_hash: "ab".repeat(32),
            key_id: "0123456789abcdef".into(),
            app_slug: "shop".into(),
            expires_ms,
            revoked_ms: None,
        }
    }

    #[test]
    fn an_announcement_reads_back_as_the_key_it_announced() {
        for expires in [None, Some(1_700_000_000_000)] {
            let text = announcement(&grant(expires), 42);
            let (back, at) = announced("ab".repeat(32), &text).expect("reads back");
            assert_eq!(at, 42);
            assert_eq!(back.key_id, "0123456789abcdef");
            assert_eq!(back.app_slug, "shop");
            assert_eq!(back.expires_ms, expires);
        }
    }

    #[test]
    fn a_mangled_announcement_is_no_key() {
        for text in [
            "",
            "id shop - ",
            "id shop x 1",
            "id shop - 1 more",
            "id shop - soon",
        ] {
            assert!(announced(String::new(), text).is_none(), "{text:?}");
        }
    }
}
