//! The bodies clients send. Every field is optional here so that a missing or mistyped
//! field becomes a 422 naming it, never a generic parse failure; unknown fields are
//! refused for the same reason (a typo must not be silently ignored).

use serde::{Deserialize, Deserializer};
use utoipa::ToSchema;

use crate::domain::{DisplayUnits, FieldError, FieldErrors};

#[derive(Debug, Default, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AppInput {
    #[serde(default, deserialize_with = "not_null")]
    #[schema(nullable = false, pattern = "^[a-z0-9][a-z0-9-]{1,62}$")]
    pub slug: Option<String>,
    #[serde(default, deserialize_with = "not_null")]
    #[schema(
        nullable = false,
        min_length = 1,
        max_length = 200,
        pattern = "^[^\\u0000-\\u001f\\u007f-\\u009f]*[^\\s\\u0000-\\u001f\\u007f-\\u009f][^\\u0000-\\u001f\\u007f-\\u009f]*$"
    )]
    pub name: Option<String>,
    #[serde(default, deserialize_with = "not_null")]
    #[schema(
        nullable = false,
        max_length = 1000,
        pattern = "^[^\\u0000-\\u0008\\u000b\\u000c\\u000e-\\u001f\\u007f-\\u009f]*$"
    )]
    pub description: Option<String>,
}

#[derive(Debug, Default, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct KeyInput {
    #[serde(default, deserialize_with = "not_null")]
    #[schema(
        nullable = false,
        min_length = 1,
        max_length = 200,
        pattern = "^[^\\u0000-\\u001f\\u007f-\\u009f]*[^\\s\\u0000-\\u001f\\u007f-\\u009f][^\\u0000-\\u001f\\u007f-\\u009f]*$"
    )]
    pub label: Option<String>,
    /// When the key stops working by itself (RFC 3339 date-time, in the future); never
    /// when left out.
    #[serde(default, deserialize_with = "not_null")]
    #[schema(nullable = false, format = DateTime)]
    pub expires_at: Option<String>,
}

/// A rotation: a new key with the old one's label, the old one kept working for a while.
#[derive(Debug, Default, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RotateInput {
    /// Until when the old key keeps working: an RFC 3339 date-time, or `"now"`; 24 hours
    /// from now when left out. An old key that expires sooner keeps its expiry.
    #[serde(default, deserialize_with = "not_null")]
    #[schema(nullable = false)]
    pub old_key_expires_at: Option<String>,
    /// When the new key stops working by itself (RFC 3339, in the future); never when
    /// left out.
    #[serde(default, deserialize_with = "not_null")]
    #[schema(nullable = false, format = DateTime)]
    pub expires_at: Option<String>,
}

/// A personal access token to make for oneself.
#[derive(Debug, Default, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TokenInput {
    #[serde(default, deserialize_with = "not_null")]
    #[schema(
        nullable = false,
        min_length = 1,
        max_length = 200,
        pattern = "^[^\\u0000-\\u001f\\u007f-\\u009f]*[^\\s\\u0000-\\u001f\\u007f-\\u009f][^\\u0000-\\u001f\\u007f-\\u009f]*$"
    )]
    pub label: Option<String>,
    /// When the token stops working by itself (RFC 3339 date-time, in the future); never
    /// when left out.
    #[serde(default, deserialize_with = "not_null")]
    #[schema(nullable = false, format = DateTime)]
    pub expires_at: Option<String>,
    /// A read-only token views what its owner may view and changes nothing, whatever the
    /// owner's role; false when left out.
    #[serde(default)]
    pub read_only: bool,
}

#[derive(Debug, Default, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct MemberInput {
    /// `owner` or `viewer`.
    #[serde(default, deserialize_with = "not_null")]
    #[schema(value_type = crate::domain::MemberRole)]
    pub role: Option<String>,
}

