//! Webhooks, the events waiting to be sent to them, and each attempt made. A delivery row
//! is the outbox: it is written in the transaction of what it reports (an audited change)
//! or right after the event is seen, and every instance's sender claims due rows one by
//! one with a conditional UPDATE, so each attempt is made by one instance.

use super::{StoreResult, Tx, new_id, now_ms};
use crate::domain::WebhookEvent;

/// A webhook of an application, its secrets included (they sign what is sent).
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct WebhookRecord {
    pub id: String,
    pub app_id: String,
    pub url: String,
    /// `json` or `slack`.
    pub format: String,
    /// Event types, comma-separated, sorted.
    pub events: String,
    pub quiet_period_ms: i64,
    /// `policy.near_limit` fires when the remaining fraction falls below this.
    pub near_limit_below: f64,
    pub secret: String,
    /// The secret before the last rotation, still signing until `previous_until_ms`.
    pub previous_secret: Option<String>,
    pub previous_until_ms: Option<i64>,
    pub created_by: String,
    pub created_ms: i64,
}

impl WebhookRecord {
    pub fn event_types(&self) -> impl Iterator<Item = &str> {
        self.events.split(',').filter(|e| !e.is_empty())
    }
}

/// What a new webhook is made of.
#[derive(Debug, Clone)]
pub struct NewWebhook<'a> {
    pub app_id: &'a str,
    pub url: &'a str,
    pub format: &'a str,
    pub events: &'a str,
    pub quiet_period_ms: i64,
    pub near_limit_below: f64,
    pub secret: &'a str,
    pub created_by: &'a str,
}

/// A webhook as every instance's event watcher needs it: whose, and what it listens for.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct WatchingWebhook {
    pub id: String,
    pub app_slug: String,
    pub events: String,
    pub quiet_period_ms: i64,
    pub near_limit_below: f64,
}

/// An event for a webhook, with its attempts so far.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct DeliveryRecord {
    pub id: String,
    pub webhook_id: String,
    pub event_type: String,
    pub data: String,
    pub occurred_ms: i64,
    pub attempts: i64,
    /// `None`: no attempt is due (delivered, or given up).
    pub next_attempt_ms: Option<i64>,
    pub delivered_ms: Option<i64>,
}

/// A delivery due now, with what sending it needs.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct DueDelivery {
    pub id: String,
    pub webhook_id: String,
    pub event_type: String,
    pub data: String,
    pub occurred_ms: i64,
    pub attempts: i64,
    pub url: String,
    pub format: String,
    pub secret: String,
    pub previous_secret: Option<String>,
    pub previous_until_ms: Option<i64>,
}

/// One attempt's outcome.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct AttemptRecord {
    pub delivery_id: String,
    pub attempt: i64,
    pub at_ms: i64,
    /// The receiver's HTTP status; `None`: no answer (`error` says why).
    pub status: Option<i64>,
    pub latency_ms: i64,
    pub excerpt: String,
    pub error: Option<String>,
}

const WEBHOOK_COLUMNS: &str = "id, app_id, url, format, events, quiet_period_ms, \
     near_limit_below, secret, previous_secret, previous_until_ms, created_by, created_ms";

