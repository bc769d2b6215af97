//! The audit log: every change, newest first, as field-by-field diffs in the console's
//! units; filtered by application, user and policy (chosen from lists of those the log
//! names) and a date range, fifty to a page; and the same events as CSV (`/audit.csv`).

mod query;
mod rows;

use actix_web::http::header;
use actix_web::{HttpRequest, HttpResponse};
use askama::Template;

use super::csv;
use super::error::ConsoleError;
use super::page::Chrome;
use super::respond::render;
use super::session::SignedIn;
use crate::control::ControlError;
use crate::state::AppState;
use crate::store::AuditChoices;

pub use query::AuditQuery;
use rows::AuditRow;

const PAGE_SIZE: u32 = 50;

/// One choice of a filter's list.
pub struct Choice {
    pub value: String,
    pub selected: bool,
}

/// A filter's list: "all", then each value (the chosen one kept even when no event of
/// this page's view names it any more).
fn choices(values: Vec<String>, chosen: &str) -> Vec<Choice> {
    let mut values = values;
    if !chosen.is_empty() && !values.iter().any(|v| v == chosen) {
        values.push(chosen.to_owned());
        values.sort();
    }
    values
        .into_iter()
        .map(|value| Choice {
            selected: value == chosen,
            value,
        })
        .collect()
}

#[derive(Template)]
#[template(path = "audit.html")]
struct AuditPage {
    chrome: Chrome,
    query: AuditQuery,
    apps: Vec<Choice>,
    users: Vec<Choice>,
    policies: Vec<Choice>,
    rows: Vec<AuditRow>,
    page: u32,
    has_next: bool,
}

impl AuditPage {
    fn filtered(&self) -> bool {
        self.query.filtered()
    }

    /// Whether the reader sees every change (an admin), or only those of their own
    /// applications and account.
    fn is_admin(&self) -> bool {
        self.chrome.user.as_ref().is_some_and(|u| u.is_admin)
    }

    /// The link to another page of the same filter.
    fn page_link(&self, page: u32) -> String {
        format!("/audit?{}&page={page}", self.query.to_query_string())
    }

    fn csv_link(&self) -> String {
        format!("/audit.csv?{}", self.query.to_query_string())
    }
}

/// `GET /audit`.
pub async fn list(
    state: actix_web::web::Data<AppState>,
    signed_in: SignedIn,
    req: HttpRequest,
) -> Result<HttpResponse, ConsoleError> {
    let query = AuditQuery::parse(req.query_string())?;
    let page = query.page;
    let found = state
        .control
        .audit_page(&signed_in.actor, query.filter(PAGE_SIZE))
        .await?;
    let AuditChoices {
        apps,
        users,
        policies,
    } = found.choices;
    render(&AuditPage {
        chrome: signed_in.chrome("audit"),
        apps: choices(apps, &query.app),
        users: choices(users, &query.user),
        policies: choices(policies, &query.policy),
        rows: found.events.into_iter().map(AuditRow::from).collect(),
        page,
        has_next: found.has_next,
        query,
    })
}

const CSV_HEADER: [&str; 11] = [
    "time (UTC)",
    "user",
    "application",
    "entity type",
    "entity",
    "action",
    "changes",
    "before (JSON)",
    "after (JSON)",
    "source",
    "change set",
];

/// `GET /audit.csv`: every event the same filters show (not only a page), as a file.
pub async fn export(
    state: actix_web::web::Data<AppState>,
    signed_in: SignedIn,
    req: HttpRequest,
) -> Result<HttpResponse, ConsoleError> {
    let query = AuditQuery::parse(req.query_string())?;
    let events = match state
        .control
        .export_audit(&signed_in.actor, query.filter(PAGE_SIZE))
        .await
    {
        Err(ControlError::Invalid(errors)) => {
            let message = errors
                .0
                .iter()
                .map(|e| e.message.clone())
                .collect::<Vec<_>>();
            return Err(ConsoleError::BadRequest(format!(
                "The export was not made: {}.",
                message.join("; ")
            )));
        }
        other => other?,
    };
    let mut body = csv::line(&CSV_HEADER);
    for event in events {
        let json = |v: &Option<serde_json::Value>| v.as_ref().map(ToString::to_string);
        let (before, after) = (json(&event.before), json(&event.after));
        let (source, change_set) = (
            event.source.clone().unwrap_or_default(),
            event.change_set.clone().unwrap_or_default(),
        );
        let row = AuditRow::from(event);
        let changes: Vec<String> = row.changes.iter().map(|c| c.text()).collect();
        body.push_str(&csv::line(&[
            row.at.trim_end_matches(" UTC"),
            &row.actor,
            &row.app,
            &row.kind,
            &row.entity,
            &row.action,
            &changes.join("\n"),
            before.as_deref().unwrap_or(""),
            after.as_deref().unwrap_or(""),
            &source,
            &change_set,
        ]));
    }
    Ok(HttpResponse::Ok()
        .content_type("text/csv; charset=utf-8")
        .insert_header((
            header::CONTENT_DISPOSITION,
            format!("attachment; filename=\"{}\"", query.file_name()),
        ))
        .insert_header((header::CACHE_CONTROL, "no-store"))
        .body(body))
}
