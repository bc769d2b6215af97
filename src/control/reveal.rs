//! Where a secret just made (an API key, an access token, a webhook's secret) is shown, the one time it is:
//! in the reply of the request that made it (the JSON API, the CLI), or on the next
//! console page of the session that made it (post-redirect-get: the POST answers 303, and
//! the secret waits for the GET in a one-time row, see `store::flashes`, written in the
//! same transaction as the secret's hash, so a made secret is never lost unseen).

use secrecy::{ExposeSecret, SecretString};
use serde::{Deserialize, Serialize};

use crate::auth::hash_secret;
use crate::store::{StoreResult, Tx};

use super::{Control, ControlResult};

/// Where to show a secret.
#[derive(Clone, Copy)]
pub enum Reveal<'a> {
    /// In the reply (the caller shows it).
    InReply,
    /// On the next GET of `page` in the session whose cookie token is `session`.
    OnPage {
        session: &'a SecretString,
        page: &'a str,
    },
}

/// A secret waiting for its page.
#[derive(Clone, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Revealed {
    ApiKey {
        id: String,
        label: String,
        key: String,
        expires_at: Option<String>,
    },
    AccessToken {
        id: String,
        label: String,
        token: String,
    },
    WebhookSecret {
        id: String,
        url: String,
        secret: String,
    },
}

impl std::fmt::Debug for Revealed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::ApiKey { id, .. } => write!(f, "Revealed::ApiKey({id})"),
            Self::AccessToken { id, .. } => write!(f, "Revealed::AccessToken({id})"),
            Self::WebhookSecret { id, .. } => write!(f, "Revealed::WebhookSecret({id})"),
        }
    }
}

impl Reveal<'_> {
    /// Leaves `secret` for its page, in the transaction that made it (a no-op for
    /// [`Reveal::InReply`]).
    pub(super) async fn keep(&self, tx: &mut Tx, secret: &Revealed) -> StoreResult<()> {
        let Self::OnPage { session, page } = self else {
            return Ok(());
        };
        let payload = serde_json::to_string(secret).expect("a secret serialises");
        tx.insert_flash(&hash_secret(session.expose_secret()), page, &payload)
            .await
    }
}

impl Control {
    /// The secrets waiting for `page` in this session, each shown once (see
    /// `take_flashes`).
    pub async fn take_revealed(
        &self,
        session: &SecretString,
        page: &str,
    ) -> ControlResult<Vec<Revealed>> {
        self.take_flashes(session, page).await
    }
}
