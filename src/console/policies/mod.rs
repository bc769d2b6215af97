//! Creating, editing and deleting policies. A form that fails validation comes back with
//! every error next to its field and everything typed kept; an edit carries the version
//! it started from, so a change made meanwhile by someone else is shown, not overwritten.

use actix_web::http::StatusCode;
use actix_web::{HttpResponse, web};
use askama::Template;

use crate::console::error::ConsoleError;
use crate::console::format::friendly_name;
use crate::console::forms::FormErrors;
use crate::console::html_form::HtmlForm;
use crate::console::page::Chrome;
use crate::console::respond::{render, render_status, see_other};
use crate::console::session::SignedIn;
use crate::control::{AppDetail, AppView, ControlError, PolicyVersionView};
use crate::domain::{Algorithm, DurationUnit, FieldErrors, RateUnit};
use crate::state::AppState;

mod amounts;
mod delete;
mod deleted;
mod descriptors_text;
mod editable;
mod form;
mod gateway;
mod history;
mod merge;
mod overrides_text;
mod overview;

pub use delete::{confirm_delete, delete};
pub use deleted::recreate;
pub use history::{rollback, show as history};
pub use overview::{REFRESH_MS, limit_status, reset, show};

use editable::{editable_app, editable_policy};
use form::PolicyForm;
use merge::{Collision, Part, Side};

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
    /// After a conflict: the fields both edits changed, each with a choice.
    collisions: Vec<Collision>,
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

    /// The collision of the field with this input id, if both edits changed it.
    fn collision(&self, field: &str) -> Option<&Collision> {
        self.collisions.iter().find(|c| c.part.field() == field)
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
        collisions: Vec::new(),
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
    let chosen = merge::choices(&std::mem::take(&mut form.keep));
    if !chosen.is_empty() {
        // A conflict page's form carries the version it showed: "theirs" is its value.
        let theirs = form_at(&state, &signed_in, &name, &form.version).await?;
        let mut unchosen = Vec::new();
        for (part, side) in chosen {
            match side {
                Some(Side::Theirs) => part.copy(&theirs, &mut form),
                Some(Side::Yours) => {}
                None => unchosen.push(Collision {
                    part,
                    theirs: part.shown(&theirs),
                    yours: part.shown(&form),
                }),
            }
        }
        if !unchosen.is_empty() {
            let errors = FormErrors::general(format!(
                "Choose whose value to keep for the {} (next to the field), then save. \
                 Nothing has been saved yet.",
                merge::in_words(&unchosen.iter().map(|c| c.part).collect::<Vec<_>>()),
            ));
            let refused = Refused {
                errors,
                status: StatusCode::UNPROCESSABLE_ENTITY,
                collisions: unchosen,
            };
            return form_again(&state, &signed_in, &name, form, refused).await;
        }
    }
    let mut merged = false;
    // Each round that meets a newer version merges with it and tries again; a policy
    // changed by others faster than that is left to the user.
    for _ in 0..MERGE_ROUNDS {
        // One transaction: the policy read once, the change made from it and saved.
        let saved = state
            .control
            .edit_policy(&signed_in.actor, &name, |current| {
                // The name's input is read-only and not sent: shown again after any error.
                form.name = current.name.clone();
                form.to_input(Some(current))
            })
            .await;
        let refused = match saved {
            Ok(saved) => {
                let done = if merged {
                    "policy-merged"
                } else {
                    "policy-updated"
                };
                return Ok(see_other(&format!("/apps/{}?done={done}", saved.owner_app)));
            }
            Err(ControlError::Invalid(errors)) => Refused {
                errors: FormErrors::from_fields(&form.in_form_terms(errors)),
                status: StatusCode::UNPROCESSABLE_ENTITY,
                collisions: Vec::new(),
            },
            Err(ControlError::VersionConflict { current }) => {
                match merged_with(&state, &signed_in, &name, &form, current).await? {
                    (next, None) => {
                        form = next;
                        merged = true;
                        continue;
                    }
                    (next, Some(refused)) => {
                        form = next;
                        refused
                    }
                }
            }
            Err(e) => return Err(e.into()),
        };
        return form_again(&state, &signed_in, &name, form, refused).await;
    }
    let refused = Refused {
        errors: FormErrors::general(
            "Others are changing this policy as you save: your changes are in the form \
             below, on its latest version, and were not saved. Save again.",
        ),
        status: StatusCode::CONFLICT,
        collisions: Vec::new(),
    };
    form_again(&state, &signed_in, &name, form, refused).await
}

