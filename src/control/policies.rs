use serde_json::json;

use crate::auth::{Actor, Permission};
use crate::domain::{
    Algorithm, AppSlug, FailureMode, FieldError, FieldErrors, MaxPermits, Millis, Param,
    PolicyName, PolicySpec, Rate, check_description,
};
use crate::limiter::BucketState;
use crate::store::{AuditEntry, PolicyRecord, StoreError};

use super::inputs::{PolicyInput, required};
use super::{Control, ControlError, ControlResult, PolicyView, authorised_app};

/// Builds a complete, valid spec from the input, taking what it leaves out from `base`
/// (the current policy, on a change) or from the defaults (on a create).
fn build_spec(input: &PolicyInput, base: Option<&PolicySpec>) -> Result<PolicySpec, FieldErrors> {
    let mut errors = FieldErrors::default();
    let creating = base.is_none();
    let name = match (base, &input.name) {
        (Some(b), Some(n)) if n != b.name.as_str() => {
            errors.push("name", "cannot be changed; create a new policy instead");
            None
        }
        (Some(b), _) => Some(b.name.clone()),
        (None, n) => {
            required(&mut errors, "name", n).and_then(|n| errors.check(PolicyName::parse(&n)))
        }
    };
    let owner_app = match (base, &input.owner_app) {
        (Some(b), Some(o)) if o != b.owner_app.as_str() => {
            errors.push("owner_app", "cannot be changed");
            None
        }
        (Some(b), _) => Some(b.owner_app.clone()),
        (None, o) => required(&mut errors, "owner_app", o)
            .and_then(|o| errors.check(AppSlug::parse_field("owner_app", &o))),
    };
    let algorithm = match &input.algorithm {
        Some(a) => errors.check(Algorithm::parse_field("algorithm", a)),
        None => Some(base.map_or(Algorithm::TokenBucket, |b| b.algorithm)),
    };
    let max_permits = match (input.max_permits, base) {
        (Some(m), _) => errors.check(MaxPermits::parse_field("max_permits", m)),
        (None, Some(b)) => Some(b.max_permits),
        (None, None) => {
            errors.push("max_permits", "is required");
            None
        }
    };
    // Each algorithm takes exactly its own parameters: one it does not use is an error
    // (a typo or a misunderstanding), one it needs must be given or kept from `base`.
    let (rate, window_ms, lease_ttl_ms) = match algorithm {
        Some(algorithm) => (
            algorithm_param(
                &mut errors,
                algorithm,
                Param::Rate,
                input.rate,
                base.and_then(|b| b.rate),
                Rate::parse_field,
            ),
            algorithm_param(
                &mut errors,
                algorithm,
                Param::WindowMs,
                input.window_ms,
                base.and_then(|b| b.window_ms),
                Millis::parse_field,
            ),
            algorithm_param(
                &mut errors,
                algorithm,
                Param::LeaseTtlMs,
                input.lease_ttl_ms,
                base.and_then(|b| b.lease_ttl_ms),
                Millis::parse_field,
            ),
        ),
        None => (None, None, None),
    };
    let failure_mode = match &input.failure_mode {
        Some(f) => errors.check(FailureMode::parse_field("failure_mode", f)),
        None => Some(base.map_or(FailureMode::Closed, |b| b.failure_mode)),
    };
    let description = match &input.description {
        Some(d) => errors.check(check_description("description", d)),
        None => Some(base.map(|b| b.description.clone()).unwrap_or_default()),
    };
    let allowed_apps = match &input.allowed_apps {
        Some(list) => {
            let mut slugs = Vec::with_capacity(list.len());
            for (i, s) in list.iter().enumerate() {
                match AppSlug::parse_field(&format!("allowed_apps[{i}]"), s) {
                    Ok(slug) if !slugs.contains(&slug) => slugs.push(slug),
                    Ok(_) => {}
                    Err(e) => errors.0.push(e),
                }
            }
            if list.is_empty() {
                errors.push("allowed_apps", "must name at least one application");
            }
            Some(slugs)
        }
        None => base
            .map(|b| b.allowed_apps.clone())
            .or_else(|| owner_app.clone().map(|o| vec![o])),
    };
    if creating && input.version.is_some() {
        errors.push("version", "is only accepted on a change");
    }
    match (
        name,
        owner_app,
        algorithm,
        max_permits,
        allowed_apps,
        failure_mode,
        description,
    ) {
        (
            Some(name),
            Some(owner_app),
            Some(algorithm),
            Some(max_permits),
            Some(allowed_apps),
            Some(failure_mode),
            Some(description),
        ) if errors.is_empty() => Ok(PolicySpec {
            name,
            owner_app,
            algorithm,
            rate,
            max_permits,
            window_ms,
            lease_ttl_ms,
            allowed_apps,
            failure_mode,
            enabled: input.enabled.unwrap_or(base.is_none_or(|b| b.enabled)),
            description,
        }),
        _ => Err(errors),
    }
}

