//! An application's webhooks: made, listed with their latest deliveries, deleted, their
//! secret rotated and a delivery sent again. Owners manage them; viewers see them, never
//! their secrets. Each change is audited like any other.

use std::time::Duration;

use secrecy::ExposeSecret;
use serde::{Deserialize, Serialize};
use serde_json::json;
use utoipa::ToSchema;

use crate::auth::{Actor, Permission};
use crate::domain::{FieldErrors, WebhookEvent};
use crate::notify::receiver::{ReceiverRefused, parse_receiver, receiver_addresses};
use crate::notify::signature::WebhookSecret;
use crate::store::{
    AttemptRecord, AuditEntry, DeliveryRecord, NewWebhook, Tx, WebhookRecord, now_ms,
};

use super::inputs::not_null;
use super::reveal::{Reveal, Revealed};
use super::views::rfc3339;
use super::{Control, ControlError, ControlResult, authorised_app, visible_app};

/// Without a word from the owner: an episode ends after five quiet minutes.
pub const DEFAULT_QUIET_PERIOD_S: i64 = 300;
/// The longest quiet period: a day.
const QUIET_PERIOD_MAX_S: i64 = 86_400;
/// Without a word from the owner: near the limit under a tenth of it left.
pub const DEFAULT_NEAR_LIMIT_BELOW: f64 = 0.1;
/// How long the secret before a rotation still signs, beside the new one.
pub const PREVIOUS_SECRET_GRACE_MS: i64 = 24 * 60 * 60 * 1000;
/// The deliveries listed per webhook.
pub const DELIVERIES_LISTED: i64 = 20;
/// How long a receiver's name may take to resolve when a webhook is made.
const RESOLVE_TIMEOUT: Duration = Duration::from_secs(5);

/// A new webhook.
#[derive(Debug, Default, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct WebhookInput {
    /// Where events are POSTed: http or https, a public address unless the operator
    /// allows private ones.
    #[serde(default, deserialize_with = "not_null")]
    #[schema(nullable = false, max_length = 2048)]
    pub url: Option<String>,
    /// The events to send: `policy.denying`, `policy.recovered`, `policy.near_limit`,
    /// `policy.changed`.
    #[serde(default, deserialize_with = "not_null")]
    #[schema(nullable = false, min_items = 1, value_type = Option<Vec<WebhookEvent>>)]
    pub events: Option<Vec<String>>,
    /// `json` (the Standard Webhooks body, the default) or `slack` (a text summary a Slack
    /// incoming webhook shows).
    #[serde(default, deserialize_with = "not_null")]
    #[schema(nullable = false, pattern = "^(json|slack)$")]
    pub format: Option<String>,
    /// Seconds without a denial that end an episode (`policy.recovered`) and must pass
    /// before the next `policy.denying`; 300 when left out, at most a day.
    #[serde(default, deserialize_with = "not_null")]
    #[schema(nullable = false, minimum = 1, maximum = 86400)]
    pub quiet_period_s: Option<i64>,
    /// `policy.near_limit` when the remaining fraction of a policy's capacity falls below
    /// this (0 < x < 1); 0.1 when left out.
    #[serde(default, deserialize_with = "not_null")]
    #[schema(nullable = false, exclusive_minimum = 0, exclusive_maximum = 1)]
    pub near_limit_below: Option<f64>,
}

/// A webhook as listed: never its secret.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct WebhookView {
    pub id: String,
    pub url: String,
    pub format: String,
    pub events: Vec<String>,
    pub quiet_period_s: i64,
    pub near_limit_below: f64,
    pub created_by: String,
    pub created_at: String,
    /// Until when the secret before the last rotation still signs, beside the new one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub previous_secret_until: Option<String>,
    /// The latest deliveries, newest first.
    pub deliveries: Vec<DeliveryView>,
}

/// A webhook just made, or its secret just rotated: the only time the secret is shown.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct CreatedWebhook {
    #[serde(flatten)]
    pub webhook: WebhookView,
    /// `whsec_...`: the key receivers verify signatures with.
    pub secret: String,
}

