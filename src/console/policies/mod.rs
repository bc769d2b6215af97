//! Creating, editing and deleting policies. A form that fails validation comes back with
//! each error next to its field and everything typed kept; an edit carries the version
//! it started from, so a change made meanwhile by someone else is shown, not overwritten.

use actix_web::http::StatusCode;
use actix_web::{HttpResponse, web};
use askama::Template;

use crate::console::error::ConsoleError;
use crate::console::format::readable_limit;
use crate::console::forms::FormErrors;
use crate::console::login::CsrfForm;
use crate::console::page::Chrome;
use crate::console::session::SignedIn;
use crate::console::{render, render_status, see_other};
use crate::control::{AppDetail, ControlError, PolicyView};
use crate::domain::{Algorithm, FieldErrors};
use crate::state::AppState;

mod form;
mod history;
mod overrides_text;
mod overview;

pub use history::{rollback, show as history};
pub use overview::{limit_status, reset, show};

use form::PolicyForm;

#[derive(Template)]
#[template(path = "policies/form.html")]
struct PolicyFormPage {
    chrome: Chrome,
    app: AppDetail,
    /// `None` when creating.
    editing: Option<String>,
    form: PolicyForm,
    errors: FormErrors,
    /// The algorithm choices: (value, label).
    algorithms: Vec<(&'static str, String)>,
}

/// Each algorithm with what it allows, for the form's choice.
fn algorithm_choices() -> Vec<(&'static str, String)> {
    Algorithm::ALL
        .iter()
        .map(|a| {
            (
                a.as_str(),
                format!("{}: {}", a.as_str().replace('_', " "), a.summary()),
            )
        })
        .collect()
}

impl PolicyFormPage {
    fn action(&self) -> String {
        match &self.editing {
            Some(name) => format!("/policies/{name}/edit"),
            None => format!("/apps/{}/policies", self.app.app.slug),
        }
    }

