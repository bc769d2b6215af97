//! Creating, editing and deleting policies. A form that fails validation comes back with
//! each error next to its field and everything typed kept; an edit carries the version
//! it started from, so a change made meanwhile by someone else is shown, not overwritten.

use actix_web::http::StatusCode;
use actix_web::{HttpResponse, web};
use askama::Template;
use serde::Deserialize;

use super::error::ConsoleError;
use super::format::{number, rate_in_unit, readable_limit, unit_seconds};
use super::forms::FormErrors;
use super::login::CsrfForm;
use super::page::Chrome;
use super::session::SignedIn;
use super::{render, render_status, see_other};
use crate::control::{AppDetail, ControlError, PolicyInput, PolicyView};
use crate::domain::{Algorithm, FieldErrors};
use crate::state::AppState;

/// What the policy form sends: text as typed, parsed here so that a bad number is an
/// error next to its field like any other.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct PolicyForm {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub algorithm: String,
    #[serde(default)]
    pub rate: String,
    #[serde(default)]
    pub rate_unit: String,
    #[serde(default)]
    pub max_permits: String,
    #[serde(default)]
    pub window_ms: String,
    #[serde(default)]
    pub lease_ttl_ms: String,
    #[serde(default)]
    pub allowed_apps: String,
    #[serde(default)]
    pub failure_mode: String,
    /// A checkbox: present when checked.
    pub enabled: Option<String>,
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    pub version: String,
    #[serde(default)]
    pub csrf: String,
}

impl PolicyForm {
    fn blank(owner_app: &str) -> Self {
        Self {
            algorithm: "token_bucket".to_owned(),
            rate_unit: "second".to_owned(),
            allowed_apps: owner_app.to_owned(),
            failure_mode: "closed".to_owned(),
            enabled: Some("on".to_owned()),
            ..Self::default()
        }
    }

    fn of(policy: &PolicyView) -> Self {
        let (rate, rate_unit) = match policy.rate.map(rate_in_unit) {
            Some((amount, unit)) if amount.fract() == 0.0 => (number(amount), unit),
            Some((amount, unit)) => (amount.to_string(), unit),
            None => (String::new(), "second"),
        };
        let text = |v: Option<i64>| v.map(|v| v.to_string()).unwrap_or_default();
        Self {
            name: policy.name.clone(),
            algorithm: policy.algorithm.as_str().to_owned(),
            rate,
            rate_unit: rate_unit.to_owned(),
            max_permits: policy.max_permits.to_string(),
            window_ms: text(policy.window_ms),
            lease_ttl_ms: text(policy.lease_ttl_ms),
            allowed_apps: policy.allowed_apps.join(", "),
            failure_mode: policy.failure_mode.as_str().to_owned(),
            enabled: policy.enabled.then(|| "on".to_owned()),
            description: policy.description.clone(),
            version: policy.version.to_string(),
            csrf: String::new(),
        }
    }

    /// The input for `control`, or the errors of the fields that are not even numbers.
    /// A field left empty is not sent (the form hides the fields the chosen algorithm
    /// does not use; `control` refuses any that is sent anyway, naming it). On an edit, the
    /// rate is only sent when it really changed: the form shows it rounded to its unit,
    /// and re-sending that would nudge the stored value.
    fn to_input(&self, current: Option<&PolicyView>) -> Result<PolicyInput, FieldErrors> {
        let mut errors = FieldErrors::default();
        let rate = match (self.rate.trim(), unit_seconds(&self.rate_unit)) {
            ("", _) => None,
            (_, None) => {
                errors.push("rate_unit", "must be second, minute, hour or day");
                None
            }
            (amount, Some(seconds)) => match amount.parse::<f64>() {
                Ok(amount) if amount.is_finite() => Some(amount / seconds),
                _ => {
                    errors.push("rate", "must be a number, such as 10 or 0.5");
                    None
                }
            },
        };
        let rate = match (rate, current.and_then(|c| c.rate)) {
            (Some(new), Some(cur)) if ((new - cur) / cur).abs() < 1e-6 => None,
            (rate, _) => rate,
        };
        let mut whole = |field: &str, text: &str, example: &str| -> Option<i64> {
            match text.trim() {
                "" => None,
                t => t.parse::<i64>().map_or_else(
                    |_| {
                        errors.push(field, format!("must be a whole number, such as {example}"));
                        None
                    },
                    Some,
                ),
            }
        };
        let max_permits = whole("max_permits", &self.max_permits, "10");
        let window_ms = whole("window_ms", &self.window_ms, "1000");
        let lease_ttl_ms = whole("lease_ttl_ms", &self.lease_ttl_ms, "30000");
        let version = match current.map(|_| self.version.trim().parse::<i64>()) {
            None => None,
            Some(Ok(v)) => Some(v),
            Some(Err(_)) => {
                errors.push("version", "is missing; reload the page");
                None
            }
        };
        errors.clone().into_result()?;
        let allowed_apps = self
            .allowed_apps
            .split(|c: char| c == ',' || c.is_whitespace())
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect();
        Ok(PolicyInput {
            name: current.is_none().then(|| self.name.trim().to_owned()),
            owner_app: None,
            algorithm: Some(self.algorithm.clone()),
            rate,
            max_permits,
            window_ms,
            lease_ttl_ms,
            allowed_apps: Some(allowed_apps),
            failure_mode: Some(self.failure_mode.clone()),
            enabled: Some(self.enabled.is_some()),
            // Browsers send line breaks as CRLF; store them as typed.
            description: Some(self.description.replace("\r\n", "\n")),
            version,
        })
    }
}

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
    if matches!(app.your_role.as_str(), "owner" | "admin") {
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
        Err(ControlError::Invalid(errors)) => FormErrors::from_fields(&errors),
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
            FormErrors::from_fields(&errors),
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
        Err(ControlError::VersionConflict { .. }) => {
            let theirs = state.control.get_policy(&signed_in.actor, &name).await?;
            let message = format!(
                "Someone else changed this policy while you edited it (it is now version {}: \
                 {}, {}, max {} permits, allowed apps {}, failure mode {}, {}). Your changes \
                 are still in the form below and were not saved; save again to replace theirs.",
                theirs.version,
                theirs.algorithm.as_str(),
                readable_limit(&theirs),
                theirs.max_permits,
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
