//! The validated types a decision needs: names, amounts, algorithms, scopes, descriptor patterns and a policy's
//! whole specification. Input becomes one of these at the edge (the server's API, console
//! and policy files), so code inside never re-checks it.

mod algorithm;
mod amounts;
mod descriptor;
mod field_error;
mod names;
mod policy;
mod scope;
mod units;

pub use algorithm::{Algorithm, MAX_MILLIS, Millis, Param};
pub use amounts::{CheckOrPermits, MAX_CAPACITY, MAX_RATE, MIN_RATE, MaxPermits, Permits, Rate};
pub use descriptor::{
    DESCRIPTOR_KEY_PATTERN, DescriptorEntry, DescriptorPattern, MAX_DESCRIPTOR_ENTRIES,
    MAX_DESCRIPTOR_KEY_CHARS, MAX_DESCRIPTOR_VALUE_BYTES, MAX_DESCRIPTORS, MAX_REPLACES,
    SHARED_PREFIX, split_line, split_replaces,
};
pub use field_error::{FieldError, FieldErrors};
pub use names::{AppSlug, PolicyName, Username};
pub use policy::{FailureMode, Mode, PolicySpec, check_description};
pub use scope::{CallerKey, MAX_KEY_BYTES, MAX_OVERRIDES, Override, Scope};
pub use units::{DisplayUnits, DurationUnit, RateUnit};
