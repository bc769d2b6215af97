//! Whose bucket an acquire draws on: the policy's one bucket (global), or the caller's own
//! (per_app: the calling application; per_key: the key the client names).

use crate::domain::{AppSlug, CallerKey, Scope};
use crate::snapshot::PolicyEntry;

use super::outcome::Refusal;

/// The caller whose bucket a keyed policy's acquire draws on; also the `pk` of the
/// `RateLimit` header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Partition {
    App(AppSlug),
    Key(CallerKey),
}

impl Partition {
    pub fn as_str(&self) -> &str {
        match self {
            Self::App(app) => app.as_str(),
            Self::Key(key) => key.as_str(),
        }
    }
}

/// The partition of an acquire by `app` naming `key` on `policy` (`None`: a policy this
/// instance does not know, decided as global by Redis), or `None` for a global policy.
/// A per_key policy needs a key, the others refuse one.
pub fn partition_of(
    policy: Option<&PolicyEntry>,
    app: &AppSlug,
    key: Option<CallerKey>,
) -> Result<Option<Partition>, Refusal> {
    match (policy.map(PolicyEntry::scope), key) {
        (Some(Scope::PerKey), Some(key)) => Ok(Some(Partition::Key(key))),
        (Some(Scope::PerKey), None) => Err(Refusal::KeyRequired),
        (Some(Scope::PerApp), None) => Ok(Some(Partition::App(app.clone()))),
        (Some(Scope::PerApp | Scope::Global), Some(_)) => Err(Refusal::KeyNotTaken),
        // Not known here yet: only a per_key policy takes a key, and which policies are
        // per_key this instance cannot tell; without a key, Redis decides it as global.
        (None, Some(_)) => Err(Refusal::NoSuchPolicy),
        (Some(Scope::Global) | None, None) => Ok(None),
    }
}