/// A policy to create, or any subset of its fields to change.
#[derive(Debug, Default, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PolicyInput {
    #[serde(default, deserialize_with = "not_null")]
    #[schema(nullable = false, pattern = "^[A-Za-z0-9][A-Za-z0-9._:/-]{0,127}$")]
    pub name: Option<String>,
    #[serde(default, deserialize_with = "not_null")]
    #[schema(nullable = false, pattern = "^[a-z0-9][a-z0-9-]{1,62}$")]
    pub owner_app: Option<String>,
    /// `token_bucket`, `fixed_window`, `sliding_log`, `sliding_window`, `concurrency` or
    /// `gcra`. Each takes `max_permits` and its own parameters below, and refuses the rest.
    #[serde(default, deserialize_with = "not_null")]
    #[schema(value_type = crate::domain::Algorithm)]
    pub algorithm: Option<String>,
    /// Permits per second; fractional allowed (0.2 = 12 per minute). `token_bucket`, `gcra`.
    #[serde(default, deserialize_with = "not_null")]
    #[schema(nullable = false, exclusive_minimum = 0.0, maximum = 1000000.0)]
    pub rate: Option<f64>,
    #[serde(default, deserialize_with = "not_null")]
    #[schema(nullable = false, minimum = 1, maximum = 1000000000)]
    pub max_permits: Option<i64>,
    /// The window, in ms: `fixed_window`, `sliding_log`, `sliding_window`.
    #[serde(default, deserialize_with = "not_null")]
    #[schema(nullable = false, minimum = 1, maximum = 86400000)]
    pub window_ms: Option<i64>,
    /// How long a lease lives at most, in ms: `concurrency`.
    #[serde(default, deserialize_with = "not_null")]
    #[schema(nullable = false, minimum = 1, maximum = 86400000)]
    pub lease_ttl_ms: Option<i64>,
    #[serde(default, deserialize_with = "not_null")]
    #[schema(schema_with = slug_list)]
    pub allowed_apps: Option<Vec<String>>,
    /// `closed` (default) or `open`.
    #[serde(default, deserialize_with = "not_null")]
    #[schema(value_type = crate::domain::FailureMode)]
    pub failure_mode: Option<String>,
    #[serde(default, deserialize_with = "not_null")]
    #[schema(nullable = false)]
    pub enabled: Option<bool>,
    /// `enforce` (default) or `shadow`: decide and count as if enforced, but grant every
    /// request (the reply says `"shadow_denied": true` where it would have denied).
    #[serde(default, deserialize_with = "not_null")]
    #[schema(value_type = crate::domain::Mode)]
    pub mode: Option<String>,
    #[serde(default, deserialize_with = "not_null")]
    #[schema(
        nullable = false,
        max_length = 1000,
        pattern = "^[^\\u0000-\\u0008\\u000b\\u000c\\u000e-\\u001f\\u007f-\\u009f]*$"
    )]
    pub description: Option<String>,
    /// `global` (default: one bucket for all), `per_app` (one per calling application) or
    /// `per_key` (one per key the client names in each acquire). A change of scope starts
    /// every bucket afresh.
    #[serde(default, deserialize_with = "not_null")]
    #[schema(value_type = crate::domain::Scope)]
    pub scope: Option<String>,
    /// Other limits for some callers of a keyed policy (at most 1,000); replaces the
    /// list as a whole on a change.
    #[serde(default, deserialize_with = "not_null")]
    #[schema(nullable = false, max_items = 1000)]
    pub overrides: Option<Vec<OverrideInput>>,
    /// Envoy-style descriptor patterns that find this policy from a gateway's descriptor
    /// (at most 16, each unique among all policies); replaces the list as a whole on a
    /// change. A bare entry (`user_id`) needs the `per_key` scope, and a `per_key`
    /// policy's pattern needs one: the bare entries' values, joined with `|`, are the key.
    #[serde(default, deserialize_with = "not_null")]
    #[schema(nullable = false, max_items = 16)]
    pub descriptors: Option<Vec<DescriptorInput>>,
    /// On a change: the version the client last saw; a stale one is refused with 409.
    #[serde(default, deserialize_with = "not_null")]
    #[schema(nullable = false, minimum = 1)]
    pub version: Option<i64>,
    /// The units the console's form entered the limits in (not part of the JSON API:
    /// there rates are per second and durations in ms); `None` keeps the current ones.
    #[serde(skip)]
    pub units: Option<DisplayUnits>,
    /// Fields its source could not read (a form's "ten" for a number), under this
    /// input's field names: reported with the errors of the other fields, and nothing is
    /// saved (not part of the JSON API, whose body either parses or is refused).
    #[serde(skip)]
    pub unreadable: FieldErrors,
}

/// A rollback: the version to restore, and the version the client last saw (a stale one
/// is refused with 409, as for any change).
#[derive(Debug, Default, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RollbackInput {
    /// The earlier version whose fields become the policy's again (as a new version).
    #[serde(default, deserialize_with = "not_null")]
    #[schema(nullable = false, minimum = 1)]
    pub to_version: Option<i64>,
    /// The policy's current version, as the client last saw it.
    #[serde(default, deserialize_with = "not_null")]
    #[schema(nullable = false, minimum = 1)]
    pub version: Option<i64>,
}

/// Other limits for one caller: `match` is an app slug (`per_app`) or a key (`per_key`);
/// each other field given replaces the policy's (only the fields its algorithm takes).
#[derive(Debug, Default, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct OverrideInput {
    #[serde(rename = "match", default, deserialize_with = "not_null")]
    // At most 64 characters: a key is at most 256 bytes of UTF-8 (4 bytes a character).
    #[schema(rename = "match", nullable = false, min_length = 1, max_length = 64)]
    pub matches: Option<String>,
    #[serde(default, deserialize_with = "not_null")]
    #[schema(nullable = false, minimum = 1, maximum = 1000000000)]
    pub max_permits: Option<i64>,
    #[serde(default, deserialize_with = "not_null")]
    #[schema(nullable = false, exclusive_minimum = 0.0, maximum = 1000000.0)]
    pub rate: Option<f64>,
    #[serde(default, deserialize_with = "not_null")]
    #[schema(nullable = false, minimum = 1, maximum = 86400000)]
    pub window_ms: Option<i64>,
    #[serde(default, deserialize_with = "not_null")]
    #[schema(nullable = false, minimum = 1, maximum = 86400000)]
    pub lease_ttl_ms: Option<i64>,
}