/// One algorithm-specific parameter: the input's value when the algorithm uses it (else
/// the current one, when the policy already had it), an error when the algorithm does not
/// use it but the input sets it, and nothing otherwise.
fn algorithm_param<V: Copy, T>(
    errors: &mut FieldErrors,
    algorithm: Algorithm,
    param: Param,
    given: Option<V>,
    current: Option<T>,
    parse: impl Fn(&str, V) -> Result<T, FieldError>,
) -> Option<T> {
    let field = param.field();
    match (algorithm.uses(param), given, current) {
        (true, Some(v), _) => errors.check(parse(field, v)),
        (true, None, Some(current)) => Some(current),
        (true, None, None) => {
            errors.push(field, format!("is required for {}", algorithm.as_str()));
            None
        }
        (false, Some(_), _) => {
            errors.push(
                field,
                format!(
                    "is not used by {}, which allows {}",
                    algorithm.as_str(),
                    algorithm.summary()
                ),
            );
            None
        }
        (false, None, _) => None,
    }
}

impl Control {
    pub async fn create_policy(
        &self,
        actor: &Actor,
        input: PolicyInput,
    ) -> ControlResult<PolicyView> {
        let spec = build_spec(&input, None)?;
        let mut tx = self.store.begin().await?;
        // The owner is a field of the body: an unknown one is invalid input, not a 404.
        if tx.app_by_slug(spec.owner_app.as_str()).await?.is_none() {
            return Err(FieldError::new("owner_app", "no such application").into());
        }
        let app = authorised_app(&mut tx, actor, spec.owner_app.as_str(), Permission::Edit).await?;
        check_apps_exist(&mut tx, &spec).await?;
        let record = match tx.insert_policy(&app.id, &spec).await {
            Err(StoreError::Conflict) => {
                return Err(ControlError::Conflict(format!(
                    "a policy named {:?} already exists",
                    spec.name.as_str()
                )));
            }
            other => other?,
        };
        let view = PolicyView::from(&record);
        tx.record_audit(AuditEntry {
            actor: &actor.name,
            app_slug: Some(&app.slug),
            entity_type: "policy",
            entity_id: spec.name.as_str(),
            action: "create",
            before: None,
            after: Some(json!(view)),
        })
        .await?;
        tx.commit().await?;
        self.sync.policy_saved(&record).await;
        Ok(view)
    }

    /// Changes any subset of a policy's fields. A change that changes nothing keeps the
    /// version (and so never touches Redis).
    pub async fn update_policy(
        &self,
        actor: &Actor,
        name: &str,
        input: PolicyInput,
    ) -> ControlResult<PolicyView> {
        let mut tx = self.store.begin().await?;
        let current = self
            .readable_policy(&mut tx, actor, name, Permission::Edit)
            .await?;
        if let Some(seen) = input.version
            && seen != current.version
        {
            return Err(ControlError::VersionConflict {
                current: current.version,
            });
        }
        let spec = build_spec(&input, Some(&current.spec))?;
        if spec == current.spec {
            tx.commit().await?;
            return Ok(PolicyView::from(&current));
        }
        check_apps_exist(&mut tx, &spec).await?;
        // The row is locked since it was read, so its version still holds.
        let updated = tx.update_policy(&current, &spec).await?.ok_or_else(|| {
            ControlError::Internal(anyhow::anyhow!("locked policy {name:?} changed under us"))
        })?;
        let view = PolicyView::from(&updated);
        tx.record_audit(AuditEntry {
            actor: &actor.name,
            app_slug: Some(spec.owner_app.as_str()),
            entity_type: "policy",
            entity_id: spec.name.as_str(),
            action: "update",
            before: Some(json!(PolicyView::from(&current))),
            after: Some(json!(view)),
        })
        .await?;
        tx.commit().await?;
        self.sync.policy_saved(&updated).await;
        Ok(view)
    }

