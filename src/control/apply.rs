//! Plan and apply a policy file (README "Policy files"): per policy create, update (with
//! its field changes), unchanged, or delete (with prune, the policies of the file's
//! applications it does not list); applied all at once in one transaction, through the
//! same steps as the single-policy calls (history, audit, Redis push after commit).

use serde::Serialize;

use crate::auth::{Actor, Permission};
use crate::domain::{FieldErrors, PolicySpec};
use crate::policy_file::{FieldChange, PolicyFile, field_changes};
use crate::store::{AppRecord, PolicyRecord, Tx};

use super::plan_id::{plan_id, stale};
use super::policies::{delete_policy, insert_policy, update_policy};
use super::policy_checks::check_apps_exist;
use super::{Control, ControlError, authorised_app};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum PlanAction {
    Create,
    Update,
    Unchanged,
    Delete,
}

/// What a plan does to one policy.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct PlannedPolicy {
    pub name: String,
    pub app: String,
    pub action: PlanAction,
    /// The stored version the plan was made against; absent for a create.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<i64>,
    /// For an update: the fields it changes, as the file writes them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub changes: Vec<FieldChange>,
}

/// The changes a file makes, and an id to apply exactly these.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct Plan {
    /// A digest of each planned policy's current state (exists? version) and change;
    /// given back to apply, a different plan by then is a 409.
    pub plan_id: String,
    /// Whether the changes were made (false for a dry run).
    pub applied: bool,
    pub policies: Vec<PlannedPolicy>,
}

/// Why a file was not applied.
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    /// The actor may not edit these applications' policies.
    #[error("you may not change the policies of {}", .0.join(", "))]
    Forbidden(Vec<String>),
    #[error(transparent)]
    Control(#[from] ControlError),
}

/// What applying does to one policy.
enum Step {
    Create(PolicySpec, AppRecord),
    Update(PolicyRecord, PolicySpec),
    Keep,
    Delete(PolicyRecord),
}

impl Control {
    /// The plan of `file`, changing nothing.
    #[tracing::instrument(skip_all, fields(actor = %actor.name, prune))]
    pub async fn plan_file(
        &self,
        actor: &Actor,
        file: &PolicyFile,
        prune: bool,
    ) -> Result<Plan, ApplyError> {
        let mut tx = self.store.begin_read().await.map_err(ControlError::from)?;
        let (plan, _) = planned(&mut tx, actor, file, prune, false).await?;
        tx.commit().await.map_err(ControlError::from)?;
        Ok(plan)
    }

    /// Makes the plan of `file` in one transaction; with `plan_id`, only if the plan is
    /// still that one.
    #[tracing::instrument(skip_all, fields(actor = %actor.name, prune))]
    pub async fn apply_file(
        &self,
        actor: &Actor,
        file: &PolicyFile,
        prune: bool,
        plan_id: Option<&str>,
    ) -> Result<Plan, ApplyError> {
        match self.apply_file_once(actor, file, prune, plan_id).await {
            // The database aborted the transaction to break a deadlock with a simultaneous
            // one, so nothing of it was saved. Once more from the start: the plan is made
            // again in the new transaction and checked against `plan_id` as before, so
            // nothing is applied that the caller did not plan. A second abort is the
            // caller's 409.
            Err(ApplyError::Control(ControlError::Aborted(cause))) => {
                tracing::info!(error = format!("{cause:#}"), "apply aborted; once more");
                self.apply_file_once(actor, file, prune, plan_id).await
            }
            done => done,
        }
    }

    async fn apply_file_once(
        &self,
        actor: &Actor,
        file: &PolicyFile,
        prune: bool,
        plan_id: Option<&str>,
    ) -> Result<Plan, ApplyError> {
        let mut tx = self.store.begin().await.map_err(ControlError::from)?;
        let (mut plan, steps) = planned(&mut tx, actor, file, prune, true).await?;
        if let Some(seen) = plan_id
            && seen != plan.plan_id
        {
            return Err(ControlError::Conflict(stale(seen, &plan)).into());
        }
        let (mut saved, mut deleted) = (Vec::new(), Vec::new());
        for step in steps {
            match step {
                Step::Create(spec, app) => {
                    saved.push(insert_policy(&mut tx, actor, &spec, &app).await?);
                }
                Step::Update(current, spec) => {
                    saved.push(update_policy(&mut tx, actor, &current, &spec).await?);
                }
                Step::Keep => {}
                Step::Delete(current) => {
                    delete_policy(&mut tx, actor, &current).await?;
                    deleted.push(current.spec.name);
                }
            }
        }
        tx.commit().await.map_err(ControlError::from)?;
        for record in &saved {
            self.sync.policy_saved(record).await;
        }
        for name in &deleted {
            self.sync.policy_deleted(name).await;
        }
        plan.applied = true;
        Ok(plan)
    }
}

