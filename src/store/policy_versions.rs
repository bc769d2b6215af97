//! Every saved version of a policy (`policy_versions`): written by the control operations in
//! the transaction of the change, read for a policy's history and for a rollback.

use serde::{Deserialize, Serialize};

use crate::domain::{PolicySpec, Rate};

use super::policy_rows::{PolicyRow, apps_json, descriptors_json, overrides_json};
use super::{StoreError, StoreResult, Tx};
use crate::store::PolicyRecord;

/// One saved version: the whole policy as it was, and who saved it how.
#[derive(Debug, Clone, PartialEq)]
pub struct PolicyVersionRecord {
    pub version: i64,
    /// `create`, `update`, `rollback`, or `recorded` (the state when history began).
    pub action: String,
    /// For a rollback: the version it restored.
    pub restored_version: Option<i64>,
    pub author: String,
    pub at_ms: i64,
    pub spec: PolicySpec,
}

/// The `policy_json` column: the policy's fields in the columns' units (the migration that
/// made the table wrote the existing policies in the same shape).
#[derive(Serialize, Deserialize)]
struct PolicyJson {
    name: String,
    owner_app: String,
    algorithm: String,
    /// Null (or 0, as the migration wrote it) when the algorithm takes no rate.
    rate: Option<f64>,
    max_permits: i64,
    window_ms: Option<i64>,
    lease_ttl_ms: Option<i64>,
    allowed_apps: Vec<String>,
    failure_mode: String,
    enabled: bool,
    /// Absent in versions written before shadow mode existed: those were enforced.
    #[serde(default = "enforce")]
    mode: String,
    description: String,
    scope: String,
    overrides: Vec<serde_json::Value>,
    /// Absent in versions written before policies had descriptor patterns: none.
    #[serde(default)]
    descriptors: Vec<serde_json::Value>,
    /// The units the form was given (absent in versions written before they were kept).
    #[serde(default)]
    rate_unit: Option<String>,
    #[serde(default)]
    window_unit: Option<String>,
    #[serde(default)]
    lease_ttl_unit: Option<String>,
}

fn enforce() -> String {
    crate::domain::Mode::Enforce.as_str().to_owned()
}

impl PolicyJson {
    fn of(spec: &PolicySpec) -> Self {
        Self {
            name: spec.name.to_string(),
            owner_app: spec.owner_app.to_string(),
            algorithm: spec.algorithm.as_str().to_owned(),
            rate: spec.rate.map(Rate::get),
            max_permits: spec.max_permits.get(),
            window_ms: spec.window_ms.map(|w| w.get()),
            lease_ttl_ms: spec.lease_ttl_ms.map(|l| l.get()),
            allowed_apps: serde_json::from_str(&apps_json(spec)).expect("a list of slugs"),
            failure_mode: spec.failure_mode.as_str().to_owned(),
            enabled: spec.enabled,
            mode: spec.mode.as_str().to_owned(),
            description: spec.description.clone(),
            scope: spec.scope.as_str().to_owned(),
            overrides: overrides_json(spec)
                .map(|text| serde_json::from_str(&text).expect("stored overrides are JSON"))
                .unwrap_or_default(),
            descriptors: descriptors_json(spec)
                .map(|text| serde_json::from_str(&text).expect("stored patterns are JSON"))
                .unwrap_or_default(),
            rate_unit: spec.units.rate.map(|u| u.as_str().to_owned()),
            window_unit: spec.units.window.map(|u| u.as_str().to_owned()),
            lease_ttl_unit: spec.units.lease_ttl.map(|u| u.as_str().to_owned()),
        }
    }

    /// Parsed like a row of `policies` (the same checks): a version that no longer parses
    /// is an error naming it, never a silently different policy.
    fn parse(self, version: i64) -> StoreResult<PolicySpec> {
        let row = PolicyRow {
            id: String::new(),
            name: self.name,
            owner_app: self.owner_app,
            algorithm: self.algorithm,
            rate: self.rate.unwrap_or(0.0),
            max_permits: self.max_permits,
            window_ms: self.window_ms,
            lease_ttl_ms: self.lease_ttl_ms,
            allowed_apps: serde_json::to_string(&self.allowed_apps).expect("strings serialise"),
            failure_mode: self.failure_mode,
            enabled: i64::from(self.enabled),
            mode: self.mode,
            description: self.description,
            scope: self.scope,
            overrides: (!self.overrides.is_empty())
                .then(|| serde_json::Value::Array(self.overrides).to_string()),
            descriptors: (!self.descriptors.is_empty())
                .then(|| serde_json::Value::Array(self.descriptors).to_string()),
            rate_unit: self.rate_unit,
            window_unit: self.window_unit,
            lease_ttl_unit: self.lease_ttl_unit,
            version,
            created_ms: 0,
            updated_ms: 0,
        };
        Ok(row.parse()?.spec)
    }
}