impl Tx {
    #[tracing::instrument(level = "debug", skip_all, fields(app_id = %new.app_id))]
    pub async fn insert_webhook(&mut self, new: &NewWebhook<'_>) -> StoreResult<WebhookRecord> {
        let record = WebhookRecord {
            id: new_id(),
            app_id: new.app_id.to_owned(),
            url: new.url.to_owned(),
            format: new.format.to_owned(),
            events: new.events.to_owned(),
            quiet_period_ms: new.quiet_period_ms,
            near_limit_below: new.near_limit_below,
            secret: new.secret.to_owned(),
            previous_secret: None,
            previous_until_ms: None,
            created_by: new.created_by.to_owned(),
            created_ms: now_ms(),
        };
        sqlx::query(self.sql(
            "INSERT INTO webhooks (id, app_id, url, format, events, quiet_period_ms, \
             near_limit_below, secret, created_by, created_ms) \
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        ))
        .bind(&record.id)
        .bind(&record.app_id)
        .bind(&record.url)
        .bind(&record.format)
        .bind(&record.events)
        .bind(record.quiet_period_ms)
        .bind(record.near_limit_below)
        .bind(&record.secret)
        .bind(&record.created_by)
        .bind(record.created_ms)
        .execute(&mut *self.inner)
        .await?;
        Ok(record)
    }

    /// An application's webhooks, oldest first.
    #[tracing::instrument(level = "debug", skip_all, fields(app_id = %app_id))]
    pub async fn list_webhooks(&mut self, app_id: &str) -> StoreResult<Vec<WebhookRecord>> {
        let query = format!(
            "SELECT {WEBHOOK_COLUMNS} FROM webhooks WHERE app_id = ? ORDER BY created_ms, id"
        );
        Ok(sqlx::query_as(self.sql_built(query))
            .bind(app_id)
            .fetch_all(&mut *self.inner)
            .await?)
    }

    #[tracing::instrument(level = "debug", skip_all, fields(app_id = %app_id, id = %id))]
    pub async fn webhook(&mut self, app_id: &str, id: &str) -> StoreResult<Option<WebhookRecord>> {
        let query = format!("SELECT {WEBHOOK_COLUMNS} FROM webhooks WHERE app_id = ? AND id = ?");
        Ok(sqlx::query_as(self.sql_built(query))
            .bind(app_id)
            .bind(id)
            .fetch_optional(&mut *self.inner)
            .await?)
    }

    /// Deletes a webhook with its deliveries; whether there was one.
    #[tracing::instrument(level = "debug", skip_all, fields(id = %id))]
    pub async fn delete_webhook(&mut self, app_id: &str, id: &str) -> StoreResult<bool> {
        // Explicitly, not by cascade: SQLite enforces foreign keys only when asked to.
        sqlx::query(self.sql(
            "DELETE FROM webhook_attempts WHERE delivery_id IN \
             (SELECT id FROM webhook_deliveries WHERE webhook_id = ?)",
        ))
        .bind(id)
        .execute(&mut *self.inner)
        .await?;
        sqlx::query(self.sql("DELETE FROM webhook_deliveries WHERE webhook_id = ?"))
            .bind(id)
            .execute(&mut *self.inner)
            .await?;
        let done = sqlx::query(self.sql("DELETE FROM webhooks WHERE app_id = ? AND id = ?"))
            .bind(app_id)
            .bind(id)
            .execute(&mut *self.inner)
            .await?;
        Ok(done.rows_affected() > 0)
    }

    /// A new secret for the webhook, the one before still signing until `previous_until_ms`.
    #[tracing::instrument(level = "debug", skip_all, fields(id = %id))]
    pub async fn rotate_webhook_secret(
        &mut self,
        id: &str,
        secret: &str,
        previous: &str,
        previous_until_ms: i64,
    ) -> StoreResult<()> {
        sqlx::query(self.sql(
            "UPDATE webhooks SET secret = ?, previous_secret = ?, previous_until_ms = ? \
             WHERE id = ?",
        ))
        .bind(secret)
        .bind(previous)
        .bind(previous_until_ms)
        .bind(id)
        .execute(&mut *self.inner)
        .await?;
        Ok(())
    }

    /// Every webhook of every application, as the event watchers need them.
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn watching_webhooks(&mut self) -> StoreResult<Vec<WatchingWebhook>> {
        Ok(sqlx::query_as(self.sql(
            "SELECT w.id, a.slug AS app_slug, w.events, w.quiet_period_ms, w.near_limit_below \
             FROM webhooks w JOIN apps a ON a.id = w.app_id ORDER BY w.id",
        ))
        .fetch_all(&mut *self.inner)
        .await?)
    }

    /// An event for each webhook of the application `app_slug` that listens for
    /// `event`, due at once; how many.
    #[tracing::instrument(level = "debug", skip_all, fields(app = %app_slug, event = event.as_str()))]
    pub async fn enqueue_event(
        &mut self,
        app_slug: &str,
        event: WebhookEvent,
        data: &str,
        occurred_ms: i64,
    ) -> StoreResult<usize> {
        let hooks: Vec<(String, String)> = sqlx::query_as(self.sql(
            "SELECT w.id, w.events FROM webhooks w JOIN apps a ON a.id = w.app_id \
             WHERE a.slug = ?",
        ))
        .bind(app_slug)
        .fetch_all(&mut *self.inner)
        .await?;
        let mut sent = 0;
        for (webhook_id, events) in hooks {
            if event.in_list(&events) {
                self.enqueue_delivery(&webhook_id, event.as_str(), data, occurred_ms)
                    .await?;
                sent += 1;
            }
        }
        Ok(sent)
    }

    /// An event for one webhook, due at once; its id (the `webhook-id` it is sent with),
    /// or `None` when the webhook is gone (deleted since the event was seen).
    #[tracing::instrument(level = "debug", skip_all, fields(webhook_id = %webhook_id))]
    pub async fn enqueue_delivery(
        &mut self,
        webhook_id: &str,
        event_type: &str,
        data: &str,
        occurred_ms: i64,
    ) -> StoreResult<Option<String>> {
        let id = format!("msg_{}", new_id());
        let done = sqlx::query(self.sql(
            "INSERT INTO webhook_deliveries (id, webhook_id, event_type, data, occurred_ms, \
             attempts, next_attempt_ms) SELECT ?, id, ?, ?, ?, 0, ? FROM webhooks WHERE id = ?",
        ))
        .bind(&id)
        .bind(event_type)
        .bind(data)
        .bind(occurred_ms)
        .bind(occurred_ms)
        .bind(webhook_id)
        .execute(&mut *self.inner)
        .await?;
        Ok((done.rows_affected() == 1).then_some(id))
    }

    /// Up to `limit` deliveries due at `now` that no instance holds, the longest due first,
    /// leaving out those of the webhooks in `skipping` (which this instance sends to as
    /// much as it may: their due rows must not crowd out the others').
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn due_deliveries(
        &mut self,
        now: i64,
        limit: i64,
        skipping: &[String],
    ) -> StoreResult<Vec<DueDelivery>> {
        let mut query = String::from(
            "SELECT d.id, d.webhook_id, d.event_type, d.data, d.occurred_ms, d.attempts, w.url, \
             w.format, w.secret, w.previous_secret, w.previous_until_ms \
             FROM webhook_deliveries d JOIN webhooks w ON w.id = d.webhook_id \
             WHERE d.next_attempt_ms <= ? AND (d.claimed_until_ms IS NULL OR d.claimed_until_ms < ?)",
        );
        if !skipping.is_empty() {
            let marks = vec!["?"; skipping.len()].join(", ");
            query.push_str(&format!(" AND d.webhook_id NOT IN ({marks})"));
        }
        query.push_str(" ORDER BY d.next_attempt_ms, d.id LIMIT ?");
        let mut select = sqlx::query_as(self.sql_built(query)).bind(now).bind(now);
        for webhook_id in skipping {
            select = select.bind(webhook_id);
        }
        Ok(select.bind(limit).fetch_all(&mut *self.inner).await?)
    }

    /// Claims a due delivery for this instance until `until`, if no other instance did
    /// since it was read (`attempts` as read): whether it is this instance's to send.
    #[tracing::instrument(level = "debug", skip_all, fields(id = %id))]
    pub async fn claim_delivery(
        &mut self,
        id: &str,
        attempts: i64,
        now: i64,
        until: i64,
    ) -> StoreResult<bool> {
        let done = sqlx::query(self.sql(
            "UPDATE webhook_deliveries SET claimed_until_ms = ?, attempts = attempts + 1 \
             WHERE id = ? AND attempts = ? AND next_attempt_ms <= ? \
             AND (claimed_until_ms IS NULL OR claimed_until_ms < ?)",
        ))
        .bind(until)
        .bind(id)
        .bind(attempts)
        .bind(now)
        .bind(now)
        .execute(&mut *self.inner)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Records a claimed attempt and what comes next: `next_attempt_ms` `None` ends the
    /// delivery (`delivered` says whether the receiver took it).
    #[tracing::instrument(level = "debug", skip_all, fields(id = %attempt.delivery_id))]
    pub async fn record_attempt(
        &mut self,
        attempt: &AttemptRecord,
        next_attempt_ms: Option<i64>,
        delivered: bool,
    ) -> StoreResult<()> {
        sqlx::query(self.sql(
            "INSERT INTO webhook_attempts (delivery_id, attempt, at_ms, status, latency_ms, \
             excerpt, error) VALUES (?, ?, ?, ?, ?, ?, ?)",
        ))
        .bind(&attempt.delivery_id)
        .bind(attempt.attempt)
        .bind(attempt.at_ms)
        .bind(attempt.status)
        .bind(attempt.latency_ms)
        .bind(&attempt.excerpt)
        .bind(&attempt.error)
        .execute(&mut *self.inner)
        .await?;
        sqlx::query(self.sql(
            "UPDATE webhook_deliveries SET next_attempt_ms = ?, claimed_until_ms = NULL, \
             delivered_ms = ? WHERE id = ?",
        ))
        .bind(next_attempt_ms)
        .bind(delivered.then_some(attempt.at_ms))
        .bind(&attempt.delivery_id)
        .execute(&mut *self.inner)
        .await?;
        Ok(())
    }

    /// A webhook's latest deliveries, newest first.
    #[tracing::instrument(level = "debug", skip_all, fields(webhook_id = %webhook_id))]
    pub async fn deliveries_of(
        &mut self,
        webhook_id: &str,
        limit: i64,
    ) -> StoreResult<Vec<DeliveryRecord>> {
        Ok(sqlx::query_as(self.sql(
            "SELECT id, webhook_id, event_type, data, occurred_ms, attempts, next_attempt_ms, \
             delivered_ms FROM webhook_deliveries WHERE webhook_id = ? \
             ORDER BY occurred_ms DESC, id DESC LIMIT ?",
        ))
        .bind(webhook_id)
        .bind(limit)
        .fetch_all(&mut *self.inner)
        .await?)
    }

    /// The attempts of a webhook's deliveries since `since_ms`, in order.
    #[tracing::instrument(level = "debug", skip_all, fields(webhook_id = %webhook_id))]
    pub async fn attempts_of(
        &mut self,
        webhook_id: &str,
        since_ms: i64,
    ) -> StoreResult<Vec<AttemptRecord>> {
        Ok(sqlx::query_as(self.sql(
            "SELECT t.delivery_id, t.attempt, t.at_ms, t.status, t.latency_ms, t.excerpt, \
             t.error FROM webhook_attempts t \
             JOIN webhook_deliveries d ON d.id = t.delivery_id \
             WHERE d.webhook_id = ? AND d.occurred_ms >= ? ORDER BY t.delivery_id, t.attempt",
        ))
        .bind(webhook_id)
        .bind(since_ms)
        .fetch_all(&mut *self.inner)
        .await?)
    }

    /// Forgets the deliveries that ended (delivered or given up) before `before_ms`, with
    /// their attempts; how many.
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn prune_deliveries(&mut self, before_ms: i64) -> StoreResult<u64> {
        sqlx::query(self.sql(
            "DELETE FROM webhook_attempts WHERE delivery_id IN (SELECT id FROM \
             webhook_deliveries WHERE next_attempt_ms IS NULL AND occurred_ms < ?)",
        ))
        .bind(before_ms)
        .execute(&mut *self.inner)
        .await?;
        let done = sqlx::query(self.sql(
            "DELETE FROM webhook_deliveries WHERE next_attempt_ms IS NULL AND occurred_ms < ?",
        ))
        .bind(before_ms)
        .execute(&mut *self.inner)
        .await?;
        Ok(done.rows_affected())
    }

    /// Makes a delivery of the webhook due again now (*Send again*); whether there is one.
    #[tracing::instrument(level = "debug", skip_all, fields(id = %delivery_id))]
    pub async fn send_again(&mut self, webhook_id: &str, delivery_id: &str) -> StoreResult<bool> {
        let done = sqlx::query(self.sql(
            "UPDATE webhook_deliveries SET next_attempt_ms = ?, claimed_until_ms = NULL \
             WHERE webhook_id = ? AND id = ?",
        ))
        .bind(now_ms())
        .bind(webhook_id)
        .bind(delivery_id)
        .execute(&mut *self.inner)
        .await?;
        Ok(done.rows_affected() > 0)
    }
}
