use serde::Serialize;

use super::{StoreResult, Tx, now_ms};

/// One change, as the code that made it describes it.
#[derive(Debug, Clone)]
pub struct AuditEntry<'a> {
    pub actor: &'a str,
    pub app_slug: Option<&'a str>,
    pub entity_type: &'static str,
    pub entity_id: &'a str,
    pub action: &'static str,
    pub before: Option<serde_json::Value>,
    pub after: Option<serde_json::Value>,
}

#[derive(Debug, Clone, PartialEq, Serialize, sqlx::FromRow)]
pub struct AuditRecord {
    pub id: i64,
    pub at_ms: i64,
    pub actor: String,
    pub app_slug: Option<String>,
    pub entity_type: String,
    pub entity_id: String,
    pub action: String,
    pub before_json: Option<String>,
    pub after_json: Option<String>,
}

#[derive(Debug, Clone, Default)]
pub struct AuditFilter {
    pub app: Option<String>,
    pub user: Option<String>,
    pub policy: Option<String>,
    /// Only events of these applications (a non-admin's view); `None` means all.
    pub visible_apps: Option<Vec<String>>,
    /// 1-based.
    pub page: u32,
    pub per_page: u32,
}

impl Tx {
    #[tracing::instrument(level = "debug", skip_all, fields(entity = entry.entity_type, action = entry.action))]
    pub async fn record_audit(&mut self, entry: AuditEntry<'_>) -> StoreResult<()> {
        let text = |v: Option<serde_json::Value>| v.map(|v| v.to_string());
        sqlx::query(self.sql(
            "INSERT INTO audit_events (at_ms, actor, app_slug, entity_type, entity_id, action, \
             before_json, after_json) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        ))
        .bind(now_ms())
        .bind(entry.actor)
        .bind(entry.app_slug)
        .bind(entry.entity_type)
        .bind(entry.entity_id)
        .bind(entry.action)
        .bind(text(entry.before))
        .bind(text(entry.after))
        .execute(&mut *self.inner)
        .await?;
        Ok(())
    }

    /// Events matching the filter, newest first.
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn list_audit(&mut self, filter: &AuditFilter) -> StoreResult<Vec<AuditRecord>> {
        let mut query = String::from(
            "SELECT id, at_ms, actor, app_slug, entity_type, entity_id, action, before_json, \
             after_json FROM audit_events WHERE 1 = 1",
        );
        let mut binds: Vec<String> = Vec::new();
        if let Some(app) = &filter.app {
            query.push_str(" AND app_slug = ?");
            binds.push(app.clone());
        }
        if let Some(user) = &filter.user {
            query.push_str(" AND actor = ?");
            binds.push(user.clone());
        }
        if let Some(policy) = &filter.policy {
            query.push_str(" AND entity_type = 'policy' AND entity_id = ?");
            binds.push(policy.clone());
        }
        if let Some(apps) = &filter.visible_apps {
            if apps.is_empty() {
                return Ok(Vec::new());
            }
            query.push_str(" AND app_slug IN (");
            query.push_str(&vec!["?"; apps.len()].join(", "));
            query.push(')');
            binds.extend(apps.iter().cloned());
        }
        let per_page = filter.per_page.clamp(1, 200);
        let offset = (filter.page.max(1) - 1).saturating_mul(per_page);
        query.push_str(&format!(
            " ORDER BY id DESC LIMIT {per_page} OFFSET {offset}"
        ));
        let mut q = sqlx::query_as(self.sql_built(query));
        for bind in binds {
            q = q.bind(bind);
        }
        Ok(q.fetch_all(&mut *self.inner).await?)
    }
}
