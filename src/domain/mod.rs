//! Validated domain types. Input becomes one of these at the edge, so code inside never
//! re-checks it.

mod algorithm;
mod field_error;
mod names;
mod policy;
mod query_text;
mod role;
mod scope;
mod serde_words;
mod units;

pub use algorithm::{Algorithm, MAX_MILLIS, Millis, Param};
pub use field_error::{FieldError, FieldErrors};
pub use names::{AppSlug, PolicyName, Username};
pub use policy::{
    FailureMode, MAX_CAPACITY, MAX_RATE, MIN_RATE, MaxPermits, Mode, Permits, PolicySpec, Rate,
    check_description,
};
pub use query_text::non_utf8_field;
pub use role::{GlobalRole, MemberRole};
pub use scope::{CallerKey, MAX_KEY_BYTES, MAX_OVERRIDES, Override, Scope};
pub use serde_words::in_plain_words;
pub use units::{DisplayUnits, DurationUnit, RateUnit};
