//! The live view of an application's policies: each bucket as Redis holds it now and the
//! granted/denied counts of the last minutes, for the console's table and chart.

use serde::Serialize;

use crate::acquire::unix_minute_now;
use crate::auth::{Actor, Permission};
use crate::domain::PolicyName;
use crate::snapshot::PolicyEntry;
use ratekeeper_limiter::{BucketState, KeyedBucket, MinuteCounts, PolicyLive, StateRead};

use super::{Control, ControlError, ControlResult, PolicyView};

/// How many minutes of counts the chart shows.
pub const ACTIVITY_MINUTES: i64 = 10;

#[derive(Debug, Clone, Serialize)]
pub struct LivePolicy {
    pub name: String,
    /// `None` for a keyed policy (each caller has a bucket of its own), and when Redis
    /// does not hold the policy right now (the next sync pass restores it) or cannot be
    /// reached.
    pub state: Option<BucketState>,
    /// Milliseconds until the bucket is full again.
    pub full_in_ms: Option<i64>,
    pub activity: Vec<MinuteCounts>,
}

impl Control {
    /// The live state of an application's policies, for those who may see it.
    #[tracing::instrument(level = "debug", skip_all, fields(actor = %actor.name, slug = %slug))]
    pub async fn live_policies(&self, actor: &Actor, slug: &str) -> ControlResult<Vec<LivePolicy>> {
        let policies = self.list_policies(actor, Some(slug)).await?;
        Ok(self.live_state_of(&policies).await)
    }

    /// The live state of policies the caller has already been allowed to see (a page that
    /// lists them does not read them from SQL twice): one round trip to Redis for all of
    /// them. A policy Redis cannot report on right now has no state, rather than failing
    /// the page.
    #[tracing::instrument(level = "debug", skip_all, fields(policies = policies.len()))]
    pub async fn live_state_of(&self, policies: &[PolicyView]) -> Vec<LivePolicy> {
        self.live_state_named(policies.iter().map(|p| (p.name.as_str(), p.state_read())))
            .await
    }

    /// [`Self::live_state_of`] for policies known by name, with how each one's state is read
    /// (a keyed one has none).
    pub async fn live_state_named<'p>(
        &self,
        policies: impl IntoIterator<Item = (&'p str, StateRead)>,
    ) -> Vec<LivePolicy> {
        // Names come from stored, validated policies: they always parse.
        let names: Vec<(PolicyName, StateRead)> = policies
            .into_iter()
            .filter_map(|(name, read)| Some((PolicyName::parse(name).ok()?, read)))
            .collect();
        let views = match self
            .limiter
            .live_views(&names, unix_minute_now(), ACTIVITY_MINUTES)
            .await
        {
            Ok(views) => views,
            Err(e) => {
                tracing::warn!(error = %e, policies = names.len(), "live state unavailable");
                Vec::new()
            }
        };
        let mut views = views.into_iter();
        names
            .iter()
            .map(|(name, read)| {
                let view = match views.next() {
                    Some(Ok(view)) => Some(view),
                    Some(Err(e)) => {
                        tracing::warn!(policy = %name, error = %e, "live state unavailable");
                        None
                    }
                    None => None,
                };
                // A keyed policy's callers each have a bucket: there is no one state.
                let state = view
                    .as_ref()
                    .and_then(|v| v.state.clone())
                    .filter(|_| *read != StateRead::Skip);
                LivePolicy {
                    name: name.to_string(),
                    full_in_ms: state.as_ref().map(|s| s.full_in_ms),
                    state,
                    activity: view.map(|v| v.minutes).unwrap_or_default(),
                }
            })
            .collect()
    }
}

/// The spans (minutes) over which a policy's page lists its top callers.
pub const TOP_SPANS: [i64; 2] = [5, 60];

/// Callers listed per span and outcome on a policy's page.
const TOP_LISTED: usize = 10;

