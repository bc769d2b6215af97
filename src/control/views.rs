//! What the control operations return: the JSON shapes of the admin API (README).

use serde::Serialize;
use utoipa::ToSchema;

use crate::domain::{
    Algorithm, DescriptorPattern, DurationUnit, FailureMode, Mode, Override, RateUnit, Scope,
};
use crate::store::{ApiKeyRecord, AppRecord, AuditRecord, MemberRecord, PolicyRecord};
use ratekeeper_limiter::{StateRead, StoredBucket};

pub use crate::domain::rfc3339;

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct AppView {
    pub slug: String,
    pub name: String,
    pub description: String,
    pub created_at: String,
}

impl From<&AppRecord> for AppView {
    fn from(r: &AppRecord) -> Self {
        Self {
            slug: r.slug.clone(),
            name: r.name.clone(),
            description: r.description.clone(),
            created_at: rfc3339(r.created_ms),
        }
    }
}

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct MemberView {
    pub username: String,
    pub role: String,
}

impl From<&MemberRecord> for MemberView {
    fn from(r: &MemberRecord) -> Self {
        Self {
            username: r.username.clone(),
            role: r.role.clone(),
        }
    }
}

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ApiKeyView {
    pub id: String,
    pub label: String,
    pub created_by: String,
    pub created_at: String,
    pub last_used_at: Option<String>,
    pub revoked_at: Option<String>,
    /// When it stops working by itself, if ever (a time in the past: it has expired).
    pub expires_at: Option<String>,
    /// Its first characters ("rk_key_3fa9"), to tell keys with one label apart; absent
    /// for a key made before they were kept.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prefix: Option<String>,
    /// For a key rotated away: the id of the key that replaced it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replaced_by: Option<String>,
}

impl From<&ApiKeyRecord> for ApiKeyView {
    fn from(r: &ApiKeyRecord) -> Self {
        Self {
            id: r.id.clone(),
            label: r.label.clone(),
            created_by: r.created_by.clone(),
            created_at: rfc3339(r.created_ms),
            last_used_at: r.last_used_ms.map(rfc3339),
            revoked_at: r.revoked_ms.map(rfc3339),
            expires_at: r.expires_ms.map(rfc3339),
            prefix: r.key_prefix.clone(),
            replaced_by: r.replaced_by.clone(),
        }
    }
}

/// An application with its members and keys, for those who may see it.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct AppDetail {
    #[serde(flatten)]
    pub app: AppView,
    /// The caller's role here (`owner`, `viewer`), or `admin`.
    pub your_role: String,
    /// Whether the caller may change its policies, members and keys (the permission
    /// rules' answer, for pages that show controls only to those who may use them).
    #[serde(skip)]
    pub may_edit: bool,
    pub members: Vec<MemberView>,
    pub keys: Vec<ApiKeyView>,
}

/// A new key: the only time its text is shown (to its creator, never to a log).
#[derive(Clone, Serialize, ToSchema)]
pub struct CreatedKey {
    pub id: String,
    pub label: String,
    pub key: String,
    /// When it stops working by itself, if ever.
    pub expires_at: Option<String>,
}

/// A rotated key: the new one (its text shown this once) and the old one, which works
/// until its `expires_at`.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct RotatedKey {
    #[serde(flatten)]
    pub new_key: CreatedKey,
    pub old_key: ApiKeyView,
}

impl std::fmt::Debug for CreatedKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CreatedKey")
            .field("id", &self.id)
            .field("label", &self.label)
            .finish_non_exhaustive()
    }
}

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct PolicyView {
    pub name: String,
    pub owner_app: String,
    pub algorithm: Algorithm,
    /// Permits per second (`token_bucket`, `gcra`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rate: Option<f64>,
    pub max_permits: i64,
    /// The window in ms (`fixed_window`, `sliding_log`, `sliding_window`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub window_ms: Option<i64>,
    /// A lease's longest life in ms (`concurrency`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lease_ttl_ms: Option<i64>,
    pub allowed_apps: Vec<String>,
    pub failure_mode: FailureMode,
    pub enabled: bool,
    /// `enforce`, or `shadow`: decided and counted, never denied.
    pub mode: Mode,
    pub description: String,
    /// Whose bucket: `global`, `per_app` or `per_key`.
    pub scope: Scope,
    /// Other limits for some callers (keyed scopes only).
    pub overrides: Vec<OverrideView>,
    /// Envoy-style descriptor patterns that find this policy from a gateway's descriptor.
    pub descriptors: Vec<DescriptorView>,
    /// The unit the rate was entered in through the console, for showing it back (the
    /// `rate` itself is always per second); absent when none was chosen.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rate_unit: Option<RateUnit>,
    /// The unit the window was entered in (`window_ms` is always in ms).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub window_unit: Option<DurationUnit>,
    /// The unit the lease lifetime was entered in (`lease_ttl_ms` is always in ms).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lease_ttl_unit: Option<DurationUnit>,
    pub version: i64,
    pub created_at: String,
    pub updated_at: String,
    /// `created_at` as stored: with the version, it tells this incarnation of the policy's
    /// state in Redis from an earlier one's of the same name.
    #[serde(skip)]
    pub created_ms: i64,
}

