//! A policy body checked as a whole before anything is saved: the spec's own fields
//! (`policy_spec`) together with what only the database knows (do the applications it
//! names exist?), so that one answer names every invalid field, not one layer at a time.

use crate::auth::{Actor, Permission};
use crate::domain::{AppSlug, FieldError, FieldErrors, PolicySpec, Scope};
use crate::store::{AppRecord, Tx};

use super::descriptors::conflicts;
use super::inputs::PolicyInput;
use super::policy_spec::{new_policy, patched_policy};
use super::{ControlError, ControlResult, authorised_app};

/// A new policy's spec and its owner application, if the actor may edit that one.
pub(super) async fn checked_new_policy(
    tx: &mut Tx,
    actor: &Actor,
    input: &PolicyInput,
) -> ControlResult<(PolicySpec, AppRecord)> {
    let checked = checked_new_fields(tx, actor, input).await;
    with_unreadable(input, checked)
}

async fn checked_new_fields(
    tx: &mut Tx,
    actor: &Actor,
    input: &PolicyInput,
) -> ControlResult<(PolicySpec, AppRecord)> {
    match new_policy(input) {
        Ok(spec) => {
            // The owner is a field of the body: an unknown one is invalid input, not a 404.
            if tx.app_by_slug(spec.owner_app.as_str()).await?.is_none() {
                let mut errors = unknown_apps(tx, &spec.allowed_apps).await?;
                errors
                    .0
                    .insert(0, FieldError::new("owner_app", "no such application"));
                return Err(errors.into());
            }
            let app = authorised_app(tx, actor, spec.owner_app.as_str(), Permission::Edit).await?;
            check_apps_exist(tx, &spec).await?;
            check_descriptors_unique(tx, &spec).await?;
            Ok((spec, app))
        }
        Err(mut errors) => {
            // Whether the named applications exist is only told to someone who may edit
            // the owner's policies.
            let may_edit = match input.owner_app.as_deref() {
                Some(owner) => authorised_app(tx, actor, owner, Permission::Edit)
                    .await
                    .is_ok(),
                None => false,
            };
            if may_edit {
                errors
                    .0
                    .extend(unknown_apps(tx, &parsed_slugs(input)).await?.0);
            }
            Err(errors.into())
        }
    }
}

/// The current spec with the input's changes (the caller checked the actor may edit it).
pub(super) async fn checked_patch(
    tx: &mut Tx,
    input: &PolicyInput,
    current: &PolicySpec,
) -> ControlResult<PolicySpec> {
    let checked = checked_patch_fields(tx, input, current).await;
    with_unreadable(input, checked)
}

async fn checked_patch_fields(
    tx: &mut Tx,
    input: &PolicyInput,
    current: &PolicySpec,
) -> ControlResult<PolicySpec> {
    match patched_policy(input, current) {
        Ok(spec) => {
            check_apps_exist(tx, &spec).await?;
            check_descriptors_unique(tx, &spec).await?;
            Ok(spec)
        }
        Err(mut errors) => {
            errors
                .0
                .extend(unknown_apps(tx, &parsed_slugs(input)).await?.0);
            Err(errors.into())
        }
    }
}

/// The input's allowed apps that are valid slugs (the others have errors of their own).
fn parsed_slugs(input: &PolicyInput) -> Vec<AppSlug> {
    input
        .allowed_apps
        .iter()
        .flatten()
        .filter_map(|s| AppSlug::parse(s).ok())
        .collect()
}

/// An error naming the slugs of `slugs` that name no application, if any.
async fn unknown_apps(tx: &mut Tx, slugs: &[AppSlug]) -> ControlResult<FieldErrors> {
    let mut errors = FieldErrors::default();
    let unknown = tx.unknown_slugs(slugs).await?;
    if !unknown.is_empty() {
        errors.push(
            "allowed_apps",
            format!("no such application: {}", unknown.join(", ")),
        );
    }
    Ok(errors)
}

/// The applications a spec names exist: its allowed apps and, for a per_app policy, its
/// overrides' matches (each named in the error).
pub(super) async fn check_apps_exist(tx: &mut Tx, spec: &PolicySpec) -> ControlResult<()> {
    let unknown = tx.unknown_slugs(&named_apps(spec)).await?;
    let errors = unknown_app_errors(spec, |slug| unknown.iter().any(|u| u == slug));
    if errors.is_empty() {
        Ok(())
    } else {
        Err(ControlError::Invalid(errors))
    }
}

/// No other stored policy declares one of the spec's descriptor patterns (each named).
pub(super) async fn check_descriptors_unique(tx: &mut Tx, spec: &PolicySpec) -> ControlResult<()> {
    if spec.descriptors.is_empty() {
        return Ok(());
    }
    let others = tx.policies_with_descriptors().await?;
    let errors = conflicts(
        spec,
        others
            .iter()
            .map(|r| (&r.spec.name, r.spec.descriptors.as_slice())),
    );
    if errors.is_empty() {
        Ok(())
    } else {
        Err(ControlError::Invalid(errors))
    }
}

/// The applications a spec names: its allowed apps and, for a per_app policy, its
/// overrides' matches.
fn named_apps(spec: &PolicySpec) -> Vec<AppSlug> {
    let mut slugs = spec.allowed_apps.clone();
    if spec.scope == Scope::PerApp {
        slugs.extend(
            spec.overrides
                .iter()
                .filter_map(|o| AppSlug::parse(&o.matches).ok()),
        );
    }
    slugs
}

/// Errors naming the applications of a spec that `unknown` says do not exist (many
/// specs are checked against one list of the applications).
pub(super) fn unknown_app_errors(spec: &PolicySpec, unknown: impl Fn(&str) -> bool) -> FieldErrors {
    let mut errors = FieldErrors::default();
    let missing: Vec<&str> = spec
        .allowed_apps
        .iter()
        .map(AppSlug::as_str)
        .filter(|slug| unknown(slug))
        .collect();
    if !missing.is_empty() {
        errors.push(
            "allowed_apps",
            format!("no such application: {}", missing.join(", ")),
        );
    }
    if spec.scope == Scope::PerApp {
        for (i, o) in spec.overrides.iter().enumerate() {
            if unknown(&o.matches) {
                errors.push(
                    format!("overrides[{i}].match"),
                    format!("no such application: {}", o.matches),
                );
            }
        }
    }
    errors
}

/// The fields its source could not read come first, then the errors found on the other
/// fields (a field left out because it was unreadable is not also "required"): every
/// error at once, in one check, and nothing saved.
fn with_unreadable<T>(input: &PolicyInput, checked: ControlResult<T>) -> ControlResult<T> {
    if input.unreadable.is_empty() {
        return checked;
    }
    let found = match checked {
        Ok(_) => FieldErrors::default(),
        Err(ControlError::Invalid(found)) => found,
        Err(other) => return Err(other),
    };
    let top = |e: &FieldError| e.field.split(['[', '.']).next().unwrap_or("").to_owned();
    let unreadable: Vec<String> = input.unreadable.0.iter().map(top).collect();
    let mut all = input.unreadable.clone();
    all.0.extend(
        found
            .0
            .into_iter()
            .filter(|e| !unreadable.contains(&top(e))),
    );
    Err(ControlError::Invalid(all))
}
