//! A deleted policy's page (`/policies/{name}` once it is gone): who deleted it and when,
//! the settings it had, its history, and for those who may edit its application a button
//! that creates it again from that version.

use actix_web::{HttpResponse, http::StatusCode, web};
use askama::Template;

use crate::console::diff::{Change, changes};
use crate::console::error::ConsoleError;
use crate::console::format::{policy_href, short_time};
use crate::console::page::Chrome;
use crate::console::respond::{render_status, see_other};
use crate::console::session::{CsrfForm, SignedIn};
use crate::control::{ControlError, DeletedPolicy, PolicyHistory};
use crate::state::AppState;

use super::history::{HistoryPartial, settings};

#[derive(Template)]
#[template(path = "policies/deleted.html")]
struct DeletedPage {
    chrome: Chrome,
    name: String,
    owner_app: String,
    last_version: i64,
    /// "alice, 2026-11-27 10:02 UTC" with its RFC 3339 time, when the audit log says.
    deleted: Option<(String, String, String)>,
    settings: Vec<Change>,
    may_recreate: bool,
    history: HistoryPartial,
    /// Why recreating it just failed.
    error: Option<String>,
}

impl DeletedPage {
    fn of(chrome: Chrome, name: &str, deleted: DeletedPolicy) -> Self {
        let last = &deleted.last;
        let mut history = HistoryPartial::of(PolicyHistory {
            policy: last.policy.clone(),
            may_edit: false,
            versions: deleted.versions,
            older_than: None,
            before_page: None,
        });
        for entry in &mut history.entries {
            entry.is_current = false;
        }
        Self {
            chrome,
            name: name.to_owned(),
            owner_app: last.policy.owner_app.clone(),
            last_version: last.version,
            deleted: deleted.deleted.map(|(by, at)| (by, short_time(&at), at)),
            settings: changes(None, Some(&settings(&last.policy))),
            may_recreate: deleted.may_recreate,
            history,
            error: None,
        }
    }
}

/// The deleted policy's page, or the 404 it was asked for when there is none to show.
pub async fn page_or_not_found(
    state: &AppState,
    signed_in: &SignedIn,
    name: &str,
    not_found: ConsoleError,
) -> Result<HttpResponse, ConsoleError> {
    match state.control.deleted_policy(&signed_in.actor, name).await {
        Ok(deleted) => {
            let page = DeletedPage::of(signed_in.chrome("apps"), name, deleted);
            render_status(&page, StatusCode::OK)
        }
        Err(ControlError::NotFound(_)) => Err(not_found),
        Err(e) => Err(e.into()),
    }
}

/// `POST /policies/{name}/recreate`: the deleted policy again, as it was (owners).
pub async fn recreate(
    state: web::Data<AppState>,
    signed_in: SignedIn,
    name: web::Path<String>,
    form: web::Form<CsrfForm>,
) -> Result<HttpResponse, ConsoleError> {
    signed_in.check_csrf(&form.csrf)?;
    match state.control.recreate_policy(&signed_in.actor, &name).await {
        Ok(policy) => Ok(see_other(&format!(
            "{}?done=policy-recreated",
            policy_href(&policy.name)
        ))),
        Err(e @ (ControlError::Conflict(_) | ControlError::Invalid(_))) => {
            let message = match &e {
                ControlError::Invalid(errors) => errors
                    .0
                    .iter()
                    .map(|e| format!("Its {} {}.", e.field.replace('_', " "), e.message))
                    .collect::<Vec<_>>()
                    .join(" "),
                other => format!("{other}."),
            };
            let deleted = state
                .control
                .deleted_policy(&signed_in.actor, &name)
                .await?;
            let mut page = DeletedPage::of(signed_in.chrome("apps"), &name, deleted);
            page.error = Some(format!("It cannot be created again as it was: {message}"));
            render_status(&page, StatusCode::CONFLICT)
        }
        Err(e) => Err(e.into()),
    }
}
