use futures_util::{Stream, StreamExt};

use crate::domain::{Algorithm, AppSlug, DurationUnit, PolicySpec, RateUnit, Scope};

use super::policy_rows::{
    PolicyBrief, PolicyRecord, PolicyRow, apps_json, descriptors_json, overrides_json, stored_rate,
};
use super::{StoreError, StoreResult, Tx, new_id, now_ms};

const SELECT: &str = "SELECT p.id, p.name, a.slug AS owner_app, p.algorithm, p.rate, \
    p.max_permits, p.window_ms, p.lease_ttl_ms, p.allowed_apps, p.failure_mode, p.enabled, p.mode, p.description, p.scope, p.overrides, \
    p.descriptors, p.rate_unit, p.window_unit, p.lease_ttl_unit, p.version, \
    p.created_ms, p.updated_ms FROM policies p JOIN apps a ON a.id = p.app_id";

impl Tx {
    #[tracing::instrument(level = "debug", skip_all, fields(name = %spec.name))]
    pub async fn insert_policy(
        &mut self,
        app_id: &str,
        spec: &PolicySpec,
    ) -> StoreResult<PolicyRecord> {
        let now = now_ms();
        let record = PolicyRecord {
            id: new_id(),
            spec: spec.clone(),
            version: 1,
            created_ms: now,
            updated_ms: now,
        };
        sqlx::query(self.sql(
            "INSERT INTO policies (id, name, app_id, algorithm, rate, max_permits, window_ms, \
             lease_ttl_ms, allowed_apps, failure_mode, enabled, mode, description, scope, \
             overrides, descriptors, rate_unit, window_unit, lease_ttl_unit, version, created_ms, \
             updated_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        ))
        .bind(&record.id)
        .bind(spec.name.as_str())
        .bind(app_id)
        .bind(spec.algorithm.as_str())
        .bind(stored_rate(spec))
        .bind(spec.max_permits.get())
        .bind(spec.window_ms.map(|w| w.get()))
        .bind(spec.lease_ttl_ms.map(|l| l.get()))
        .bind(apps_json(spec))
        .bind(spec.failure_mode.as_str())
        .bind(i64::from(spec.enabled))
        .bind(spec.mode.as_str())
        .bind(&spec.description)
        .bind(spec.scope.as_str())
        .bind(overrides_json(spec))
        .bind(descriptors_json(spec))
        .bind(spec.units.rate.map(RateUnit::as_str))
        .bind(spec.units.window.map(DurationUnit::as_str))
        .bind(spec.units.lease_ttl.map(DurationUnit::as_str))
        .bind(record.version)
        .bind(now)
        .bind(now)
        .execute(&mut *self.inner)
        .await?;
        Ok(record)
    }

    /// Replaces a policy's spec if its version is still `expected_version`, and bumps the
    /// version. `None` when another change came first.
    #[tracing::instrument(level = "debug", skip_all, fields(name = %spec.name))]
    pub async fn update_policy(
        &mut self,
        current: &PolicyRecord,
        spec: &PolicySpec,
    ) -> StoreResult<Option<PolicyRecord>> {
        let now = now_ms();
        let done = sqlx::query(self.sql(
            "UPDATE policies SET algorithm = ?, rate = ?, max_permits = ?, window_ms = ?, \
             lease_ttl_ms = ?, allowed_apps = ?, failure_mode = ?, enabled = ?, mode = ?, description = ?, \
             scope = ?, overrides = ?, descriptors = ?, rate_unit = ?, window_unit = ?, lease_ttl_unit = ?, \
             version = version + 1, updated_ms = ? \
             WHERE id = ? AND version = ?",
        ))
        .bind(spec.algorithm.as_str())
        .bind(stored_rate(spec))
        .bind(spec.max_permits.get())
        .bind(spec.window_ms.map(|w| w.get()))
        .bind(spec.lease_ttl_ms.map(|l| l.get()))
        .bind(apps_json(spec))
        .bind(spec.failure_mode.as_str())
        .bind(i64::from(spec.enabled))
        .bind(spec.mode.as_str())
        .bind(&spec.description)
        .bind(spec.scope.as_str())
        .bind(overrides_json(spec))
        .bind(descriptors_json(spec))
        .bind(spec.units.rate.map(RateUnit::as_str))
        .bind(spec.units.window.map(DurationUnit::as_str))
        .bind(spec.units.lease_ttl.map(DurationUnit::as_str))
        .bind(now)
        .bind(&current.id)
        .bind(current.version)
        .execute(&mut *self.inner)
        .await?;
        if done.rows_affected() == 0 {
            return Ok(None);
        }
        Ok(Some(PolicyRecord {
            id: current.id.clone(),
            spec: spec.clone(),
            version: current.version + 1,
            created_ms: current.created_ms,
            updated_ms: now,
        }))
    }

    #[tracing::instrument(level = "debug", skip_all, fields(id = %id))]
    pub async fn delete_policy(&mut self, id: &str) -> StoreResult<bool> {
        let done = sqlx::query(self.sql("DELETE FROM policies WHERE id = ?"))
            .bind(id)
            .execute(&mut *self.inner)
            .await?;
        Ok(done.rows_affected() > 0)
    }

    /// The policy, its row locked until the transaction ends, so that a change computed
    /// from it cannot race another (SQLite's transactions already hold the write lock).
    #[tracing::instrument(level = "debug", skip_all, fields(name = %name))]
    pub async fn policy_by_name_for_update(
        &mut self,
        name: &str,
    ) -> StoreResult<Option<PolicyRecord>> {
        let lock = match self.backend {
            super::Backend::Sqlite => "",
            super::Backend::Postgres => " FOR UPDATE OF p",
            super::Backend::MySql => " FOR UPDATE",
        };
        self.fetch_policy(name, lock).await
    }

    #[tracing::instrument(level = "debug", skip_all, fields(name = %name))]
    pub async fn policy_by_name(&mut self, name: &str) -> StoreResult<Option<PolicyRecord>> {
        self.fetch_policy(name, "").await
    }

    /// The policies of `names` that exist, by name; with `lock`, their rows locked until
    /// the transaction ends (in name order, a few hundred a statement), as
    /// [`Self::policy_by_name_for_update`] locks one.
    #[tracing::instrument(level = "debug", skip_all, fields(names = names.len(), lock))]
    pub async fn policies_by_names(
        &mut self,
        names: &[&str],
        lock: bool,
    ) -> StoreResult<Vec<PolicyRecord>> {
        /// Names bound in one statement: well under every backend's cap on parameters.
        const CHUNK: usize = 500;
        let lock = match (lock, self.backend) {
            (false, _) | (true, super::Backend::Sqlite) => "",
            (true, super::Backend::Postgres) => " FOR UPDATE OF p",
            (true, super::Backend::MySql) => " FOR UPDATE",
        };
        let mut sorted = names.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        let mut found = Vec::with_capacity(sorted.len());
        for chunk in sorted.chunks(CHUNK) {
            let marks = vec!["?"; chunk.len()].join(", ");
            let sql = format!("{SELECT} WHERE p.name IN ({marks}) ORDER BY p.name{lock}");
            let mut query = sqlx::query_as(self.sql_built(sql));
            for name in chunk {
                query = query.bind(*name);
            }
            let rows: Vec<PolicyRow> = query.fetch_all(&mut *self.inner).await?;
            for row in rows {
                found.push(row.parse()?);
            }
        }
        Ok(found)
    }

    /// The policies of other applications that allow the application `slug`: limits its
    /// keys are held to that its own members do not set. By name.
    #[tracing::instrument(level = "debug", skip_all, fields(slug = %slug))]
    pub async fn policies_allowing(&mut self, slug: &str) -> StoreResult<Vec<PolicyRecord>> {
        // allowed_apps holds a JSON array of slugs: LIKE narrows the rows down, the parsed
        // list decides. '!' escapes LIKE's wildcards alike on every backend.
        let escaped = slug
            .replace('!', "!!")
            .replace('%', "!%")
            .replace('_', "!_");
        let rows: Vec<PolicyRow> = sqlx::query_as(self.sql_built(format!(
            "{SELECT} WHERE a.slug <> ? AND p.allowed_apps LIKE ? ESCAPE '!' ORDER BY p.name"
        )))
        .bind(slug)
        .bind(format!("%\"{escaped}\"%"))
        .fetch_all(&mut *self.inner)
        .await?;
        let records: Vec<PolicyRecord> = rows
            .into_iter()
            .map(PolicyRow::parse)
            .collect::<StoreResult<_>>()?;
        Ok(records
            .into_iter()
            .filter(|r| r.spec.allowed_apps.iter().any(|a| a.as_str() == slug))
            .collect())
    }

    /// Whether the user is a member, in any role, of one of the applications `slugs`.
    #[tracing::instrument(level = "debug", skip_all, fields(slugs = slugs.len()))]
    pub async fn member_of_any(&mut self, user_id: &str, slugs: &[AppSlug]) -> StoreResult<bool> {
        if slugs.is_empty() {
            return Ok(false);
        }
        let marks = vec!["?"; slugs.len()].join(", ");
        let mut query = sqlx::query_scalar::<_, i64>(self.sql_built(format!(
            "SELECT COUNT(*) FROM memberships m JOIN apps a ON a.id = m.app_id \
             WHERE m.user_id = ? AND a.slug IN ({marks})"
        )))
        .bind(user_id);
        for slug in slugs {
            query = query.bind(slug.as_str());
        }
        Ok(query.fetch_one(&mut *self.inner).await? > 0)
    }

    async fn fetch_policy(&mut self, name: &str, lock: &str) -> StoreResult<Option<PolicyRecord>> {
        let row: Option<PolicyRow> =
            sqlx::query_as(self.sql_built(format!("{SELECT} WHERE p.name = ?{lock}")))
                .bind(name)
                .fetch_optional(&mut *self.inner)
                .await?;
        row.map(PolicyRow::parse).transpose()
    }

    /// A summary of the whole policy table that changes whenever any policy is created,
    /// changed or deleted: the sync task compares it between passes instead of reading
    /// every row.
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn policy_fingerprint(&mut self) -> StoreResult<String> {
        // SUM of a BIGINT is NUMERIC/DECIMAL on PostgreSQL/MySQL, which the Any driver
        // cannot read: cast it back to a 64-bit integer in each dialect.
        let query = match self.backend {
            super::Backend::Postgres => {
                "SELECT COUNT(*), CAST(COALESCE(SUM(version), 0) AS BIGINT), \
                CAST(COALESCE(SUM(created_ms), 0) AS BIGINT), COALESCE(MAX(updated_ms), 0) FROM policies"
            }
            super::Backend::MySql => {
                "SELECT COUNT(*), CAST(COALESCE(SUM(version), 0) AS SIGNED), \
                CAST(COALESCE(SUM(created_ms), 0) AS SIGNED), COALESCE(MAX(updated_ms), 0) FROM policies"
            }
            super::Backend::Sqlite => {
                "SELECT COUNT(*), COALESCE(SUM(version), 0), \
                COALESCE(SUM(created_ms), 0), COALESCE(MAX(updated_ms), 0) FROM policies"
            }
        };
        let (count, versions, created, updated): (i64, i64, i64, i64) =
            sqlx::query_as(self.sql(query))
                .fetch_one(&mut *self.inner)
                .await?;
        Ok(format!("{count}:{versions}:{created}:{updated}"))
    }

    /// Every policy that declares descriptor patterns (few do): the patterns a new one
    /// must not repeat.
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn policies_with_descriptors(&mut self) -> StoreResult<Vec<PolicyRecord>> {
        let rows: Vec<PolicyRow> = sqlx::query_as(self.sql_built(format!(
            "{SELECT} WHERE p.descriptors IS NOT NULL ORDER BY p.name"
        )))
        .fetch_all(&mut *self.inner)
        .await?;
        rows.into_iter().map(PolicyRow::parse).collect()
    }

    /// Every policy, by name, one row at a time: a reload of 100,000 policies holds the row
    /// at hand, not every row and every record at once (`Snapshot::reload_policies`).
    pub fn each_policy(&mut self) -> impl Stream<Item = StoreResult<PolicyRecord>> + Send + '_ {
        let sql = self.sql_built(format!("{SELECT} ORDER BY p.name"));
        sqlx::query_as::<_, PolicyRow>(sql)
            .fetch(&mut *self.inner)
            .map(|row| row.map_err(StoreError::from).and_then(PolicyRow::parse))
    }

    /// Policies owned by one application, or every policy when `app_id` is `None`.
    #[tracing::instrument(level = "debug", skip_all, fields(app_id = ?app_id))]
    pub async fn list_policies(&mut self, app_id: Option<&str>) -> StoreResult<Vec<PolicyRecord>> {
        let rows: Vec<PolicyRow> = match app_id {
            Some(app_id) => {
                sqlx::query_as(
                    self.sql_built(format!("{SELECT} WHERE p.app_id = ? ORDER BY p.name")),
                )
                .bind(app_id)
                .fetch_all(&mut *self.inner)
                .await?
            }
            None => {
                sqlx::query_as(self.sql_built(format!("{SELECT} ORDER BY p.name")))
                    .fetch_all(&mut *self.inner)
                    .await?
            }
        };
        rows.into_iter().map(PolicyRow::parse).collect()
    }

    /// The policies of an application among `names` (a page's worth), by name; a name it
    /// has no policy of is left out.
    #[tracing::instrument(level = "debug", skip_all, fields(names = names.len()))]
    pub async fn policies_named(
        &mut self,
        app_id: &str,
        names: &[&str],
    ) -> StoreResult<Vec<PolicyRecord>> {
        if names.is_empty() {
            return Ok(Vec::new());
        }
        let placeholders = vec!["?"; names.len()].join(", ");
        let sql =
            format!("{SELECT} WHERE p.app_id = ? AND p.name IN ({placeholders}) ORDER BY p.name");
        let mut query = sqlx::query_as(self.sql_built(sql)).bind(app_id);
        for name in names {
            query = query.bind(*name);
        }
        let rows: Vec<PolicyRow> = query.fetch_all(&mut *self.inner).await?;
        rows.into_iter().map(PolicyRow::parse).collect()
    }

    /// The application's policies by name, each with what reading its live state needs
    /// and without the rest of its row.
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn policy_briefs(&mut self, app_id: &str) -> StoreResult<Vec<PolicyBrief>> {
        let rows: Vec<(String, String, String, i64, f64, i64, i64)> = sqlx::query_as(self.sql(
            "SELECT name, scope, algorithm, max_permits, rate, version, created_ms \
             FROM policies WHERE app_id = ? ORDER BY name",
        ))
        .bind(app_id)
        .fetch_all(&mut *self.inner)
        .await?;
        rows.into_iter()
            .map(
                |(name, scope, algorithm, max_permits, rate, version, created_ms)| {
                    let invalid = |e| {
                        StoreError::Other(anyhow::anyhow!("stored policy {name:?} is invalid: {e}"))
                    };
                    Ok(PolicyBrief {
                        scope: Scope::parse_field("scope", &scope).map_err(invalid)?,
                        algorithm: Algorithm::parse_field("algorithm", &algorithm)
                            .map_err(invalid)?,
                        name,
                        max_permits,
                        rate,
                        version,
                        created_ms,
                    })
                },
            )
            .collect()
    }

    /// Every policy that names the application `slug` in its allowed apps or its
    /// overrides' matches (a JSON string in either column). Slugs hold no LIKE
    /// wildcard (`%`, `_`), so the pattern matches the quoted slug exactly; a per_key
    /// override whose key happens to equal the slug is found too, and the caller
    /// decides what to change.
    #[tracing::instrument(level = "debug", skip_all, fields(slug = %slug))]
    pub async fn policies_naming_app(&mut self, slug: &AppSlug) -> StoreResult<Vec<PolicyRecord>> {
        let pattern = format!("%\"{slug}\"%");
        let rows: Vec<PolicyRow> = sqlx::query_as(self.sql_built(format!(
            "{SELECT} WHERE p.allowed_apps LIKE ? OR p.overrides LIKE ? ORDER BY p.name"
        )))
        .bind(&pattern)
        .bind(&pattern)
        .fetch_all(&mut *self.inner)
        .await?;
        rows.into_iter().map(PolicyRow::parse).collect()
    }
}