/// One event sent (or being sent) to a webhook.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct DeliveryView {
    /// The `webhook-id` every attempt carries.
    pub id: String,
    pub event: String,
    pub occurred_at: String,
    /// `pending` (an attempt is due), `delivered` or `failed` (given up).
    pub state: &'static str,
    pub next_attempt_at: Option<String>,
    pub attempts: Vec<AttemptView>,
    /// The event's data, as sent.
    #[schema(value_type = Object)]
    pub data: serde_json::Value,
}

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct AttemptView {
    pub attempt: i64,
    pub at: String,
    /// The receiver's HTTP status; absent when it did not answer (`error` says why).
    pub status: Option<i64>,
    pub latency_ms: i64,
    /// The start of the receiver's answer.
    pub excerpt: String,
    pub error: Option<String>,
}

impl WebhookView {
    fn of(record: &WebhookRecord, deliveries: Vec<DeliveryView>) -> Self {
        Self {
            id: record.id.clone(),
            url: record.url.clone(),
            format: record.format.clone(),
            events: record.event_types().map(str::to_owned).collect(),
            quiet_period_s: record.quiet_period_ms / 1000,
            near_limit_below: record.near_limit_below,
            created_by: record.created_by.clone(),
            created_at: rfc3339(record.created_ms),
            previous_secret_until: record
                .previous_until_ms
                .filter(|&until| until > now_ms())
                .map(rfc3339),
            deliveries,
        }
    }

    /// What the audit log keeps of it.
    fn audited(record: &WebhookRecord) -> serde_json::Value {
        json!(Self::of(record, Vec::new()))
    }
}

impl DeliveryView {
    fn of(record: &DeliveryRecord, attempts: &[AttemptRecord]) -> Self {
        let state = match (record.next_attempt_ms, record.delivered_ms) {
            (Some(_), _) => "pending",
            (None, Some(_)) => "delivered",
            (None, None) => "failed",
        };
        Self {
            id: record.id.clone(),
            event: record.event_type.clone(),
            occurred_at: rfc3339(record.occurred_ms),
            state,
            next_attempt_at: record.next_attempt_ms.map(rfc3339),
            attempts: attempts
                .iter()
                .filter(|a| a.delivery_id == record.id)
                .map(|a| AttemptView {
                    attempt: a.attempt,
                    at: rfc3339(a.at_ms),
                    status: a.status,
                    latency_ms: a.latency_ms,
                    excerpt: a.excerpt.clone(),
                    error: a.error.clone(),
                })
                .collect(),
            data: serde_json::from_str(&record.data).unwrap_or(serde_json::Value::Null),
        }
    }
}

/// The input checked: every error found at once, the receiver's addresses last (it may
/// take a name lookup).
async fn validated(
    input: &WebhookInput,
    allow_private: bool,
) -> Result<(String, String, String, i64, f64), FieldErrors> {
    let mut errors = FieldErrors::default();
    let url = match input.url.as_deref() {
        None => {
            errors.push("url", "is required");
            None
        }
        Some(text) => match parse_receiver(text) {
            Ok(url) => Some(url),
            Err(e) => {
                errors.push("url", e.to_string());
                None
            }
        },
    };
    let events = match input.events.as_deref() {
        None | Some([]) => {
            errors.push("events", "name at least one event");
            None
        }
        Some(names) => {
            let mut known = Vec::new();
            for name in names {
                match WebhookEvent::parse(name.trim()) {
                    Some(event) => known.push(event),
                    None => errors.push(
                        "events",
                        format!(
                            "{name:?} is not an event; the events are {}",
                            WebhookEvent::ALL.map(WebhookEvent::as_str).join(", ")
                        ),
                    ),
                }
            }
            Some(WebhookEvent::join(&known))
        }
    };
    let format = match input.format.as_deref().map(str::trim) {
        None | Some("json") => "json",
        Some("slack") => "slack",
        Some(_) => {
            errors.push("format", "must be json or slack");
            "json"
        }
    };
    let quiet_s = input.quiet_period_s.unwrap_or(DEFAULT_QUIET_PERIOD_S);
    if !(1..=QUIET_PERIOD_MAX_S).contains(&quiet_s) {
        errors.push(
            "quiet_period_s",
            format!("must be from 1 to {QUIET_PERIOD_MAX_S} seconds"),
        );
    }
    let near = input.near_limit_below.unwrap_or(DEFAULT_NEAR_LIMIT_BELOW);
    if !(near > 0.0 && near < 1.0) {
        errors.push(
            "near_limit_below",
            "must be a fraction between 0 and 1, e.g. 0.1",
        );
    }
    errors.clone().into_result()?;
    let (Some(url), Some(events)) = (url, events) else {
        return Err(errors);
    };
    let resolved = tokio::time::timeout(RESOLVE_TIMEOUT, receiver_addresses(&url, allow_private))
        .await
        .unwrap_or_else(|_| {
            Err(ReceiverRefused::Unresolved {
                host: url.host_str().unwrap_or_default().to_owned(),
                why: format!("no answer within {} s", RESOLVE_TIMEOUT.as_secs()),
            })
        });
    if let Err(e) = resolved {
        errors.push("url", e.to_string());
        return Err(errors);
    }
    Ok((
        url.to_string(),
        events,
        format.to_owned(),
        quiet_s * 1000,
        near,
    ))
}

