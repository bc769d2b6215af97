use serde::Serialize;

use super::{StoreResult, Tx, now_ms};
use crate::domain::WebhookEvent;

/// Who made a change, and from where.
#[derive(Debug, Clone, Copy)]
pub struct Author<'a> {
    pub name: &'a str,
    /// `console`, `api` or `cli`.
    pub source: &'static str,
    /// Shared by the changes of one policy file's apply.
    pub change_set: Option<&'a str>,
}

/// One change, as the code that made it describes it.
#[derive(Debug, Clone)]
pub struct AuditEntry<'a> {
    pub actor: Author<'a>,
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
    /// `None` for events recorded before it was kept.
    pub source: Option<String>,
    pub change_set: Option<String>,
}

#[derive(Debug, Clone, Default)]
pub struct AuditFilter {
    pub app: Option<String>,
    pub user: Option<String>,
    pub policy: Option<String>,
    /// Only the changes of one policy file's apply.
    pub change_set: Option<String>,
    /// Events at or after this time (Unix ms).
    pub from_ms: Option<i64>,
    /// Events before this time (Unix ms).
    pub until_ms: Option<i64>,
    /// Only events of these applications (a non-admin's view); `None` means all.
    pub visible_apps: Option<Vec<String>>,
    /// 1-based.
    pub page: u32,
    pub per_page: u32,
    /// Read one event more than the page (the first of the next), to tell whether another
    /// page follows.
    pub peek_next: bool,
}

/// The most events one request reads: a CSV export's limit (a page is far smaller).
pub const AUDIT_EXPORT_MAX: u32 = 100_000;

/// What the audit log's filters can choose from, each list sorted.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AuditChoices {
    pub apps: Vec<String>,
    pub users: Vec<String>,
    pub policies: Vec<String>,
}

enum Bind {
    Text(String),
    Int(i64),
}

/// Limits a query to the events of `apps`, when given (a member's view).
fn visible_clause(query: &mut String, binds: &mut Vec<Bind>, apps: Option<&[String]>) {
    if let Some(apps) = apps {
        query.push_str(" AND app_slug IN (");
        query.push_str(&vec!["?"; apps.len()].join(", "));
        query.push(')');
        binds.extend(apps.iter().cloned().map(Bind::Text));
    }
}

impl Tx {
    #[tracing::instrument(level = "debug", skip_all, fields(entity = entry.entity_type, action = entry.action))]
    pub async fn record_audit(&mut self, entry: AuditEntry<'_>) -> StoreResult<()> {
        let text = |v: &Option<serde_json::Value>| v.as_ref().map(|v| v.to_string());
        let at_ms = now_ms();
        sqlx::query(self.sql(
            "INSERT INTO audit_events (at_ms, actor, app_slug, entity_type, entity_id, action, \
             before_json, after_json, source, change_set) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        ))
        .bind(at_ms)
        .bind(entry.actor.name)
        .bind(entry.app_slug)
        .bind(entry.entity_type)
        .bind(entry.entity_id)
        .bind(entry.action)
        .bind(text(&entry.before))
        .bind(text(&entry.after))
        .bind(entry.actor.source)
        .bind(entry.actor.change_set)
        .execute(&mut *self.inner)
        .await?;
        // A policy's change is told to the application's webhooks from the same record,
        // in the same transaction: no change without its event, no event without it.
        if entry.entity_type == "policy"
            && let Some(app) = entry.app_slug
        {
            let data = serde_json::json!({
                "application": app,
                "policy": entry.entity_id,
                "actor": entry.actor.name,
                "source": entry.actor.source,
                "action": entry.action,
                "before": entry.before,
                "after": entry.after,
            });
            self.enqueue_event(app, WebhookEvent::Changed, &data.to_string(), at_ms)
                .await?;
        }
        Ok(())
    }

    /// Events matching the filter, newest first.
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn list_audit(&mut self, filter: &AuditFilter) -> StoreResult<Vec<AuditRecord>> {
        if filter.visible_apps.as_ref().is_some_and(Vec::is_empty) {
            return Ok(Vec::new());
        }
        let mut query = String::from(
            "SELECT id, at_ms, actor, app_slug, entity_type, entity_id, action, before_json, \
             after_json, source, change_set FROM audit_events WHERE 1 = 1",
        );
        let mut binds: Vec<Bind> = Vec::new();
        let mut text = |query: &mut String, clause: &str, value: &Option<String>| {
            if let Some(v) = value {
                query.push_str(clause);
                binds.push(Bind::Text(v.clone()));
            }
        };
        text(&mut query, " AND app_slug = ?", &filter.app);
        text(&mut query, " AND actor = ?", &filter.user);
        text(&mut query, " AND change_set = ?", &filter.change_set);
        text(
            &mut query,
            " AND entity_type = 'policy' AND entity_id = ?",
            &filter.policy,
        );
        for (clause, value) in [
            (" AND at_ms >= ?", filter.from_ms),
            (" AND at_ms < ?", filter.until_ms),
        ] {
            if let Some(ms) = value {
                query.push_str(clause);
                binds.push(Bind::Int(ms));
            }
        }
        visible_clause(&mut query, &mut binds, filter.visible_apps.as_deref());
        let per_page = filter.per_page.clamp(1, AUDIT_EXPORT_MAX);
        let offset = (filter.page.max(1) - 1).saturating_mul(per_page);
        let limit = per_page + u32::from(filter.peek_next);
        query.push_str(&format!(" ORDER BY id DESC LIMIT {limit} OFFSET {offset}"));
        let mut q = sqlx::query_as(self.sql_built(query));
        for bind in binds {
            q = match bind {
                Bind::Text(t) => q.bind(t),
                Bind::Int(i) => q.bind(i),
            };
        }
        Ok(q.fetch_all(&mut *self.inner).await?)
    }

    /// The applications, users and policies the events (of `visible_apps`, when given)
    /// name, for the audit log's filter lists; one statement.
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn audit_choices(
        &mut self,
        visible_apps: Option<&[String]>,
    ) -> StoreResult<AuditChoices> {
        let mut choices = AuditChoices::default();
        if visible_apps.is_some_and(<[String]>::is_empty) {
            return Ok(choices);
        }
        let mut query = String::new();
        let mut binds = Vec::new();
        for (i, (kind, column, condition)) in [
            ("app", "app_slug", "app_slug IS NOT NULL"),
            ("user", "actor", "1 = 1"),
            ("policy", "entity_id", "entity_type = 'policy'"),
        ]
        .into_iter()
        .enumerate()
        {
            if i > 0 {
                query.push_str(" UNION ALL ");
            }
            query.push_str(&format!(
                "SELECT '{kind}' AS kind, {column} AS value FROM audit_events WHERE {condition}"
            ));
            visible_clause(&mut query, &mut binds, visible_apps);
            query.push_str(&format!(" GROUP BY {column}"));
        }
        let mut q = sqlx::query_as::<_, (String, String)>(self.sql_built(query));
        for bind in binds {
            if let Bind::Text(t) = bind {
                q = q.bind(t);
            }
        }
        for (kind, value) in q.fetch_all(&mut *self.inner).await? {
            match kind.as_str() {
                "app" => choices.apps.push(value),
                "user" => choices.users.push(value),
                _ => choices.policies.push(value),
            }
        }
        for list in [&mut choices.apps, &mut choices.users, &mut choices.policies] {
            list.sort();
        }
        Ok(choices)
    }
}