#[derive(sqlx::FromRow)]
struct VersionRow {
    version: i64,
    action: String,
    restored_version: Option<i64>,
    author: String,
    at_ms: i64,
    policy_json: String,
}

#[derive(sqlx::FromRow)]
struct NamedVersionRow {
    policy_id: String,
    #[sqlx(flatten)]
    version: VersionRow,
}

impl VersionRow {
    fn parse(self) -> StoreResult<PolicyVersionRecord> {
        let json: PolicyJson = serde_json::from_str(&self.policy_json).map_err(|e| {
            StoreError::Other(anyhow::anyhow!(
                "stored version {} of a policy is not valid JSON: {e}",
                self.version
            ))
        })?;
        Ok(PolicyVersionRecord {
            spec: json.parse(self.version)?,
            version: self.version,
            action: self.action,
            restored_version: self.restored_version,
            author: self.author,
            at_ms: self.at_ms,
        })
    }
}

const SELECT: &str = "SELECT version, action, restored_version, author, at_ms, policy_json \
    FROM policy_versions WHERE policy_id = ?";

impl Tx {
    /// Records `record` (just saved by `author`) as a version of its policy.
    #[tracing::instrument(level = "debug", skip_all, fields(name = %record.spec.name, version = record.version))]
    pub async fn record_policy_version(
        &mut self,
        record: &PolicyRecord,
        author: &str,
        action: &'static str,
        restored_version: Option<i64>,
    ) -> StoreResult<()> {
        let json = serde_json::to_string(&PolicyJson::of(&record.spec))
            .map_err(|e| StoreError::Other(e.into()))?;
        sqlx::query(self.sql(
            "INSERT INTO policy_versions (policy_id, version, policy_name, action, \
             restored_version, author, at_ms, policy_json) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        ))
        .bind(&record.id)
        .bind(record.version)
        .bind(record.spec.name.as_str())
        .bind(action)
        .bind(restored_version)
        .bind(author)
        .bind(record.updated_ms)
        .bind(json)
        .execute(&mut *self.inner)
        .await?;
        Ok(())
    }

    /// Versions of the policy `policy_id`, newest first: at most `limit`, older than
    /// `before` if given.
    #[tracing::instrument(level = "debug", skip_all, fields(policy_id = %policy_id))]
    pub async fn policy_versions(
        &mut self,
        policy_id: &str,
        before: Option<i64>,
        limit: u32,
    ) -> StoreResult<Vec<PolicyVersionRecord>> {
        let rows: Vec<VersionRow> = sqlx::query_as(self.sql_built(format!(
            "{SELECT} AND version < ? ORDER BY version DESC LIMIT {limit}"
        )))
        .bind(policy_id)
        .bind(before.unwrap_or(i64::MAX))
        .fetch_all(&mut *self.inner)
        .await?;
        rows.into_iter().map(VersionRow::parse).collect()
    }

    /// The newest version saved under the name `name`, with its policy's id: after a
    /// delete, the version the policy had when it was deleted.
    #[tracing::instrument(level = "debug", skip_all, fields(name = %name))]
    pub async fn newest_version_named(
        &mut self,
        name: &str,
    ) -> StoreResult<Option<(String, PolicyVersionRecord)>> {
        let row: Option<NamedVersionRow> = sqlx::query_as(self.sql(
            "SELECT policy_id, version, action, restored_version, author, at_ms, policy_json \
             FROM policy_versions WHERE policy_name = ? ORDER BY at_ms DESC, version DESC LIMIT 1",
        ))
        .bind(name)
        .fetch_optional(&mut *self.inner)
        .await?;
        row.map(|r| Ok((r.policy_id, r.version.parse()?)))
            .transpose()
    }

    /// One version of the policy `policy_id`.
    #[tracing::instrument(level = "debug", skip_all, fields(policy_id = %policy_id, version))]
    pub async fn policy_version(
        &mut self,
        policy_id: &str,
        version: i64,
    ) -> StoreResult<Option<PolicyVersionRecord>> {
        let row: Option<VersionRow> =
            sqlx::query_as(self.sql_built(format!("{SELECT} AND version = ?")))
                .bind(policy_id)
                .bind(version)
                .fetch_optional(&mut *self.inner)
                .await?;
        row.map(VersionRow::parse).transpose()
    }
}
