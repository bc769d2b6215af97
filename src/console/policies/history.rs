//! A policy's history (`/policies/{name}/history`): every saved version with its author and
//! time, what it changed against the version before it (in the form's units), and for
//! those who may edit the policy a button that rolls back to it (a POST with the CSRF
//! token; the rollback is a new version, so nothing in the history is lost).
//!
//! The list is `templates/policies/history_partial.html`, which reads a [`HistoryPartial`]
//! named `history`: any page holding one (and `chrome`) can include it.

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, web};
use askama::Template;
use secrecy::SecretString;
use serde::Deserialize;

use crate::console::diff::{Change, changes};
use crate::console::error::ConsoleError;
use crate::console::format::short_time;
use crate::console::page::{Chrome, Notice};
use crate::console::respond::{render_status, see_other};
use crate::console::session::SignedIn;
use crate::control::{ControlError, PolicyHistory, PolicyVersionView, PolicyView, RollbackInput};
use crate::state::AppState;

/// One version as the history shows it.
pub struct HistoryEntry {
    pub version: i64,
    /// "created", "changed", "rolled back to version 2", ...
    pub what: String,
    pub author: String,
    pub at: String,
    pub at_iso: String,
    /// Against the version before it (every field for the first one known).
    pub changes: Vec<Change>,
    /// Equal to the policy now: rolling back to it would change nothing.
    pub same_as_current: bool,
    pub is_current: bool,
}

/// The history list of one policy, for `history_partial.html`.
pub struct HistoryPartial {
    pub policy_name: String,
    pub current_version: i64,
    pub may_edit: bool,
    pub entries: Vec<HistoryEntry>,
    /// The next (older) page.
    pub older_link: Option<String>,
    /// Why a rollback just failed.
    pub error: Option<String>,
}

fn what(v: &PolicyVersionView) -> String {
    match (v.action.as_str(), v.restored_version) {
        ("create", _) => "Created".to_owned(),
        ("update", _) => "Changed".to_owned(),
        ("rollback", Some(to)) => format!("Rolled back to version {to}"),
        ("recorded", _) => {
            "Recorded as it was when history began (earlier changes are in the audit log)"
                .to_owned()
        }
        (other, _) => other.replace('_', " "),
    }
}

/// The policy's fields that make up a version (not its number or times).
pub(super) fn settings(policy: &PolicyView) -> serde_json::Value {
    let mut json = serde_json::to_value(policy).unwrap_or_default();
    if let Some(object) = json.as_object_mut() {
        for bookkeeping in ["version", "created_at", "updated_at"] {
            object.remove(bookkeeping);
        }
    }
    json
}

impl HistoryPartial {
    pub fn of(history: PolicyHistory) -> Self {
        let now = settings(&history.policy);
        let states: Vec<serde_json::Value> = history
            .versions
            .iter()
            .map(|v| settings(&v.policy))
            .collect();
        let previous = history.before_page.as_ref().map(|v| settings(&v.policy));
        let entries = history
            .versions
            .iter()
            .enumerate()
            .map(|(i, v)| {
                let older = states.get(i + 1).or(previous.as_ref());
                HistoryEntry {
                    version: v.version,
                    what: what(v),
                    author: v.author.clone(),
                    at: short_time(&v.at),
                    at_iso: v.at.clone(),
                    changes: changes(older, Some(&states[i])),
                    same_as_current: states[i] == now,
                    is_current: v.version == history.policy.version,
                }
            })
            .collect();
        let name = &history.policy.name;
        Self {
            older_link: history
                .older_than
                .map(|v| format!("/policies/{name}/history?before={v}")),
            policy_name: name.clone(),
            current_version: history.policy.version,
            may_edit: history.may_edit,
            entries,
            error: None,
        }
    }
}

#[derive(Template)]
#[template(path = "policies/history.html")]
struct HistoryPage {
    chrome: Chrome,
    owner_app: String,
    history: HistoryPartial,
}

#[derive(Debug, Deserialize)]
pub struct RollbackForm {
    #[serde(default)]
    to_version: String,
    #[serde(default)]
    version: String,
    #[serde(default)]
    csrf: SecretString,
}

/// `?before=` read by hand: a bad value is a sentence, not a deserializer's message.
fn before(req: &HttpRequest) -> Result<Option<i64>, ConsoleError> {
    let pairs = web::Query::<Vec<(String, String)>>::from_query(req.query_string())
        .map_err(|_| ConsoleError::BadRequest("The query string could not be read.".into()))?;
    match pairs.iter().find(|(k, _)| k == "before") {
        None => Ok(None),
        Some((_, v)) => v.trim().parse::<i64>().map(Some).map_err(|_| {
            ConsoleError::BadRequest(format!(
                "“before” must be a version number, such as 3; “{v}” is not one."
            ))
        }),
    }
}

async fn page(
    state: &AppState,
    signed_in: &SignedIn,
    name: &str,
    before: Option<i64>,
) -> Result<HistoryPage, ConsoleError> {
    let history = state
        .control
        .policy_history(&signed_in.actor, name, before)
        .await?;
    Ok(HistoryPage {
        chrome: signed_in.chrome("apps"),
        owner_app: history.policy.owner_app.clone(),
        history: HistoryPartial::of(history),
    })
}

/// `GET /policies/{name}/history[?before=]`.
pub async fn show(
    state: web::Data<AppState>,
    signed_in: SignedIn,
    name: web::Path<String>,
    req: HttpRequest,
    notice: web::Query<Notice>,
) -> Result<HttpResponse, ConsoleError> {
    let mut page = page(&state, &signed_in, &name, before(&req)?).await?;
    page.chrome = page.chrome.with_notice(&notice);
    render_status(&page, StatusCode::OK)
}

/// `POST /policies/{name}/rollback`: `to_version` becomes the policy again, if it is
/// still at `version` (as the page showed it).
pub async fn rollback(
    state: web::Data<AppState>,
    signed_in: SignedIn,
    name: web::Path<String>,
    form: web::Form<RollbackForm>,
) -> Result<HttpResponse, ConsoleError> {
    signed_in.check_csrf(&form.csrf)?;
    let number = |text: &str| text.trim().parse::<i64>().ok();
    let input = RollbackInput {
        to_version: number(&form.to_version),
        version: number(&form.version),
    };
    let (message, status) = match state
        .control
        .rollback_policy(&signed_in.actor, &name, input)
        .await
    {
        Ok(_) => {
            return Ok(see_other(&format!(
                "/policies/{name}/history?done=policy-rolled-back"
            )));
        }
        Err(ControlError::VersionConflict { current }) => (
            format!(
                "Someone else changed this policy meanwhile (it is now version {current}, \
                 shown below); nothing was rolled back. Look at their change, then roll back \
                 again if you still want to."
            ),
            StatusCode::CONFLICT,
        ),
        Err(ControlError::Invalid(errors)) => (
            format!(
                "Nothing was rolled back: {}.",
                errors
                    .0
                    .iter()
                    .map(|e| format!("{} {}", e.field.replace('_', " "), e.message))
                    .collect::<Vec<_>>()
                    .join("; ")
            ),
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
        Err(e) => return Err(e.into()),
    };
    let mut page = page(&state, &signed_in, &name, None).await?;
    page.history.error = Some(message);
    render_status(&page, status)
}