    pub async fn delete_policy(&self, actor: &Actor, name: &str) -> ControlResult<()> {
        let mut tx = self.store.begin().await?;
        let current = self
            .readable_policy(&mut tx, actor, name, Permission::Edit)
            .await?;
        tx.delete_policy(&current.id).await?;
        tx.record_audit(AuditEntry {
            actor: &actor.name,
            app_slug: Some(current.spec.owner_app.as_str()),
            entity_type: "policy",
            entity_id: current.spec.name.as_str(),
            action: "delete",
            before: Some(json!(PolicyView::from(&current))),
            after: None,
        })
        .await?;
        tx.commit().await?;
        self.sync.policy_deleted(&current.spec.name).await;
        Ok(())
    }

    pub async fn get_policy(&self, actor: &Actor, name: &str) -> ControlResult<PolicyView> {
        let mut tx = self.store.begin_read().await?;
        let record = self
            .readable_policy(&mut tx, actor, name, Permission::View)
            .await?;
        tx.commit().await?;
        Ok(PolicyView::from(&record))
    }

    /// The policies of one application, or of every application the actor may see.
    pub async fn list_policies(
        &self,
        actor: &Actor,
        app: Option<&str>,
    ) -> ControlResult<Vec<PolicyView>> {
        let mut tx = self.store.begin_read().await?;
        let records = match (app, &actor.user_id) {
            (Some(slug), _) => {
                let app = authorised_app(&mut tx, actor, slug, Permission::View).await?;
                tx.list_policies(Some(&app.id)).await?
            }
            (None, _) if actor.is_admin => tx.list_policies(None).await?,
            (None, Some(user_id)) => {
                let mut all = Vec::new();
                for app in tx.list_apps_of_user(user_id).await? {
                    all.extend(tx.list_policies(Some(&app.id)).await?);
                }
                all.sort_by(|a, b| a.spec.name.cmp(&b.spec.name));
                all
            }
            (None, None) => Vec::new(),
        };
        tx.commit().await?;
        Ok(records.iter().map(PolicyView::from).collect())
    }

    /// The bucket as Redis holds it now.
    pub async fn policy_state(&self, actor: &Actor, name: &str) -> ControlResult<BucketState> {
        let mut tx = self.store.begin_read().await?;
        let record = self
            .readable_policy(&mut tx, actor, name, Permission::View)
            .await?;
        tx.commit().await?;
        self.limiter
            .bucket_state(&record.spec.name)
            .await
            .map_err(|e| ControlError::Unavailable(e.into()))?
            .ok_or(ControlError::NotFound(
                "policy state in redis (the next sync pass restores it)",
            ))
    }

    /// The policy, if the actor may do `wanted` with it. For an edit its row stays
    /// locked until the transaction ends, so that concurrent changes apply one after the
    /// other instead of failing each other's version check.
    async fn readable_policy(
        &self,
        tx: &mut crate::store::Tx,
        actor: &Actor,
        name: &str,
        wanted: Permission,
    ) -> ControlResult<PolicyRecord> {
        // A string that cannot be a policy name names none (and never reaches SQL).
        let name = PolicyName::parse(name).map_err(|_| ControlError::NotFound("policy"))?;
        let record = match wanted {
            Permission::Edit => tx.policy_by_name_for_update(name.as_str()).await?,
            Permission::View => tx.policy_by_name(name.as_str()).await?,
        }
        .ok_or(ControlError::NotFound("policy"))?;
        authorised_app(tx, actor, record.spec.owner_app.as_str(), wanted).await?;
        Ok(record)
    }
}

async fn check_apps_exist(tx: &mut crate::store::Tx, spec: &PolicySpec) -> ControlResult<()> {
    let unknown = tx.unknown_slugs(&spec.allowed_apps).await?;
    if unknown.is_empty() {
        Ok(())
    } else {
        Err(FieldError::new(
            "allowed_apps",
            format!("no such application: {}", unknown.join(", ")),
        )
        .into())
    }
}
