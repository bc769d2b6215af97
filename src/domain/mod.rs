//! Validated domain types. Input becomes one of these at the edge, so code inside never
//! re-checks it. The types a decision needs live in the decision crate; the server adds
//! roles and the checks of its own inputs.

mod places;
mod query_text;
mod role;
mod serde_words;
mod times;
mod webhook_event;

pub use places::place_in_words;
pub use query_text::non_utf8_field;
pub use ratekeeper_limiter::domain::*;
pub use role::{GlobalRole, MemberRole};
pub use serde_words::in_plain_words;
pub use times::rfc3339;
pub use webhook_event::WebhookEvent;
