//! The events a webhook can listen for, as the JSON API and the payloads name them.

use serde::{Deserialize, Serialize};

#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    utoipa::ToSchema,
)]
pub enum WebhookEvent {
    /// A policy of the application started denying: its first denial after a quiet period.
    #[serde(rename = "policy.denying")]
    Denying,
    /// A policy that was denying has denied nothing for its quiet period.
    #[serde(rename = "policy.recovered")]
    Recovered,
    /// A policy's remaining permits fell below the webhook's threshold.
    #[serde(rename = "policy.near_limit")]
    NearLimit,
    /// A policy of the application was changed (any audited change).
    #[serde(rename = "policy.changed")]
    Changed,
}

impl WebhookEvent {
    pub const ALL: [Self; 4] = [
        Self::Denying,
        Self::Recovered,
        Self::NearLimit,
        Self::Changed,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Denying => "policy.denying",
            Self::Recovered => "policy.recovered",
            Self::NearLimit => "policy.near_limit",
            Self::Changed => "policy.changed",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|e| e.as_str() == text)
    }

    /// The list as stored: sorted, without repeats, comma-separated.
    pub fn join(events: &[Self]) -> String {
        let mut events = events.to_vec();
        events.sort();
        events.dedup();
        events
            .iter()
            .map(|e| e.as_str())
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Whether a stored list (see [`Self::join`]) holds this event.
    pub fn in_list(self, stored: &str) -> bool {
        stored.split(',').any(|e| e == self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_list_is_stored_sorted_without_repeats_and_read_back() {
        let stored = WebhookEvent::join(&[
            WebhookEvent::Changed,
            WebhookEvent::Denying,
            WebhookEvent::Changed,
        ]);
        assert_eq!(stored, "policy.denying,policy.changed");
        assert!(WebhookEvent::Denying.in_list(&stored) && WebhookEvent::Changed.in_list(&stored));
        assert!(!WebhookEvent::Recovered.in_list(&stored));
        assert_eq!(WebhookEvent::parse("policy.denied"), None);
    }
}
