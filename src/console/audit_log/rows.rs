//! One audit event as the log shows it: who did what to which thing (API keys and tokens
//! by their label), and the changes as diffs in the console's units.

use crate::console::diff::{Change, changes};
use crate::console::format::short_time;
use crate::control::AuditView;

pub struct AuditRow {
    pub at: String,
    /// RFC 3339, for `<time datetime>`.
    pub at_iso: String,
    pub actor: String,
    pub app: String,
    /// What kind of thing changed: "policy", "API key", ...
    pub kind: String,
    /// Which one: a name, a slug, a username, a key's label.
    pub entity: String,
    /// The entity's page, for a policy or an application (a deleted one answers 404).
    pub href: Option<String>,
    pub action: String,
    pub changes: Vec<Change>,
    /// "in the console", "through the API", "at the command line"; empty when not known.
    pub source: &'static str,
    /// The link listing every change of the policy file's apply this one was part of.
    pub change_set_href: Option<String>,
}

fn source(event: &AuditView) -> &'static str {
    match event.source.as_deref() {
        Some("console") => "in the console",
        Some("api") => "through the API",
        Some("cli") => "at the command line",
        _ => "",
    }
}

fn kind(entity_type: &str) -> String {
    match entity_type {
        "api_key" => "API key".to_owned(),
        "access_token" => "access token".to_owned(),
        "app" => "application".to_owned(),
        other => other.replace('_', " "),
    }
}

fn action(event: &AuditView) -> String {
    match event.action.as_str() {
        "rollback" => match event
            .after
            .as_ref()
            .and_then(|a| a["restored_version"].as_i64())
        {
            Some(v) => format!("rolled back to version {v}"),
            None => "rolled back".to_owned(),
        },
        "create" => "created".to_owned(),
        "update" => "changed".to_owned(),
        "delete" => "deleted".to_owned(),
        "revoke" => "revoked".to_owned(),
        "reset_bucket" => "bucket reset".to_owned(),
        "set_password" => "password set".to_owned(),
        other => other.replace('_', " "),
    }
}

/// Keys and tokens are named by their label (their id is a meaningless hex string); the
/// label is in the event's before or after.
fn entity(event: &AuditView) -> String {
    if matches!(event.entity_type.as_str(), "api_key" | "access_token") {
        let label = [&event.after, &event.before]
            .into_iter()
            .flatten()
            .find_map(|v| v["label"].as_str());
        if let Some(label) = label {
            return label.to_owned();
        }
    }
    event.entity_id.clone()
}

/// A key's or token's events in words: a revocation is one change of status, a rotation
/// says until when the old key works and that a new one replaced it (the event holds the
/// old key before and after, not a before and after of one shape). `None`: the changes
/// are the usual field-by-field diff.
fn credential_changes(event: &AuditView) -> Option<Vec<Change>> {
    if !matches!(event.entity_type.as_str(), "api_key" | "access_token") {
        return None;
    }
    let change = |field: &str, before: Option<&str>, after: &str| Change {
        field: field.to_owned(),
        before: before.map(str::to_owned),
        after: Some(after.to_owned()),
    };
    match event.action.as_str() {
        "revoke" => Some(vec![change(
            "status",
            Some("working"),
            "revoked: refused from then on",
        )]),
        "rotate" => {
            let old = event.after.as_ref().map(|a| &a["old_key"]);
            let until = old
                .and_then(|o| o["expires_at"].as_str())
                .map_or_else(|| "unchanged".to_owned(), short_time);
            Some(vec![
                change("old key works until", None, &until),
                change(
                    "replaced by",
                    None,
                    "a new key with the same label (created in the same moment)",
                ),
            ])
        }
        _ => None,
    }
}

impl From<AuditView> for AuditRow {
    fn from(e: AuditView) -> Self {
        Self {
            at: short_time(&e.at),
            kind: kind(&e.entity_type),
            entity: entity(&e),
            href: match e.entity_type.as_str() {
                "policy" => Some(crate::console::format::policy_href(&e.entity_id)),
                "app" => Some(format!("/apps/{}", e.entity_id)),
                _ => None,
            },
            action: action(&e),
            source: source(&e),
            change_set_href: e
                .change_set
                .as_ref()
                .map(|id| format!("/audit?change_set={id}")),
            changes: credential_changes(&e)
                .unwrap_or_else(|| changes(e.before.as_ref(), e.after.as_ref())),
            at_iso: e.at,
            actor: e.actor,
            app: e.app.unwrap_or_default(),
        }
    }
}
