//! Creating, editing and deleting policies. A form that fails validation comes back with
//! every error next to its field and everything typed kept; an edit carries the version
//! it started from, so a change made meanwhile by someone else is shown, not overwritten.

use actix_web::http::StatusCode;
use actix_web::{HttpResponse, web};
use askama::Template;

use crate::console::error::ConsoleError;
use crate::console::format::{friendly_name, readable_limit};
use crate::console::forms::FormErrors;
use crate::console::html_form::HtmlForm;
use crate::console::page::Chrome;
use crate::console::respond::{render, render_status, see_other};
use crate::console::session::SignedIn;
use crate::control::{AppDetail, AppView, ControlError, PolicyView};
use crate::domain::{Algorithm, DurationUnit, FieldErrors, RateUnit};
use crate::state::AppState;

mod amounts;
mod delete;
mod descriptors_text;
mod editable;
mod form;
mod gateway;
mod history;
mod overrides_text;
mod overview;

pub use delete::{confirm_delete, delete};
pub use history::{rollback, show as history};
pub use overview::{limit_status, reset, show};

use editable::{editable_app, editable_policy};
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
    /// Every application, for the allowed applications' checkboxes.
    apps: Vec<AppView>,
}

/// A duration of the form: its amount and unit inputs, with their errors.
struct DurationField {
    field: &'static str,
    label: &'static str,
    hint: &'static str,
    /// The algorithms that take it (the script hides it for the others).
    algorithms: &'static str,
    amount: String,
    unit: String,
    error: Option<String>,
    unit_error: Option<String>,
}

/// One checkbox of the allowed applications.
struct AppChoice {
    slug: String,
    /// The application's name; `None` for a slug no application has (kept, so that
    /// nothing the form holds is lost, and named in an error).
    name: Option<String>,
    checked: bool,
}

impl PolicyFormPage {
    fn action(&self) -> String {
        match &self.editing {
            Some(name) => format!("/policies/{name}/edit"),
            None => format!("/apps/{}/policies", self.app.app.slug),
        }
    }

    /// Each algorithm with what it allows, for the form's choice.
    fn algorithms(&self) -> Vec<(&'static str, String)> {
        Algorithm::ALL
            .iter()
            .map(|a| {
                let name = friendly_name(a.as_str());
                (a.as_str(), format!("{name}: {}", a.summary()))
            })
            .collect()
    }

    fn rate_units(&self) -> Vec<&'static str> {
        RateUnit::ALL.iter().map(|u| u.as_str()).collect()
    }

    /// The duration units: (value, label).
    fn duration_units(&self) -> Vec<(&'static str, &'static str)> {
        DurationUnit::ALL
            .iter()
            .map(|u| {
                let label = match u {
                    DurationUnit::Ms => "ms",
                    DurationUnit::Second => "seconds",
                    DurationUnit::Minute => "minutes",
                    DurationUnit::Hour => "hours",
                    DurationUnit::Day => "days",
                };
                (u.as_str(), label)
            })
            .collect()
    }

    /// The window and the lease lifetime: an amount and a unit each.
    fn duration_fields(&self) -> Vec<DurationField> {
        let field = |field, label, hint, algorithms, amount: &str, unit: &str| DurationField {
            field,
            label,
            hint,
            algorithms,
            amount: amount.to_owned(),
            unit: unit.to_owned(),
            error: self.errors.get(field),
            unit_error: self.errors.get(&format!("{field}_unit")),
        };
        vec![
            field(
                "window",
                "Window",
                "Max permits are allowed per window, such as 1 minute or 100 ms.",
                "fixed_window sliding_log sliding_window",
                &self.form.window,
                &self.form.window_unit,
            ),
            field(
                "lease_ttl",
                "Lease lifetime",
                "A lease not released by then expires and frees its permit (a crashed \
                 client cannot hold it forever).",
                "concurrency",
                &self.form.lease_ttl,
                &self.form.lease_ttl_unit,
            ),
        ]
    }

    fn friendly<'a>(&self, code: &'a str) -> &'a str {
        friendly_name(code)
    }

    /// Every application, checked as the form holds them, then any slug it holds that
    /// no application has.
    fn app_choices(&self) -> Vec<AppChoice> {
        let checked = self.form.allowed_slugs();
        let known = self.apps.iter().map(|a| AppChoice {
            checked: checked.contains(&a.slug),
            slug: a.slug.clone(),
            name: Some(a.name.clone()),
        });
        let unknown = checked
            .iter()
            .filter(|s| !self.apps.iter().any(|a| &a.slug == *s))
            .map(|s| AppChoice {
                slug: s.clone(),
                name: None,
                checked: true,
            });
        known.chain(unknown).collect()
    }

    fn other_errors(&self) -> Vec<String> {
        self.errors.others(&[
            "name",
            "algorithm",
            "rate",
            "rate_unit",
            "max_permits",
            "window",
            "window_unit",
            "lease_ttl",
            "lease_ttl_unit",
            "allowed_apps",
            "failure_mode",
            "mode",
            "enabled",
            "description",
            "scope",
            "overrides",
            "descriptors",
        ])
    }
}

