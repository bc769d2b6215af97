//! Plan and apply a desired list of policies, a policy file's (README "Policy files"): per
//! policy create, update (with its field changes), unchanged, or delete (with prune, the
//! policies of its
//! applications it does not list); applied all at once in one transaction, through the
//! same steps as the single-policy calls (history, audit, Redis push after commit).

use std::collections::{HashMap, HashSet};

use crate::auth::{Actor, Permission};
use crate::domain::{FieldErrors, PolicySpec};
use crate::store::{AppRecord, PolicyRecord, Tx};

use super::descriptors::conflicts_in_list;
use super::desired::{Desired, ERRORS_SHOWN};
use super::plan::{Plan, PlanAction, PlannedPolicy};
use super::plan_id::{newest_seen, plan_id, same_plan, stale};
use super::policies::{delete_policy, insert_policy, update_policy};
use super::policy_checks::unknown_app_errors;
use super::policy_diff::{FieldChange, field_changes};
use super::{Control, ControlError, authorised_app};

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
    Keep(PolicyRecord),
    Delete(PolicyRecord),
}

impl Step {
    fn name(&self) -> &str {
        match self {
            Step::Create(spec, _) => spec.name.as_str(),
            Step::Update(current, _) | Step::Keep(current) | Step::Delete(current) => {
                current.spec.name.as_str()
            }
        }
    }

    /// When the stored policy was last created or changed.
    fn stored_ms(&self) -> Option<i64> {
        match self {
            Step::Create(..) => None,
            Step::Update(current, _) | Step::Keep(current) | Step::Delete(current) => {
                Some(current.created_ms.max(current.updated_ms))
            }
        }
    }
}

impl Control {
    /// The plan of `desired` (a policy file's), changing nothing.
    #[tracing::instrument(skip_all, fields(actor = %actor.name, prune))]
    pub async fn plan_file(
        &self,
        actor: &Actor,
        desired: &Desired,
        prune: bool,
    ) -> Result<Plan, ApplyError> {
        let mut tx = self.store.begin_read().await.map_err(ControlError::from)?;
        let (plan, _) = planned(&mut tx, actor, desired, prune, false).await?;
        tx.commit().await.map_err(ControlError::from)?;
        Ok(plan)
    }

    /// Makes the plan of `desired` in one transaction; with `plan_id`, only if the plan is
    /// still that one.
    #[tracing::instrument(skip_all, fields(actor = %actor.name, prune))]
    pub async fn apply_file(
        &self,
        actor: &Actor,
        desired: &Desired,
        prune: bool,
        plan_id: Option<&str>,
    ) -> Result<Plan, ApplyError> {
        // Its changes share one id in the audit log, to be read together.
        let actor = &actor.in_change_set(crate::store::new_id());
        match self.apply_file_once(actor, desired, prune, plan_id).await {
            // The database aborted the transaction to break a deadlock with a simultaneous
            // one, or a simultaneous apply created a policy this one creates, so nothing
            // of it was saved. Once more from the start: the plan is made
            // again in the new transaction and checked against `plan_id` as before, so
            // nothing is applied that the caller did not plan. A second abort is the
            // caller's 409.
            Err(ApplyError::Control(ControlError::Aborted(cause))) => {
                tracing::info!(error = format!("{cause:#}"), "apply aborted; once more");
                self.apply_file_once(actor, desired, prune, plan_id).await
            }
            done => done,
        }
    }