/// One descriptor pattern: an exact entry `key=value` matches that value, a wildcard
/// `key=val*ue` the values it matches (one bucket per value; `shared key=val*ue`: one for
/// them all), a bare entry `key` any value (one bucket per value).
#[derive(Debug, Default, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DescriptorInput {
    /// The Envoy rate limit `domain` it belongs to; any domain when left out.
    #[serde(default, deserialize_with = "not_null")]
    #[schema(nullable = false, pattern = "^[A-Za-z0-9_.:-]{1,64}$")]
    pub domain: Option<String>,
    #[serde(default, deserialize_with = "not_null")]
    #[schema(schema_with = descriptor_entries)]
    pub entries: Option<Vec<String>>,
    /// Policies this pattern stands in for (envoyproxy/ratelimit's `replaces`, at most 8):
    /// when a descriptor of a gateway's request matches this pattern, the request's
    /// descriptors that reach one of these policies are not limited by it.
    #[serde(default, deserialize_with = "not_null")]
    #[schema(nullable = false, max_items = 8, value_type = Option<Vec<String>>)]
    pub replaces: Option<Vec<String>>,
}

/// 1 to 8 entries, each `key`, `key=value` or `shared key=val*ue` (the value at most 256 bytes of UTF-8, so at
/// most 64 characters here, 4 bytes a character, and no control characters).
fn descriptor_entries() -> utoipa::openapi::Array {
    use utoipa::openapi::schema::{ArrayBuilder, ObjectBuilder, Type};
    ArrayBuilder::new()
        .items(ObjectBuilder::new().schema_type(Type::String).pattern(Some(
            "^(shared )?[A-Za-z0-9_.:-]{1,64}(=[^\\u0000-\\u001f\\u007f-\\u009f]{1,64})?$",
        )))
        .min_items(Some(1))
        .max_items(Some(8))
        .build()
}

/// A list of distinct application slugs, at least one, as the document describes
/// `allowed_apps`.
fn slug_list() -> utoipa::openapi::Array {
    use utoipa::openapi::schema::{ArrayBuilder, ObjectBuilder, Type};
    ArrayBuilder::new()
        .items(
            ObjectBuilder::new()
                .schema_type(Type::String)
                .pattern(Some("^[a-z0-9][a-z0-9-]{1,62}$")),
        )
        .min_items(Some(1))
        .unique_items(true)
        .build()
}

/// An RFC 3339 date-time as Unix ms.
pub fn date_time(field: &str, value: &str) -> Result<i64, FieldError> {
    chrono::DateTime::parse_from_rfc3339(value.trim())
        .map(|t| t.timestamp_millis())
        .map_err(|_| {
            FieldError::new(
                field,
                "must be a date-time such as 2030-01-31T18:00:00Z (RFC 3339)",
            )
        })
}

/// An optional expiry for something new (a key, a token): in the future, or it would be
/// born dead.
pub fn future_expiry(errors: &mut FieldErrors, value: Option<&str>) -> Option<i64> {
    let at = errors.check(date_time("expires_at", value?))?;
    if at <= crate::store::now_ms() {
        errors.push("expires_at", "must be in the future");
        return None;
    }
    Some(at)
}

/// A required field's value, or an error naming it.
pub fn required<T: Clone>(errors: &mut FieldErrors, field: &str, value: &Option<T>) -> Option<T> {
    if value.is_none() {
        errors.push(field, "is required");
    }
    value.clone()
}

/// A trimmed, non-empty text of at most `max` characters.
pub fn text(field: &str, value: &str, max: usize) -> Result<String, FieldError> {
    let value = value.trim();
    if value.chars().any(char::is_control) {
        Err(FieldError::new(
            field,
            "must not contain control characters",
        ))
    } else if value.is_empty() {
        Err(FieldError::new(field, "must not be empty"))
    } else if value.chars().count() > max {
        Err(FieldError::new(
            field,
            format!("must be at most {max} characters"),
        ))
    } else {
        Ok(value.to_owned())
    }
}

/// For `#[serde(default, deserialize_with = "not_null")]` on an optional input field: the
/// field may be left out, but `null` is refused (naming the field), never read as "left
/// out": a client sending `"rate": null` means something, and silence would hide it.
pub fn not_null<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    match Option::<T>::deserialize(deserializer)? {
        Some(value) => Ok(Some(value)),
        None => Err(serde::de::Error::custom("must not be null")),
    }
}
