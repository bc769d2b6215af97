//! The parts of an application's page that its forms share with it: the settings draft,
//! the keys' expiry in the table, and the new keys shown once after a redirect.

use serde::Deserialize;

use crate::console::error::ConsoleError;
use crate::console::session::SignedIn;
use crate::control::{AppView, CreatedKey, Revealed};
use crate::state::AppState;

/// What the settings form shows: the application's values, or what was typed.
#[derive(Debug, Default, Deserialize)]
pub struct SettingsDraft {
    #[serde(default)]
    pub slug: String,
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub description: String,
}

impl SettingsDraft {
    pub fn of(app: &AppView) -> Self {
        Self {
            slug: app.slug.clone(),
            name: app.name.clone(),
            description: app.description.clone(),
        }
    }
}

/// The page a new key of `slug` is shown on.
pub fn key_page(slug: &str) -> String {
    format!("/apps/{slug}")
}

/// The keys this session made for `slug` and has not seen yet (each shown once).
pub async fn revealed_keys(
    state: &AppState,
    signed_in: &SignedIn,
    slug: &str,
) -> Result<Vec<CreatedKey>, ConsoleError> {
    let revealed = state
        .control
        .take_revealed(&signed_in.token, &key_page(slug))
        .await?;
    Ok(revealed
        .into_iter()
        .filter_map(|r| match r {
            Revealed::ApiKey {
                id,
                label,
                key,
                expires_at,
            } => Some(CreatedKey {
                id,
                label,
                key,
                expires_at,
            }),
            Revealed::AccessToken { .. } | Revealed::WebhookSecret { .. } => None,
        })
        .collect())
}

/// The key's expiry for the table: "expires …", "expired …", or nothing.
pub fn expiry_text(expires_at: Option<&str>, now_ms: i64) -> String {
    let Some(at) = expires_at else {
        return String::new();
    };
    let shown = crate::console::format::short_time(at);
    if has_expired(Some(at), now_ms) {
        format!("expired {shown}")
    } else {
        format!("expires {shown}")
    }
}

pub fn has_expired(expires_at: Option<&str>, now_ms: i64) -> bool {
    expires_at
        .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
        .is_some_and(|t| t.timestamp_millis() <= now_ms)
}