/// Versions an edit merges with before it leaves the choice to the user.
const MERGE_ROUNDS: usize = 3;

/// Why an edit was not saved, for the form shown again.
struct Refused {
    errors: FormErrors,
    status: StatusCode,
    collisions: Vec<Collision>,
}

/// The form of the policy's saved version `version` (as a form sent it), or of the policy
/// as it is when the history has no such version.
async fn form_at(
    state: &AppState,
    signed_in: &SignedIn,
    name: &str,
    version: &str,
) -> Result<PolicyForm, ConsoleError> {
    let saved = match version.trim().parse::<i64>() {
        Ok(v) => state
            .control
            .policy_versions_at(&signed_in.actor, name, &[v])
            .await?
            .pop()
            .flatten(),
        Err(_) => None,
    };
    Ok(match saved {
        Some(saved) => PolicyForm::of(&saved.policy),
        None => PolicyForm::of(&state.control.get_policy(&signed_in.actor, name).await?),
    })
}

/// The edit in `form` merged with the version `current` it did not start from: the merged
/// form, and why it cannot be saved as it is (fields both changed), if so.
async fn merged_with(
    state: &AppState,
    signed_in: &SignedIn,
    name: &str,
    form: &PolicyForm,
    current: i64,
) -> Result<(PolicyForm, Option<Refused>), ConsoleError> {
    let started = form.version.trim().parse::<i64>().unwrap_or(0);
    let mut versions = state
        .control
        .policy_versions_at(&signed_in.actor, name, &[started, current])
        .await?
        .into_iter();
    let (base, theirs) = (versions.next().flatten(), versions.next().flatten());
    let theirs = match theirs {
        Some(theirs) => theirs,
        // Saved before history began, or changed again meanwhile: the policy as it is.
        None => {
            let policy = state.control.get_policy(&signed_in.actor, name).await?;
            PolicyVersionView {
                version: policy.version,
                action: "update".to_owned(),
                restored_version: None,
                author: "someone else".to_owned(),
                at: policy.updated_at.clone(),
                policy,
            }
        }
    };
    let base = base.map(|b| PolicyForm::of(&b.policy));
    let merged = merge::merge(form, base.as_ref(), &PolicyForm::of(&theirs.policy));
    if merged.collisions.is_empty() {
        return Ok((merged.form, None));
    }
    let message = conflict_message(&theirs, &merged);
    Ok((
        merged.form,
        Some(Refused {
            errors: FormErrors::general(message),
            status: StatusCode::CONFLICT,
            collisions: merged.collisions,
        }),
    ))
}

/// The form again, not saved, on its application's page.
async fn form_again(
    state: &AppState,
    signed_in: &SignedIn,
    name: &str,
    form: PolicyForm,
    refused: Refused,
) -> Result<HttpResponse, ConsoleError> {
    let (current, app) = editable_policy(state, signed_in, name).await?;
    let mut page = form_page(
        state,
        signed_in,
        app,
        Some(current.name),
        form,
        refused.errors,
    )
    .await?;
    page.collisions = refused.collisions;
    render_status(&page, refused.status)
}

/// What an edit that came second is told about the change that came first, which
/// changed some of the fields it changed.
fn conflict_message(theirs: &PolicyVersionView, merged: &merge::Merged) -> String {
    let collided: Vec<Part> = merged.collisions.iter().map(|c| c.part).collect();
    let only_theirs: Vec<Part> = merged
        .theirs
        .iter()
        .copied()
        .filter(|p| !collided.contains(p))
        .collect();
    let only_yours: Vec<Part> = merged
        .yours
        .iter()
        .copied()
        .filter(|p| !collided.contains(p))
        .collect();
    let mut message = format!(
        "{} saved version {} of this policy at {} while you edited it. ",
        theirs.author, theirs.version, theirs.at
    );
    if !only_theirs.is_empty() {
        message.push_str(&format!(
            "Their change to the {} is in the form. ",
            merge::in_words(&only_theirs)
        ));
    }
    if !only_yours.is_empty() {
        message.push_str(&format!(
            "Your change to the {} is kept. ",
            merge::in_words(&only_yours)
        ));
    }
    message.push_str(&format!(
        "You both changed the {}: choose whose value to keep next to each, then save. \
         Nothing has been saved yet.",
        merge::in_words(&collided)
    ));
    message
}