    async fn apply_file_once(
        &self,
        actor: &Actor,
        desired: &Desired,
        prune: bool,
        plan_id: Option<&str>,
    ) -> Result<Plan, ApplyError> {
        let mut tx = self.store.begin().await.map_err(ControlError::from)?;
        let (mut plan, steps) = planned(&mut tx, actor, desired, prune, true).await?;
        if let Some(seen) = plan_id
            && !same_plan(seen, &plan.policies)
        {
            let seen_newest = newest_seen(seen).unwrap_or(i64::MAX);
            let changed: Vec<String> = steps
                .iter()
                .filter(|step| step.stored_ms().is_some_and(|ms| ms > seen_newest))
                .map(|step| step.name().to_owned())
                .collect();
            return Err(ControlError::Conflict(stale(seen, &changed)).into());
        }
        let (mut saved, mut deleted) = (Vec::new(), Vec::new());
        for step in steps {
            match step {
                Step::Create(spec, app) => {
                    let created = match insert_policy(&mut tx, actor, &spec, &app).await {
                        // A simultaneous apply created it after this one read that it did
                        // not exist: nothing of this one is kept, and it is made again
                        // from the start (a plan_id then no longer matches).
                        Err(ControlError::Conflict(why)) => {
                            return Err(ControlError::Aborted(anyhow::anyhow!(why)).into());
                        }
                        created => created?,
                    };
                    saved.push(created);
                }
                Step::Update(current, spec) => {
                    saved.push(update_policy(&mut tx, actor, &current, &spec).await?);
                }
                Step::Keep(_) => {}
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
    desired: &Desired,
    prune: bool,
    lock: bool,
) -> Result<(Plan, Vec<Step>), ApplyError> {
    // Read (and lock) the file's policies in name order, whatever order the file lists
    // them in: two applies that touch the same policies then queue on the first they
    // share, rather than each holding a row the other waits for (a deadlock).
    let names: Vec<&str> = desired.specs.iter().map(|s| s.name.as_str()).collect();
    let mut stored: HashMap<String, PolicyRecord> = tx
        .policies_by_names(&names, lock)
        .await
        .map_err(ControlError::from)?
        .into_iter()
        .map(|record| (record.spec.name.to_string(), record))
        .collect();
    let currents: Vec<Option<PolicyRecord>> = names.iter().map(|n| stored.remove(*n)).collect();
    // The file's applications and those that own a policy it names.
    let mut touched: Vec<String> = desired.apps.clone();
    touched.extend(
        currents
            .iter()
            .flatten()
            .map(|c| c.spec.owner_app.to_string()),
    );
    touched.sort();
    touched.dedup();
    let mut apps = HashMap::new();
    let (mut forbidden, mut errors) = (Vec::new(), FieldErrors::default());
    for slug in &touched {
        match authorised_app(tx, actor, slug, Permission::Edit).await {
            Ok(app) => {
                apps.insert(app.slug.clone(), app);
            }
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
    // Every application, read once: the file's policies name them by the thousand.
    let known: HashSet<String> = tx
        .list_apps()
        .await
        .map_err(ControlError::from)?
        .into_iter()
        .map(|app| app.slug)
        .collect();
    for (spec, current) in desired.specs.iter().zip(&currents) {
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
        for e in unknown_app_errors(spec, |slug| !known.contains(slug)).0 {
            errors.push(format!("{}.{}", spec.name, e.field), e.message);
        }
    }
    if desired.specs.iter().any(|s| !s.descriptors.is_empty()) {
        let stored = tx
            .policies_with_descriptors()
            .await
            .map_err(ControlError::from)?;
        errors
            .0
            .extend(conflicts_in_list(&desired.specs, &stored).0);
    }
    if !errors.is_empty() {
        let errors = errors.capped(ERRORS_SHOWN, "file");
        return Err(ControlError::Invalid(errors).into());
    }
    let mut entries = Vec::new();
    let mut steps = Vec::new();
    for (spec, current) in desired.specs.iter().zip(currents) {
        let (entry, step) = match current {
            None => {
                let app = apps.get(spec.owner_app.as_str()).cloned();
                let app = app.ok_or(ControlError::NotFound("application"))?;
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
                Step::Keep(current),
            ),
            Some(current) => {
                let changes = field_changes(&current.spec, spec, desired.written);
                let entry = entry(spec, PlanAction::Update, Some(current.version), changes);
                (entry, Step::Update(current, spec.clone()))
            }
        };
        entries.push(entry);
        steps.push(step);
    }
    if prune {
        let listed: HashSet<&str> = names.iter().copied().collect();
        let mut unlisted = Vec::new();
        for slug in &desired.apps {
            let Some(app) = apps.get(slug) else { continue };
            let owned = tx
                .list_policies(Some(&app.id))
                .await
                .map_err(ControlError::from)?;
            unlisted.extend(
                owned
                    .into_iter()
                    .map(|p| p.spec.name.to_string())
                    .filter(|name| !listed.contains(name.as_str())),
            );
        }
        unlisted.sort();
        let unlisted: Vec<&str> = unlisted.iter().map(String::as_str).collect();
        // Read again, locked: the list above was not.
        for current in tx
            .policies_by_names(&unlisted, lock)
            .await
            .map_err(ControlError::from)?
        {
            let mut planned = entry(
                &current.spec,
                PlanAction::Delete,
                Some(current.version),
                Vec::new(),
            );
            planned.settings.clear();
            entries.push(planned);
            steps.push(Step::Delete(current));
        }
    }
    let newest = steps.iter().filter_map(Step::stored_ms).max().unwrap_or(0);
    let plan = Plan {
        plan_id: plan_id(&entries, newest),
        applied: false,
        policies: entries,
    };
    Ok((plan, steps))
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
        // The spec's own text: every setting, in one form per build of the server (a plan
        // made by one release and applied by another is stale: planned again).
        settings: format!("{spec:?}"),
    }
}