impl Control {
    /// A new webhook of the application; its secret is in the reply and nowhere else a
    /// reader of the API or the audit log can see.
    #[tracing::instrument(skip_all, fields(actor = %actor.name, slug = %slug))]
    pub async fn create_webhook(
        &self,
        actor: &Actor,
        slug: &str,
        input: &WebhookInput,
        reveal: Reveal<'_>,
    ) -> ControlResult<CreatedWebhook> {
        // Who may make one is checked before the receiver's name is looked up.
        let mut tx = self.store.begin_read().await?;
        authorised_app(&mut tx, actor, slug, Permission::Edit).await?;
        tx.commit().await?;
        let (url, events, format, quiet_period_ms, near_limit_below) =
            validated(input, self.allow_private_receivers).await?;
        let secret = WebhookSecret::generate().text();
        let mut tx = self.store.begin().await?;
        let app = authorised_app(&mut tx, actor, slug, Permission::Edit).await?;
        let record = tx
            .insert_webhook(&NewWebhook {
                app_id: &app.id,
                url: &url,
                format: &format,
                events: &events,
                quiet_period_ms,
                near_limit_below,
                secret: secret.expose_secret(),
                created_by: &actor.name,
            })
            .await?;
        tx.record_audit(AuditEntry {
            actor: actor.author(),
            app_slug: Some(&app.slug),
            entity_type: "webhook",
            entity_id: &record.id,
            action: "create",
            before: None,
            after: Some(WebhookView::audited(&record)),
        })
        .await?;
        keep_secret(&mut tx, reveal, &record, &secret).await?;
        tx.commit().await?;
        Ok(CreatedWebhook {
            webhook: WebhookView::of(&record, Vec::new()),
            secret: secret.expose_secret().to_owned(),
        })
    }

    /// The application's webhooks with their latest deliveries, for anyone who may see it.
    #[tracing::instrument(skip_all, fields(actor = %actor.name, slug = %slug))]
    pub async fn list_webhooks(
        &self,
        actor: &Actor,
        slug: &str,
    ) -> ControlResult<Vec<WebhookView>> {
        let mut tx = self.store.begin_read().await?;
        let (app, _) = visible_app(&mut tx, actor, slug).await?;
        let mut views = Vec::new();
        for record in tx.list_webhooks(&app.id).await? {
            let deliveries = deliveries_view(&mut tx, &record.id).await?;
            views.push(WebhookView::of(&record, deliveries));
        }
        tx.commit().await?;
        Ok(views)
    }

