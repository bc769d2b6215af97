//! A stored policy (`PolicyRecord`), and as its table row holds it, and back: the
//! columns, the overrides' JSON, and the check that a stored row is still a valid policy.

use anyhow::Context;

use crate::domain::{
    Algorithm, AppSlug, DescriptorPattern, DisplayUnits, DurationUnit, FailureMode, MaxPermits,
    Millis, Mode, Override, Param, PolicyName, PolicySpec, Rate, RateUnit, Scope,
};

use super::{StoreError, StoreResult};

/// A stored policy: its validated spec plus the bookkeeping the store adds.
#[derive(Debug, Clone, PartialEq)]
pub struct PolicyRecord {
    pub id: String,
    pub spec: PolicySpec,
    pub version: i64,
    pub created_ms: i64,
    pub updated_ms: i64,
}

/// A policy's name with what reading its live state needs (`Tx::policy_briefs`).
#[derive(Debug, Clone, PartialEq)]
pub struct PolicyBrief {
    pub name: String,
    pub scope: Scope,
    pub algorithm: Algorithm,
    pub max_permits: i64,
    /// 0 for the algorithms that take no rate.
    pub rate: f64,
    pub version: i64,
    pub created_ms: i64,
}

#[derive(sqlx::FromRow)]
pub(super) struct PolicyRow {
    pub(super) id: String,
    pub(super) name: String,
    pub(super) owner_app: String,
    pub(super) algorithm: String,
    pub(super) rate: f64,
    pub(super) max_permits: i64,
    pub(super) window_ms: Option<i64>,
    pub(super) lease_ttl_ms: Option<i64>,
    pub(super) allowed_apps: String,
    pub(super) failure_mode: String,
    pub(super) enabled: i64,
    pub(super) mode: String,
    pub(super) description: String,
    pub(super) scope: String,
    pub(super) overrides: Option<String>,
    pub(super) descriptors: Option<String>,
    pub(super) rate_unit: Option<String>,
    pub(super) window_unit: Option<String>,
    pub(super) lease_ttl_unit: Option<String>,
    pub(super) version: i64,
    pub(super) created_ms: i64,
    pub(super) updated_ms: i64,
}

/// An override as the `overrides` column holds it (a JSON array of these).
#[derive(serde::Serialize, serde::Deserialize)]
pub(super) struct StoredOverride {
    #[serde(rename = "match")]
    matches: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    max_permits: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    rate: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    window_ms: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    lease_ttl_ms: Option<i64>,
}

impl StoredOverride {
    pub(super) fn of(o: &Override) -> Self {
        Self {
            matches: o.matches.clone(),
            max_permits: o.max_permits.map(MaxPermits::get),
            rate: o.rate.map(Rate::get),
            window_ms: o.window_ms.map(Millis::get),
            lease_ttl_ms: o.lease_ttl_ms.map(Millis::get),
        }
    }

    fn parse(self) -> anyhow::Result<Override> {
        Ok(Override {
            max_permits: self
                .max_permits
                .map(|m| MaxPermits::parse_field("max_permits", m))
                .transpose()?,
            rate: self
                .rate
                .map(|r| Rate::parse_field("rate", r))
                .transpose()?,
            window_ms: self
                .window_ms
                .map(|w| Millis::parse_field("window_ms", w))
                .transpose()?,
            lease_ttl_ms: self
                .lease_ttl_ms
                .map(|l| Millis::parse_field("lease_ttl_ms", l))
                .transpose()?,
            matches: self.matches,
        })
    }
}

/// The `overrides` column: NULL when there are none.
pub(super) fn overrides_json(spec: &PolicySpec) -> Option<String> {
    (!spec.overrides.is_empty()).then(|| {
        let stored: Vec<StoredOverride> = spec.overrides.iter().map(StoredOverride::of).collect();
        serde_json::to_string(&stored).expect("overrides serialise")
    })
}

/// A descriptor pattern as the `descriptors` column holds it (a JSON array of these),
/// the same shape as the JSON API's.
#[derive(serde::Serialize, serde::Deserialize)]
pub(super) struct StoredDescriptor {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    domain: Option<String>,
    entries: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    replaces: Vec<String>,
}

impl StoredDescriptor {
    fn of(d: &DescriptorPattern) -> Self {
        Self {
            domain: d.domain.clone(),
            entries: d.entry_texts(),
            replaces: d.replaces.iter().map(|n| n.as_str().to_owned()).collect(),
        }
    }
}