/// One caller's other limits; the fields it does not set are the policy's.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct OverrideView {
    /// The app slug (`per_app`) or the key (`per_key`).
    #[serde(rename = "match")]
    #[schema(rename = "match")]
    pub matches: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_permits: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rate: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub window_ms: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lease_ttl_ms: Option<i64>,
}

/// One descriptor pattern: its Envoy domain (absent: any) and its entries, each
/// `key=value` (that value only) or `key` (any value, one bucket per value).
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct DescriptorView {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub domain: Option<String>,
    pub entries: Vec<String>,
    /// The policies it replaces in a gateway's request (absent when none).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub replaces: Vec<String>,
}

impl From<&DescriptorPattern> for DescriptorView {
    fn from(d: &DescriptorPattern) -> Self {
        Self {
            domain: d.domain.clone(),
            entries: d.entry_texts(),
            replaces: super::descriptors::replace_texts(d),
        }
    }
}

impl From<&Override> for OverrideView {
    fn from(o: &Override) -> Self {
        Self {
            matches: o.matches.clone(),
            max_permits: o.max_permits.map(|m| m.get()),
            rate: o.rate.map(|r| r.get()),
            window_ms: o.window_ms.map(|w| w.get()),
            lease_ttl_ms: o.lease_ttl_ms.map(|l| l.get()),
        }
    }
}

impl From<&PolicyRecord> for PolicyView {
    fn from(r: &PolicyRecord) -> Self {
        let s = &r.spec;
        Self {
            name: s.name.to_string(),
            owner_app: s.owner_app.to_string(),
            algorithm: s.algorithm,
            rate: s.rate.map(|r| r.get()),
            max_permits: s.max_permits.get(),
            window_ms: s.window_ms.map(|w| w.get()),
            lease_ttl_ms: s.lease_ttl_ms.map(|l| l.get()),
            allowed_apps: s.allowed_apps.iter().map(ToString::to_string).collect(),
            failure_mode: s.failure_mode,
            enabled: s.enabled,
            mode: s.mode,
            description: s.description.clone(),
            scope: s.scope,
            overrides: s.overrides.iter().map(OverrideView::from).collect(),
            descriptors: s.descriptors.iter().map(DescriptorView::from).collect(),
            rate_unit: s.units.rate,
            window_unit: s.units.window,
            lease_ttl_unit: s.units.lease_ttl,
            version: r.version,
            created_at: rfc3339(r.created_ms),
            updated_at: rfc3339(r.updated_ms),
            created_ms: r.created_ms,
        }
    }
}

impl PolicyView {
    /// How the live read finds this policy's state.
    pub fn state_read(&self) -> StateRead {
        super::apps::state_read(self.scope, self.algorithm, || StoredBucket {
            max_permits: self.max_permits,
            rate: self.rate.unwrap_or(0.0),
            version: self.version,
            created_ms: self.created_ms,
        })
    }
}

/// One saved version of a policy.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct PolicyVersionView {
    pub version: i64,
    /// `create`, `update`, `rollback`, or `recorded` (the policy as it was when history
    /// began: the upgrade that added history).
    pub action: String,
    /// For a rollback: the version it restored.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub restored_version: Option<i64>,
    pub author: String,
    pub at: String,
    /// The whole policy as this version had it.
    pub policy: PolicyView,
}

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct AuditView {
    pub id: i64,
    pub at: String,
    pub actor: String,
    pub app: Option<String>,
    pub entity_type: String,
    pub entity_id: String,
    pub action: String,
    pub before: Option<serde_json::Value>,
    pub after: Option<serde_json::Value>,
    /// Where the change came from: `console`, `api` or `cli`; absent for events recorded
    /// before it was kept.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// The id shared by the changes of one policy file's apply (`?change_set=` lists them).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub change_set: Option<String>,
}

impl From<AuditRecord> for AuditView {
    fn from(r: AuditRecord) -> Self {
        let parse = |s: Option<String>| s.and_then(|s| serde_json::from_str(&s).ok());
        Self {
            id: r.id,
            at: rfc3339(r.at_ms),
            actor: r.actor,
            app: r.app_slug,
            entity_type: r.entity_type,
            entity_id: r.entity_id,
            action: r.action,
            before: parse(r.before_json),
            after: parse(r.after_json),
            source: r.source,
            change_set: r.change_set,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_key_never_shows_its_text_in_a_log() {
        let created = CreatedKey {
            id: "0123456789abcdef".into(),
            label: "checkout".into(),
            key: "rk_key_secret-text".into(),
            expires_at: None,
        };
        let logged = format!("{created:?}");
        assert!(!logged.contains("secret-text") && logged.contains("checkout"));
    }
}
