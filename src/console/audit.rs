//! The audit log: every change, newest first, filtered by application, user and policy,
//! fifty to a page.

use actix_web::{HttpResponse, web};
use askama::Template;
use serde::Deserialize;

use super::error::ConsoleError;
use super::format::{short_time, url_encode};
use super::page::Chrome;
use super::render;
use super::session::SignedIn;
use crate::control::AuditView;
use crate::state::AppState;
use crate::store::AuditFilter;

const PAGE_SIZE: u32 = 50;

#[derive(Debug, Default, Deserialize)]
pub struct AuditQuery {
    #[serde(default)]
    app: String,
    #[serde(default)]
    user: String,
    #[serde(default)]
    policy: String,
    #[serde(default, deserialize_with = "super::query::page_number")]
    page: Option<u32>,
}

pub struct AuditRow {
    pub at: String,
    pub actor: String,
    pub app: String,
    pub entity: String,
    pub action: String,
    pub before: String,
    pub after: String,
}

#[derive(Template)]
#[template(path = "audit.html")]
struct AuditPage {
    chrome: Chrome,
    query: AuditQuery,
    rows: Vec<AuditRow>,
    page: u32,
    has_next: bool,
}

impl AuditPage {
    fn filtered(&self) -> bool {
        !(self.query.app.is_empty() && self.query.user.is_empty() && self.query.policy.is_empty())
    }

    /// The link to another page of the same filter.
    fn page_link(&self, page: u32) -> String {
        format!(
            "/audit?app={}&user={}&policy={}&page={page}",
            url_encode(&self.query.app),
            url_encode(&self.query.user),
            url_encode(&self.query.policy)
        )
    }
}

fn pretty(value: Option<&serde_json::Value>) -> String {
    value
        .and_then(|v| serde_json::to_string_pretty(v).ok())
        .unwrap_or_default()
}

fn filter_value(value: &str) -> Option<String> {
    let value = value.trim();
    // A value no name could have matches nothing; it is not sent to SQL.
    (!value.is_empty() && value.len() <= 200 && !value.chars().any(char::is_control))
        .then(|| value.to_owned())
}

pub async fn list(
    state: web::Data<AppState>,
    signed_in: SignedIn,
    query: web::Query<AuditQuery>,
) -> Result<HttpResponse, ConsoleError> {
    let query = query.into_inner();
    let page = query.page.unwrap_or(1).clamp(1, 100_000);
    let filter = AuditFilter {
        app: filter_value(&query.app),
        user: filter_value(&query.user),
        policy: filter_value(&query.policy),
        visible_apps: None,
        page,
        per_page: PAGE_SIZE,
    };
    let events: Vec<AuditView> = state
        .control
        .list_audit(&signed_in.actor, filter.clone())
        .await?;
    // Is there an event after this page? Asked as a page of one: the event just after.
    let has_next = events.len() == PAGE_SIZE as usize
        && !state
            .control
            .list_audit(
                &signed_in.actor,
                AuditFilter {
                    page: page * PAGE_SIZE + 1,
                    per_page: 1,
                    ..filter
                },
            )
            .await?
            .is_empty();
    let rows = events
        .into_iter()
        .map(|e| AuditRow {
            at: short_time(&e.at),
            actor: e.actor,
            app: e.app.unwrap_or_default(),
            entity: format!("{} {}", e.entity_type.replace('_', " "), e.entity_id),
            action: e.action.replace('_', " "),
            before: pretty(e.before.as_ref()),
            after: pretty(e.after.as_ref()),
        })
        .collect();
    render(&AuditPage {
        chrome: signed_in.chrome("audit"),
        query,
        rows,
        page,
        has_next,
    })
}
