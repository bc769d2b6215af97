//! Validated domain types. Input becomes one of these at the edge, so code inside never
//! re-checks it.

mod algorithm;
mod field_error;
mod names;
mod policy;
mod role;
mod scope;

pub use algorithm::{Algorithm, Millis, Param};
pub use field_error::{FieldError, FieldErrors};
pub use names::{AppSlug, PolicyName, Username};
pub use policy::{FailureMode, MaxPermits, Permits, PolicySpec, Rate, check_description};
pub use role::{GlobalRole, MemberRole};
pub use scope::{CallerKey, MAX_KEY_BYTES, MAX_OVERRIDES, Override, Scope};
