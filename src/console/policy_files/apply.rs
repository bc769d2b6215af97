//! Applying a policy file from the console: `GET /policy-files/apply` is the form (the
//! file pasted into a text box, or read into it from a file by static/console.js), a
//! POST to `/policy-files/plan` shows its plan and changes nothing, and the plan's
//! *Apply these changes* POSTs to `/policy-files/apply` the same text with the plan's
//! id, so that exactly that plan is applied (a change made in between is a 409 showing
//! the plan as it is now, nothing applied). After applying, the page says what was done
//! through a one-time note of the session (post-redirect-get). The permission rules are
//! the API's: owners (and admins) of every application the file touches.

use actix_web::http::StatusCode;
use actix_web::{HttpResponse, web};
use askama::Template;
use secrecy::SecretString;
use serde::Deserialize;

use super::plan_view::{Applied, PlanView};
use crate::console::error::ConsoleError;
use crate::console::last_hour::LastHour;
use crate::console::page::Chrome;
use crate::console::respond::{render_status, see_other};
use crate::console::session::SignedIn;
use crate::control::{ApplyError, ControlError};
use crate::policy_file::{self, Caps, PolicyFile};
use crate::state::AppState;

/// Where the form lives, and where the apply redirects to.
const PAGE: &str = "/policy-files/apply";

/// The largest file the form takes (the admin API and the CLI take larger ones).
pub const FILE_LIMIT: usize = 256 * 1024;

/// The form's body limit: a file of `FILE_LIMIT` bytes percent-encoded (at most 6
/// bytes per byte, a line break sent as `%0D%0A`), with room for the other fields.
pub const FORM_LIMIT: usize = 8 * FILE_LIMIT;

#[derive(Deserialize)]
pub struct FileForm {
    #[serde(default)]
    file: String,
    /// The checkbox's `true`, or absent.
    #[serde(default)]
    prune: bool,
    /// The plan being applied (the apply form only).
    #[serde(default)]
    plan_id: String,
    #[serde(default)]
    csrf: SecretString,
}

/// Why the file was not planned or applied, with the status of the page that says so.
pub struct Refusal {
    status: StatusCode,
    pub message: String,
    /// One line each: the file's errors (with document, line and field), or the
    /// database's (with the policy and field).
    pub details: Vec<String>,
}

#[derive(Template)]
#[template(path = "policy_files/apply.html")]
pub struct ApplyPage {
    chrome: Chrome,
    /// The applications whose policies the user may change (not listed for an admin,
    /// who may change every one).
    editable: Vec<String>,
    is_admin: bool,
    file: String,
    prune: bool,
    plan: Option<PlanView>,
    refusal: Option<Refusal>,
    /// What the apply this page follows did (shown once).
    applied: Option<Applied>,
}

impl ApplyPage {
    async fn load(
        state: &AppState,
        signed_in: &SignedIn,
        file: String,
        prune: bool,
    ) -> Result<Self, ConsoleError> {
        let actor = &signed_in.actor;
        // An admin may change every application's: the page says so without listing them.
        let editable = if actor.is_admin {
            Vec::new()
        } else {
            state.control.editable_apps(actor).await?
        };
        Ok(Self {
            chrome: signed_in.chrome("apps"),
            editable,
            is_admin: actor.is_admin,
            file,
            prune,
            plan: None,
            refusal: None,
            applied: None,
        })
    }

    /// Whether the user may change any application's policies: else the page says so
    /// and has no form.
    fn may_apply(&self) -> bool {
        self.is_admin || !self.editable.is_empty()
    }

    fn respond(&self) -> Result<HttpResponse, ConsoleError> {
        let status = match &self.refusal {
            Some(refusal) => refusal.status,
            None if self.may_apply() => StatusCode::OK,
            None => StatusCode::FORBIDDEN,
        };
        render_status(self, status)
    }

    fn refused(mut self, refusal: Refusal) -> Result<HttpResponse, ConsoleError> {
        self.refusal = Some(refusal);
        self.respond()
    }
}

/// `GET /policy-files/apply`: the form, and what the last apply of this session did.
pub async fn show(
    state: web::Data<AppState>,
    signed_in: SignedIn,
) -> Result<HttpResponse, ConsoleError> {
    let mut page = ApplyPage::load(&state, &signed_in, String::new(), false).await?;
    let applied: Vec<Applied> = state.control.take_flashes(&signed_in.token, PAGE).await?;
    page.applied = applied.into_iter().next_back();
    page.respond()
}

/// `POST /policy-files/plan`: the file's plan, nothing changed.
pub async fn plan(
    state: web::Data<AppState>,
    signed_in: SignedIn,
    form: web::Form<FileForm>,
) -> Result<HttpResponse, ConsoleError> {
    let (mut page, file) = received(&state, &signed_in, &form).await?;
    let file = match file {
        Ok(file) => file.desired(),
        Err(refusal) => return page.refused(refusal),
    };
    match state
        .control
        .plan_file(&signed_in.actor, &file, form.prune)
        .await
    {
        Ok(plan) => {
            page.plan = Some(with_last_hours(&state, PlanView::of(&plan)).await);
            page.respond()
        }
        Err(e) => page.refused(refusal(e)?),
    }
}

/// The plan with what each policy it deletes decided over the last hour (one Redis call).
async fn with_last_hours(state: &AppState, view: PlanView) -> PlanView {
    let names = view.deleted_names();
    if names.is_empty() {
        return view;
    }
    match state.control.last_hour_of(&names).await {
        Some(hours) => view.with_last_hours(hours.iter().map(|h| LastHour::of(h)).collect()),
        None => view,
    }
}