impl Control {
    /// Everything a policy's page shows from Redis, for a policy the caller has already
    /// been allowed to see: one round trip (see `ratekeeper_limiter::PolicyLive`). With `key` (a
    /// keyed policy's caller, checked as `policy_state` checks it: 422 naming `key`), its
    /// bucket is read in the same round trip and reported as the live `state`; a keyed
    /// policy has no state otherwise.
    #[tracing::instrument(level = "debug", skip_all, fields(policy = %policy.name))]
    pub async fn policy_live(
        &self,
        actor: &Actor,
        policy: &PolicyView,
        key: Option<&str>,
    ) -> ControlResult<PolicyLive> {
        let name = PolicyName::parse(&policy.name).map_err(|e| {
            ControlError::Internal(anyhow::anyhow!("stored policy name {}: {e:?}", policy.name))
        })?;
        let looked_up = match key {
            None => None,
            Some(key) => {
                let mut tx = self.store.begin_read().await?;
                let record = self
                    .readable_policy(&mut tx, actor, &policy.name, Permission::View)
                    .await?;
                tx.commit().await?;
                let caller = super::buckets::caller(&record, Some(key))?.expect("a key was given");
                Some((PolicyEntry::of(&record), caller, record.version))
            }
        };
        let bucket = looked_up.as_ref().map(|(entry, caller, _)| KeyedBucket {
            policy: &entry.config,
            caller,
            limits: entry.limits_for(caller),
        });
        let mut live = self
            .limiter
            .policy_live(
                &name,
                unix_minute_now(),
                &TOP_SPANS,
                TOP_LISTED,
                bucket.as_ref(),
            )
            .await
            .map_err(|e| ControlError::RedisUnavailable(e.into()))?;
        live.state = match (&bucket, live.lookup, &looked_up) {
            (Some(bucket), Some((available, full_in_ms)), Some((_, _, version))) => {
                Some(BucketState {
                    current_permits: available as f64,
                    max_permits: bucket.limits.max_permits,
                    rate: bucket.limits.rate,
                    version: *version,
                    updated_ms: 0,
                    full_in_ms,
                })
            }
            _ if policy.scope.is_keyed() => None,
            _ => live.state,
        };
        Ok(live)
    }
}

impl Control {
    /// The counts of each of the last 60 minutes of each policy of `names` (policies the
    /// caller has already been allowed to see): one round trip. `None` when Redis cannot be
    /// reached; an empty list for a name Redis answered with an error.
    #[tracing::instrument(level = "debug", skip_all, fields(policies = names.len()))]
    pub async fn last_hour_of(&self, names: &[&str]) -> Option<Vec<Vec<MinuteCounts>>> {
        // The counts alone: no policy's state is read.
        let parsed: Vec<(PolicyName, StateRead)> = names
            .iter()
            .filter_map(|n| Some((PolicyName::parse(n).ok()?, StateRead::Skip)))
            .collect();
        match self
            .limiter
            .live_views(&parsed, unix_minute_now(), 60)
            .await
        {
            Ok(views) => Some(
                views
                    .into_iter()
                    .map(|v| v.map(|v| v.minutes).unwrap_or_default())
                    .collect(),
            ),
            Err(e) => {
                tracing::warn!(error = %e, policies = names.len(), "last hour unavailable");
                None
            }
        }
    }

    /// Each application's granted, denied and would-be denied acquires over the last
    /// [`ACTIVITY_MINUTES`], for applications the caller has already been allowed to see:
    /// one round trip. `None` when Redis cannot be reached (the page says so).
    #[tracing::instrument(level = "debug", skip_all, fields(apps = slugs.len()))]
    pub async fn apps_activity(&self, slugs: &[&str]) -> Option<Vec<MinuteCounts>> {
        match self
            .limiter
            .apps_recent_usage(slugs, unix_minute_now(), ACTIVITY_MINUTES)
            .await
        {
            Ok(usage) => Some(usage),
            Err(e) => {
                tracing::warn!(error = %e, apps = slugs.len(), "application activity unavailable");
                None
            }
        }
    }
}

impl Control {
    /// What each of `policies` (already allowed to be seen) did to `app`'s acquires over
    /// the last [`ACTIVITY_MINUTES`], from their top callers, in one round trip: `None`
    /// for a per_key policy, whose callers are keys rather than applications, and for
    /// every policy when Redis cannot be reached.
    #[tracing::instrument(level = "debug", skip_all, fields(app = %app, policies = policies.len()))]
    pub async fn app_on_policies(
        &self,
        app: &str,
        policies: &[PolicyView],
    ) -> Vec<Option<MinuteCounts>> {
        let counted: Vec<&str> = policies
            .iter()
            .filter(|p| p.scope != crate::domain::Scope::PerKey)
            .map(|p| p.name.as_str())
            .collect();
        let read = match self
            .limiter
            .caller_recent(&counted, app, unix_minute_now(), ACTIVITY_MINUTES)
            .await
        {
            Ok(read) => read,
            Err(e) => {
                tracing::warn!(error = %e, app, "counts on other applications' policies unavailable");
                return vec![None; policies.len()];
            }
        };
        let mut read = read.into_iter();
        policies
            .iter()
            .map(|p| {
                if p.scope == crate::domain::Scope::PerKey {
                    None
                } else {
                    read.next()
                }
            })
            .collect()
    }
}