/// The `descriptors` column: NULL when there are none.
pub(super) fn descriptors_json(spec: &PolicySpec) -> Option<String> {
    (!spec.descriptors.is_empty()).then(|| {
        let stored: Vec<StoredDescriptor> =
            spec.descriptors.iter().map(StoredDescriptor::of).collect();
        serde_json::to_string(&stored).expect("descriptor patterns serialise")
    })
}

/// The column read back, each pattern checked as any input is.
pub(super) fn parse_descriptors(text: Option<&str>) -> anyhow::Result<Vec<DescriptorPattern>> {
    let Some(text) = text else {
        return Ok(Vec::new());
    };
    serde_json::from_str::<Vec<StoredDescriptor>>(text)?
        .into_iter()
        .enumerate()
        .map(|(i, d)| {
            DescriptorPattern::parse_field(
                &format!("descriptors[{i}]"),
                d.domain.as_deref(),
                &d.entries,
                &d.replaces,
            )
            .map_err(|e| anyhow::anyhow!("{e}"))
        })
        .collect()
}

impl PolicyRow {
    /// Rows are parsed like any other input: a row that no longer parses is an error
    /// with the policy's name, never a silently wrong limit.
    pub(super) fn parse(self) -> StoreResult<PolicyRecord> {
        let name = self.name.clone();
        let parse = || -> anyhow::Result<PolicyRecord> {
            let allowed: Vec<String> = serde_json::from_str(&self.allowed_apps)?;
            let algorithm = Algorithm::parse_field("algorithm", &self.algorithm)?;
            // A parameter is read when the algorithm uses it, and must then be there.
            let param = |p: Param, value: Option<i64>| -> anyhow::Result<Option<Millis>> {
                if !algorithm.uses(p) {
                    return Ok(None);
                }
                let value = value.ok_or_else(|| anyhow::anyhow!("{} is missing", p.field()))?;
                Ok(Some(Millis::parse_field(p.field(), value)?))
            };
            let spec = PolicySpec {
                name: PolicyName::parse(&self.name)?,
                owner_app: AppSlug::parse(&self.owner_app)?,
                algorithm,
                rate: if algorithm.uses(Param::Rate) {
                    Some(Rate::parse_field("rate", self.rate)?)
                } else {
                    None
                },
                max_permits: MaxPermits::parse_field("max_permits", self.max_permits)?,
                window_ms: param(Param::WindowMs, self.window_ms)?,
                lease_ttl_ms: param(Param::LeaseTtlMs, self.lease_ttl_ms)?,
                allowed_apps: allowed
                    .iter()
                    .map(|s| AppSlug::parse(s))
                    .collect::<Result<_, _>>()?,
                failure_mode: FailureMode::parse_field("failure_mode", &self.failure_mode)?,
                enabled: self.enabled != 0,
                mode: Mode::parse_field("mode", &self.mode)?,
                description: self.description,
                scope: Scope::parse_field("scope", &self.scope)?,
                overrides: match &self.overrides {
                    None => Vec::new(),
                    Some(text) => serde_json::from_str::<Vec<StoredOverride>>(text)?
                        .into_iter()
                        .map(StoredOverride::parse)
                        .collect::<anyhow::Result<_>>()?,
                },
                descriptors: parse_descriptors(self.descriptors.as_deref())?,
                units: DisplayUnits {
                    rate: self
                        .rate_unit
                        .as_deref()
                        .map(|u| RateUnit::parse_field("rate_unit", u))
                        .transpose()?,
                    window: self
                        .window_unit
                        .as_deref()
                        .map(|u| DurationUnit::parse_field("window_unit", u))
                        .transpose()?,
                    lease_ttl: self
                        .lease_ttl_unit
                        .as_deref()
                        .map(|u| DurationUnit::parse_field("lease_ttl_unit", u))
                        .transpose()?,
                },
            };
            Ok(PolicyRecord {
                id: self.id,
                spec,
                version: self.version,
                created_ms: self.created_ms,
                updated_ms: self.updated_ms,
            })
        };
        parse()
            .with_context(|| format!("stored policy {name:?} is invalid"))
            .map_err(StoreError::Other)
    }
}

pub(super) fn apps_json(spec: &PolicySpec) -> String {
    let slugs: Vec<&str> = spec.allowed_apps.iter().map(AppSlug::as_str).collect();
    serde_json::to_string(&slugs).expect("a list of strings serialises")
}

/// The `rate` column is NOT NULL (it predates the other algorithms): 0 where unused.
pub(super) fn stored_rate(spec: &PolicySpec) -> f64 {
    spec.rate.map_or(0.0, Rate::get)
}