/// The form page, with what the form holds and its errors.
async fn form_page(
    state: &AppState,
    signed_in: &SignedIn,
    app: AppDetail,
    editing: Option<String>,
    form: PolicyForm,
    errors: FormErrors,
) -> Result<PolicyFormPage, ConsoleError> {
    let apps = state
        .control
        .allowed_app_choices(&signed_in.actor, &app.app.slug)
        .await?;
    Ok(PolicyFormPage {
        chrome: signed_in.chrome("apps"),
        app,
        editing,
        form,
        errors,
        apps,
    })
}

pub async fn new(
    state: web::Data<AppState>,
    signed_in: SignedIn,
    slug: web::Path<String>,
) -> Result<HttpResponse, ConsoleError> {
    let app = editable_app(&state, &signed_in, &slug).await?;
    let form = PolicyForm::blank(&app.app.slug);
    render(&form_page(&state, &signed_in, app, None, form, FormErrors::default()).await?)
}

pub async fn create(
    state: web::Data<AppState>,
    signed_in: SignedIn,
    slug: web::Path<String>,
    form: HtmlForm<PolicyForm>,
) -> Result<HttpResponse, ConsoleError> {
    signed_in.check_csrf(&form.csrf)?;
    let app = editable_app(&state, &signed_in, &slug).await?;
    let form = form.into_inner();
    let mut input = form.to_input(None);
    input.owner_app = Some(app.app.slug.clone());
    let saved = state.control.create_policy(&signed_in.actor, input).await;
    let errors = match saved {
        Ok(_) => return Ok(see_other(&format!("/apps/{slug}?done=policy-created"))),
        Err(ControlError::Invalid(errors)) => FormErrors::from_fields(&form.in_form_terms(errors)),
        Err(ControlError::Conflict(message)) => {
            let mut errors = FieldErrors::default();
            errors.push("name", message);
            FormErrors::from_fields(&errors)
        }
        Err(e) => return Err(e.into()),
    };
    let page = form_page(&state, &signed_in, app, None, form, errors).await?;
    render_status(&page, StatusCode::UNPROCESSABLE_ENTITY)
}

pub async fn edit(
    state: web::Data<AppState>,
    signed_in: SignedIn,
    name: web::Path<String>,
) -> Result<HttpResponse, ConsoleError> {
    let (policy, app) = editable_policy(&state, &signed_in, &name).await?;
    let form = PolicyForm::of(&policy);
    let page = form_page(
        &state,
        &signed_in,
        app,
        Some(policy.name),
        form,
        FormErrors::default(),
    );
    render(&page.await?)
}

pub async fn update(
    state: web::Data<AppState>,
    signed_in: SignedIn,
    name: web::Path<String>,
    form: HtmlForm<PolicyForm>,
) -> Result<HttpResponse, ConsoleError> {
    signed_in.check_csrf(&form.csrf)?;
    let mut form = form.into_inner();
    // One transaction: the policy read once, the change made from it and saved.
    let saved = state
        .control
        .edit_policy(&signed_in.actor, &name, |current| {
            // The name's input is read-only and not sent: shown again after any error.
            form.name = current.name.clone();
            form.to_input(Some(current))
        })
        .await;
    let (errors, status) = match saved {
        Ok(saved) => {
            return Ok(see_other(&format!(
                "/apps/{}?done=policy-updated",
                saved.owner_app
            )));
        }
        Err(ControlError::Invalid(errors)) => (
            FormErrors::from_fields(&form.in_form_terms(errors)),
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
        Err(ControlError::VersionConflict { .. }) => {
            let theirs = state.control.get_policy(&signed_in.actor, &name).await?;
            // Saving again now is a deliberate choice made with their change in view.
            form.version = theirs.version.to_string();
            (
                FormErrors::general(conflict_message(&theirs)),
                StatusCode::CONFLICT,
            )
        }
        Err(e) => return Err(e.into()),
    };
    // Not saved: the form again, on its application's page.
    let (current, app) = editable_policy(&state, &signed_in, &name).await?;
    let page = form_page(&state, &signed_in, app, Some(current.name), form, errors).await?;
    render_status(&page, status)
}

/// What an edit that came second is told about the change that came first.
fn conflict_message(theirs: &PolicyView) -> String {
    format!(
        "Someone else changed this policy while you edited it (it is now version {}: \
         {}, {}, {}, max {} permits, {} overrides, allowed apps {}, {}, {}). \
         Your changes are still in the form below and were not saved; save again to \
         replace theirs.",
        theirs.version,
        friendly_name(theirs.algorithm.as_str()),
        friendly_name(theirs.scope.as_str()),
        readable_limit(theirs),
        theirs.max_permits,
        theirs.overrides.len(),
        theirs.allowed_apps.join(", "),
        friendly_name(theirs.failure_mode.as_str()),
        if theirs.enabled {
            "enabled"
        } else {
            "disabled"
        },
    )
}