    #[tracing::instrument(skip_all, fields(actor = %actor.name, slug = %slug, id = %id))]
    pub async fn delete_webhook(&self, actor: &Actor, slug: &str, id: &str) -> ControlResult<()> {
        let mut tx = self.store.begin().await?;
        let app = authorised_app(&mut tx, actor, slug, Permission::Edit).await?;
        let record = tx
            .webhook(&app.id, id)
            .await?
            .ok_or(ControlError::NotFound("webhook"))?;
        tx.delete_webhook(&app.id, id).await?;
        tx.record_audit(AuditEntry {
            actor: actor.author(),
            app_slug: Some(&app.slug),
            entity_type: "webhook",
            entity_id: id,
            action: "delete",
            before: Some(WebhookView::audited(&record)),
            after: None,
        })
        .await?;
        tx.commit().await?;
        Ok(())
    }

    /// A new secret, shown this once; the one before still signs for a day beside it, so
    /// receivers can move over without refusing an event.
    #[tracing::instrument(skip_all, fields(actor = %actor.name, slug = %slug, id = %id))]
    pub async fn rotate_webhook_secret(
        &self,
        actor: &Actor,
        slug: &str,
        id: &str,
        reveal: Reveal<'_>,
    ) -> ControlResult<CreatedWebhook> {
        let mut tx = self.store.begin().await?;
        let app = authorised_app(&mut tx, actor, slug, Permission::Edit).await?;
        let mut record = tx
            .webhook(&app.id, id)
            .await?
            .ok_or(ControlError::NotFound("webhook"))?;
        let before = WebhookView::audited(&record);
        let secret = WebhookSecret::generate().text();
        let until = now_ms() + PREVIOUS_SECRET_GRACE_MS;
        tx.rotate_webhook_secret(id, secret.expose_secret(), &record.secret, until)
            .await?;
        record.previous_secret = Some(std::mem::take(&mut record.secret));
        record.previous_until_ms = Some(until);
        tx.record_audit(AuditEntry {
            actor: actor.author(),
            app_slug: Some(&app.slug),
            entity_type: "webhook",
            entity_id: id,
            action: "rotate_secret",
            before: Some(before),
            after: Some(WebhookView::audited(&record)),
        })
        .await?;
        keep_secret(&mut tx, reveal, &record, &secret).await?;
        let deliveries = deliveries_view(&mut tx, id).await?;
        tx.commit().await?;
        Ok(CreatedWebhook {
            webhook: WebhookView::of(&record, deliveries),
            secret: secret.expose_secret().to_owned(),
        })
    }

    /// Makes a delivery due again at once (*Send again*), whatever became of it.
    #[tracing::instrument(skip_all, fields(actor = %actor.name, slug = %slug, id = %id))]
    pub async fn send_webhook_again(
        &self,
        actor: &Actor,
        slug: &str,
        id: &str,
        delivery_id: &str,
    ) -> ControlResult<()> {
        let mut tx = self.store.begin().await?;
        let app = authorised_app(&mut tx, actor, slug, Permission::Edit).await?;
        tx.webhook(&app.id, id)
            .await?
            .ok_or(ControlError::NotFound("webhook"))?;
        if !tx.send_again(id, delivery_id).await? {
            return Err(ControlError::NotFound("delivery"));
        }
        tx.commit().await?;
        Ok(())
    }
}

/// The new secret left for the page that shows it (or the reply), in its transaction.
async fn keep_secret(
    tx: &mut Tx,
    reveal: Reveal<'_>,
    record: &WebhookRecord,
    secret: &secrecy::SecretString,
) -> ControlResult<()> {
    let shown = Revealed::WebhookSecret {
        id: record.id.clone(),
        url: record.url.clone(),
        secret: secret.expose_secret().to_owned(),
    };
    Ok(reveal.keep(tx, &shown).await?)
}

async fn deliveries_view(tx: &mut Tx, webhook_id: &str) -> ControlResult<Vec<DeliveryView>> {
    let deliveries = tx.deliveries_of(webhook_id, DELIVERIES_LISTED).await?;
    let Some(oldest) = deliveries.iter().map(|d| d.occurred_ms).min() else {
        return Ok(Vec::new());
    };
    let attempts = tx.attempts_of(webhook_id, oldest).await?;
    Ok(deliveries
        .iter()
        .map(|d| DeliveryView::of(d, &attempts))
        .collect())
}