/// The plan and its steps, checked: the actor may edit every application the file
/// touches, and every application a policy names exists. `lock`: the rows stay locked
/// until the transaction ends, so that the plan still holds when it is applied.
async fn planned(
    tx: &mut Tx,
    actor: &Actor,
    file: &PolicyFile,
    prune: bool,
    lock: bool,
) -> Result<(Plan, Vec<Step>), ApplyError> {
    // Read (and lock) the file's policies in name order, whatever order the file lists
    // them in: two applies that touch the same policies then queue on the first they
    // share, rather than each holding a row the other waits for (a deadlock).
    let mut by_name: Vec<usize> = (0..file.specs.len()).collect();
    by_name.sort_by(|&a, &b| file.specs[a].name.as_str().cmp(file.specs[b].name.as_str()));
    let mut found = Vec::new();
    for index in by_name {
        let name = file.specs[index].name.as_str();
        found.push((index, stored(tx, name, lock).await?));
    }
    found.sort_by_key(|(index, _)| *index);
    let currents: Vec<Option<PolicyRecord>> = found.into_iter().map(|(_, c)| c).collect();
    // The file's applications and those that own a policy it names.
    let mut touched: Vec<String> = file.apps.clone();
    touched.extend(
        currents
            .iter()
            .flatten()
            .map(|c| c.spec.owner_app.to_string()),
    );
    touched.sort();
    touched.dedup();
    let mut apps = Vec::new();
    let (mut forbidden, mut errors) = (Vec::new(), FieldErrors::default());
    for slug in &touched {
        match authorised_app(tx, actor, slug, Permission::Edit).await {
            Ok(app) => apps.push(app),
            Err(ControlError::Forbidden) => forbidden.push(slug.clone()),
            Err(ControlError::NotFound(_)) => {
                errors.push("app", format!("no such application: {slug}"))
            }
            Err(e) => return Err(e.into()),
        }
    }
    if !forbidden.is_empty() {
        return Err(ApplyError::Forbidden(forbidden));
    }
    for (spec, current) in file.specs.iter().zip(&currents) {
        if let Some(current) = current
            && current.spec.owner_app != spec.owner_app
        {
            errors.push(
                format!("{}.app", spec.name),
                format!(
                    "the policy belongs to {}; its owner cannot be changed",
                    current.spec.owner_app
                ),
            );
        }
        if let Err(ControlError::Invalid(found)) = check_apps_exist(tx, spec).await {
            for e in found.0 {
                errors.push(format!("{}.{}", spec.name, e.field), e.message);
            }
        }
    }
    if !errors.is_empty() {
        return Err(ControlError::Invalid(errors).into());
    }
    let mut entries = Vec::new();
    let mut steps = Vec::new();
    for (spec, current) in file.specs.iter().zip(currents) {
        let (entry, step) = match current {
            None => {
                let app = apps.iter().find(|a| a.slug == spec.owner_app.as_str());
                let app = app.cloned().ok_or(ControlError::NotFound("application"))?;
                (
                    entry(spec, PlanAction::Create, None, Vec::new()),
                    Step::Create(spec.clone(), app),
                )
            }
            Some(current) if current.spec == *spec => (
                entry(
                    spec,
                    PlanAction::Unchanged,
                    Some(current.version),
                    Vec::new(),
                ),
                Step::Keep,
            ),
            Some(current) => {
                let changes = field_changes(&current.spec, spec);
                let entry = entry(spec, PlanAction::Update, Some(current.version), changes);
                (entry, Step::Update(current, spec.clone()))
            }
        };
        entries.push(entry);
        steps.push(step);
    }
    if prune {
        for app in apps.iter().filter(|a| file.apps.contains(&a.slug)) {
            for listed in tx
                .list_policies(Some(&app.id))
                .await
                .map_err(ControlError::from)?
            {
                if file.specs.iter().any(|s| s.name == listed.spec.name) {
                    continue;
                }
                let Some(current) = stored(tx, listed.spec.name.as_str(), lock).await? else {
                    continue;
                };
                entries.push(entry(
                    &current.spec,
                    PlanAction::Delete,
                    Some(current.version),
                    Vec::new(),
                ));
                steps.push(Step::Delete(current));
            }
        }
    }
    let plan = Plan {
        plan_id: plan_id(&entries),
        applied: false,
        policies: entries,
    };
    Ok((plan, steps))
}

async fn stored(tx: &mut Tx, name: &str, lock: bool) -> Result<Option<PolicyRecord>, ControlError> {
    Ok(if lock {
        tx.policy_by_name_for_update(name).await?
    } else {
        tx.policy_by_name(name).await?
    })
}

fn entry(
    spec: &PolicySpec,
    action: PlanAction,
    version: Option<i64>,
    changes: Vec<FieldChange>,
) -> PlannedPolicy {
    PlannedPolicy {
        name: spec.name.to_string(),
        app: spec.owner_app.to_string(),
        action,
        version,
        changes,
    }
}