    fn other_errors(&self) -> Vec<String> {
        self.errors.others(&[
            "name",
            "algorithm",
            "rate",
            "rate_unit",
            "max_permits",
            "window_ms",
            "lease_ttl_ms",
            "allowed_apps",
            "failure_mode",
            "enabled",
            "description",
            "scope",
            "overrides",
        ])
    }
}

/// The application, if the actor may edit it; a viewer gets 403 even for the form.
async fn editable_app(
    state: &AppState,
    signed_in: &SignedIn,
    slug: &str,
) -> Result<AppDetail, ConsoleError> {
    let app = state.control.get_app(&signed_in.actor, slug).await?;
    if app.may_edit {
        Ok(app)
    } else {
        Err(ConsoleError::Forbidden)
    }
}

/// The policy and its application, if the actor may edit them.
async fn editable_policy(
    state: &AppState,
    signed_in: &SignedIn,
    name: &str,
) -> Result<(PolicyView, AppDetail), ConsoleError> {
    let policy = state.control.get_policy(&signed_in.actor, name).await?;
    let app = editable_app(state, signed_in, &policy.owner_app).await?;
    Ok((policy, app))
}

pub async fn new(
    state: web::Data<AppState>,
    signed_in: SignedIn,
    slug: web::Path<String>,
) -> Result<HttpResponse, ConsoleError> {
    let app = editable_app(&state, &signed_in, &slug).await?;
    render(&PolicyFormPage {
        chrome: signed_in.chrome("apps"),
        form: PolicyForm::blank(&app.app.slug),
        app,
        editing: None,
        errors: FormErrors::default(),
        algorithms: algorithm_choices(),
    })
}

pub async fn create(
    state: web::Data<AppState>,
    signed_in: SignedIn,
    slug: web::Path<String>,
    form: web::Form<PolicyForm>,
) -> Result<HttpResponse, ConsoleError> {
    signed_in.check_csrf(&form.csrf)?;
    let app = editable_app(&state, &signed_in, &slug).await?;
    let form = form.into_inner();
    let result = match form.to_input(None) {
        Ok(mut input) => {
            input.owner_app = Some(app.app.slug.clone());
            state.control.create_policy(&signed_in.actor, input).await
        }
        Err(errors) => Err(ControlError::Invalid(errors)),
    };
    let errors = match result {
        Ok(_) => return Ok(see_other(&format!("/apps/{slug}?done=policy-created"))),
        Err(ControlError::Invalid(errors)) => {
            FormErrors::from_fields(&form.locate_override_errors(errors))
        }
        Err(ControlError::Conflict(message)) => {
            let mut errors = FieldErrors::default();
            errors.push("name", message);
            FormErrors::from_fields(&errors)
        }
        Err(e) => return Err(e.into()),
    };
    let page = PolicyFormPage {
        chrome: signed_in.chrome("apps"),
        app,
        editing: None,
        form,
        errors,
        algorithms: algorithm_choices(),
    };
    render_status(&page, StatusCode::UNPROCESSABLE_ENTITY)
}

pub async fn edit(
    state: web::Data<AppState>,
    signed_in: SignedIn,
    name: web::Path<String>,
) -> Result<HttpResponse, ConsoleError> {
    let (policy, app) = editable_policy(&state, &signed_in, &name).await?;
    render(&PolicyFormPage {
        chrome: signed_in.chrome("apps"),
        form: PolicyForm::of(&policy),
        editing: Some(policy.name),
        app,
        errors: FormErrors::default(),
        algorithms: algorithm_choices(),
    })
}

pub async fn update(
    state: web::Data<AppState>,
    signed_in: SignedIn,
    name: web::Path<String>,
    form: web::Form<PolicyForm>,
) -> Result<HttpResponse, ConsoleError> {
    signed_in.check_csrf(&form.csrf)?;
    let (current, app) = editable_policy(&state, &signed_in, &name).await?;
    let mut form = form.into_inner();
    let result = match form.to_input(Some(&current)) {
        Ok(input) => {
            state
                .control
                .update_policy(&signed_in.actor, &name, input)
                .await
        }
        Err(errors) => Err(ControlError::Invalid(errors)),
    };
    let (errors, status) = match result {
        Ok(saved) => {
            return Ok(see_other(&format!(
                "/apps/{}?done=policy-updated",
                saved.owner_app
            )));
        }
        Err(ControlError::Invalid(errors)) => (
            FormErrors::from_fields(&form.locate_override_errors(errors)),
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
        Err(ControlError::VersionConflict { .. }) => {
            let theirs = state.control.get_policy(&signed_in.actor, &name).await?;
            let message = format!(
                "Someone else changed this policy while you edited it (it is now version {}: \
                 {}, {}, {}, max {} permits, {} overrides, allowed apps {}, failure mode {}, {}). \
                 Your changes are still in the form below and were not saved; save again to \
                 replace theirs.",
                theirs.version,
                theirs.algorithm.as_str(),
                theirs.scope.as_str(),
                readable_limit(&theirs),
                theirs.max_permits,
                theirs.overrides.len(),
                theirs.allowed_apps.join(", "),
                theirs.failure_mode.as_str(),
                if theirs.enabled {
                    "enabled"
                } else {
                    "disabled"
                },
            );
            // Saving again now is a deliberate choice made with their change in view.
            form.version = theirs.version.to_string();
            (FormErrors::general(message), StatusCode::CONFLICT)
        }
        Err(e) => return Err(e.into()),
    };
    let page = PolicyFormPage {
        chrome: signed_in.chrome("apps"),
        app,
        editing: Some(current.name),
        form,
        errors,
        algorithms: algorithm_choices(),
    };
    render_status(&page, status)
}

#[derive(Template)]
#[template(path = "policies/delete.html")]
struct DeletePage {
    chrome: Chrome,
    policy: PolicyView,
    rate: String,
}

pub async fn confirm_delete(
    state: web::Data<AppState>,
    signed_in: SignedIn,
    name: web::Path<String>,
) -> Result<HttpResponse, ConsoleError> {
    let (policy, _) = editable_policy(&state, &signed_in, &name).await?;
    render(&DeletePage {
        chrome: signed_in.chrome("apps"),
        rate: readable_limit(&policy),
        policy,
    })
}

pub async fn delete(
    state: web::Data<AppState>,
    signed_in: SignedIn,
    name: web::Path<String>,
    form: web::Form<CsrfForm>,
) -> Result<HttpResponse, ConsoleError> {
    signed_in.check_csrf(&form.csrf)?;
    let policy = state.control.get_policy(&signed_in.actor, &name).await?;
    state.control.delete_policy(&signed_in.actor, &name).await?;
    Ok(see_other(&format!(
        "/apps/{}?done=policy-deleted",
        policy.owner_app
    )))
}