/// `POST /policy-files/apply`: the plan `plan_id` of the file, applied; then back to the
/// form, which says what was done.
pub async fn apply(
    state: web::Data<AppState>,
    signed_in: SignedIn,
    form: web::Form<FileForm>,
) -> Result<HttpResponse, ConsoleError> {
    let (mut page, file) = received(&state, &signed_in, &form).await?;
    if form.plan_id.is_empty() {
        return Err(ConsoleError::BadRequest(
            "Nothing was applied: a policy file is applied from its plan. Show the plan \
             first, then apply it."
                .into(),
        ));
    }
    let file = match file {
        Ok(file) => file.desired(),
        Err(refusal) => return page.refused(refusal),
    };
    let actor = &signed_in.actor;
    let applied = state
        .control
        .apply_file(actor, &file, form.prune, Some(&form.plan_id))
        .await;
    match applied {
        Ok(plan) => {
            let note = Applied::of(&plan);
            match state
                .control
                .leave_flash(&signed_in.token, PAGE, &note)
                .await
            {
                Ok(()) => Ok(see_other(PAGE)),
                Err(e) => {
                    // Applied all the same: said on this page, rather than an error page
                    // about a note.
                    tracing::warn!(error = %e, "the applied note was not kept; shown at once");
                    page.applied = Some(note);
                    page.respond()
                }
            }
        }
        Err(ApplyError::Control(
            e @ (ControlError::Conflict(_) | ControlError::VersionConflict { .. }),
        )) => {
            // Show the plan as it is now, to be read (and applied) afresh.
            page.plan = match state.control.plan_file(actor, &file, form.prune).await {
                Ok(plan) => Some(with_last_hours(&state, PlanView::of(&plan)).await),
                Err(_) => None,
            };
            page.refused(Refusal {
                status: StatusCode::CONFLICT,
                message: "Nothing was applied: the policies changed since the plan was \
                          made. The plan below is the one as they are now: read it before \
                          applying it."
                    .into(),
                details: vec![e.to_string()],
            })
        }
        Err(e) => page.refused(refusal(e)?),
    }
}

/// A form of this page, its CSRF token checked: the page to answer with (keeping the
/// text, as the file had it), and the file or why it cannot be read.
async fn received(
    state: &AppState,
    signed_in: &SignedIn,
    form: &FileForm,
) -> Result<(ApplyPage, Result<PolicyFile, Refusal>), ConsoleError> {
    signed_in.check_csrf(&form.csrf)?;
    let page = ApplyPage::load(state, signed_in, normalised(&form.file), form.prune).await?;
    // Not read for a user who may change no application's policies: reading costs CPU.
    if !page.may_apply() {
        let refusal = Refusal {
            status: StatusCode::FORBIDDEN,
            message: "Nothing was read: you may not change the policies of any application.".into(),
            details: Vec::new(),
        };
        return Ok((page, Err(refusal)));
    }
    let file = read(&page.file).await?;
    Ok((page, file))
}

/// The text as the file had it: browsers send a form's line breaks as CRLF.
fn normalised(text: &str) -> String {
    text.replace("\r\n", "\n")
}

/// The form's text as a policy file (read off the async workers), or why not.
async fn read(text: &str) -> Result<Result<PolicyFile, Refusal>, ConsoleError> {
    if text.trim().is_empty() {
        return Ok(Err(Refusal {
            status: StatusCode::UNPROCESSABLE_ENTITY,
            message: "The file is empty: paste a policy file (YAML or JSON) into the box, or \
                      choose one."
                .into(),
            details: Vec::new(),
        }));
    }
    if text.len() > FILE_LIMIT {
        return Ok(Err(Refusal {
            status: StatusCode::PAYLOAD_TOO_LARGE,
            message: format!(
                "The file is {} KiB, more than the {} KiB a policy file may have: split it \
                 into several files (one per application, for instance).",
                text.len().div_ceil(1024),
                FILE_LIMIT / 1024
            ),
            details: Vec::new(),
        }));
    }
    let caps = Caps::FILE.with_bytes(FILE_LIMIT);
    let read = policy_file::parse_off_thread(text.to_owned(), caps)
        .await
        .map_err(ConsoleError::Internal)?;
    Ok(read.map_err(|errors| Refusal {
        status: StatusCode::UNPROCESSABLE_ENTITY,
        message: "The file has errors; nothing was planned or changed:".into(),
        details: errors.0.iter().map(ToString::to_string).collect(),
    }))
}

/// The page's words for a plan or apply the control layer refused; errors no page of
/// this form can explain (the database down) go to the console's error page.
fn refusal(e: ApplyError) -> Result<Refusal, ConsoleError> {
    Ok(match e {
        ApplyError::Forbidden(apps) => Refusal {
            status: StatusCode::FORBIDDEN,
            message: format!(
                "Nothing was planned or changed: you may not change the policies of {}. Only \
                 their owners and admins may: take them out of the file, or ask one of them.",
                apps.join(", ")
            ),
            details: Vec::new(),
        },
        ApplyError::Control(ControlError::Invalid(errors)) => Refusal {
            status: StatusCode::UNPROCESSABLE_ENTITY,
            message: "The file cannot be applied as it is; nothing was changed:".into(),
            details: errors.0.iter().map(ToString::to_string).collect(),
        },
        ApplyError::Control(e) => return Err(e.into()),
    })
}
