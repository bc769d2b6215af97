//! Several acquires all or nothing, and the check (an acquire that takes nothing): each
//! item checked from the snapshot like a single acquire, then one job of the batcher's
//! queue decides them together (`ratekeeper_limiter::decide::all`).
//!
//! What is counted: a call that is granted counts each item's own decision; a call that
//! is denied counts its denied items as denials and nothing for the grants it gave back;
//! checks count nothing. A denied item's denial is remembered by the denial cache like a
//! single acquire's (a check's as a denial of one permit): it says nothing of the others.

use std::sync::Arc;
use std::time::Instant;

use ratekeeper_limiter::{AcquireOutcome, AllAsk, AllTarget, Decided, Decision, KeyedBucket};

use super::acquirer::{Acquirer, fallback};
use super::blocked::{blocked_denial, check_blocked};
use super::caller::{Partition, partition_of};
use super::outcome::{Acquired, Outcome, Refusal};
use crate::domain::{Algorithm, AppSlug, CallerKey, CheckOrPermits, PolicyName};
use crate::snapshot::PolicyEntry;

/// One item of an all-or-nothing acquire.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllItem {
    pub name: PolicyName,
    pub permits: CheckOrPermits,
    pub key: Option<CallerKey>,
}

/// An all-or-nothing acquire answered: granted when every item is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AcquiredAll {
    pub allowed: bool,
    /// One per item, in order.
    pub results: Vec<Acquired>,
}

impl AcquiredAll {
    /// The item whose limit binds most: a denied one with the longest wait, else the one with
    /// the fewest permits left. Shadow denials and degraded grants have no headers (as for a
    /// single acquire).
    pub fn most_restrictive(&self) -> Option<(usize, &Decided)> {
        self.results
            .iter()
            .enumerate()
            .filter_map(|(i, r)| match &r.outcome {
                Outcome::Decided(d) if d.decision != Decision::ShadowDenied => Some((i, d)),
                _ => None,
            })
            .max_by_key(|(_, d)| {
                let denied = !d.decision.allowed();
                (
                    denied,
                    if denied {
                        d.retry_after_ms
                    } else {
                        -d.remaining
                    },
                )
            })
    }
}

/// The first item that got no decision, and why: the whole call is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AllRefused {
    pub index: usize,
    pub refusal: Refusal,
}

/// An item as checked from the snapshot: its policy (if known) and whose bucket.
struct Checked {
    policy: Option<Arc<PolicyEntry>>,
    partition: Option<Partition>,
}

impl Checked {
    fn blocks(&self) -> bool {
        self.policy.as_deref().is_some_and(PolicyEntry::blocks)
    }
}

impl Acquirer {
    /// Decides `items` for `app` all or nothing. Its time is observed whatever the answer.
    pub async fn acquire_all(
        &self,
        app: &AppSlug,
        items: &[AllItem],
    ) -> Result<AcquiredAll, AllRefused> {
        let started = Instant::now();
        let answer = self.decide_all(app, items).await;
        self.metrics
            .acquire_seconds
            .observe(started.elapsed().as_secs_f64());
        answer
    }

    /// Whether `app` would be granted one permit of policy `name` (of the bucket of `key`,
    /// for a per_key policy) now, with the bucket's remaining permits and reset times;
    /// nothing is taken.
    pub async fn check(
        &self,
        app: &AppSlug,
        name: &PolicyName,
        key: Option<CallerKey>,
    ) -> Result<Acquired, Refusal> {
        let item = AllItem {
            name: name.clone(),
            permits: CheckOrPermits::Check,
            key,
        };
        let mut all = self
            .acquire_all(app, std::slice::from_ref(&item))
            .await
            .map_err(|refused| refused.refusal)?;
        Ok(all.results.remove(0))
    }

    async fn decide_all(
        &self,
        app: &AppSlug,
        items: &[AllItem],
    ) -> Result<AcquiredAll, AllRefused> {
        let checked = items
            .iter()
            .enumerate()
            .map(|(index, item)| {
                self.check_item(app, item)
                    .map_err(|refusal| AllRefused { index, refusal })
            })
            .collect::<Result<Vec<Checked>, AllRefused>>()?;
        if checked.iter().any(Checked::blocks) {
            return self.all_blocked(app, items, checked).await;
        }
        let generation = self.denials.generation();
        let mut answer = self.ask_all(app, items, &checked).await;
        // The policies Redis lost are put back from the snapshot and the call decided again.
        if let Ok(outcomes) = &answer {
            let lost: Vec<&PolicyEntry> = outcomes
                .iter()
                .zip(&checked)
                .filter(|(outcome, _)| **outcome == AcquireOutcome::NoSuchPolicy)
                .filter_map(|(_, c)| c.policy.as_deref())
                .collect();
            if !lost.is_empty() {
                answer = match self.restore_all(&lost).await {
                    Ok(()) => self.ask_all(app, items, &checked).await,
                    Err(e) => Err(e),
                };
            }
        }
        let outcomes = match answer {
            Ok(outcomes) => outcomes,
            Err(e) => return self.all_without_redis(app, items, checked, e),
        };
        let mut decided = Vec::with_capacity(items.len());
        for (index, outcome) in outcomes.into_iter().enumerate() {
            let refusal = match outcome {
                AcquireOutcome::Decided(d) => {
                    decided.push(d);
                    continue;
                }
                AcquireOutcome::NoSuchPolicy => Refusal::NoSuchPolicy,
                AcquireOutcome::AppNotAllowed => Refusal::AppNotAllowed,
                AcquireOutcome::PermitsAboveMax { limit } => Refusal::PermitsAboveMax { limit },
            };
            return Err(AllRefused { index, refusal });
        }
        let allowed = decided.iter().all(|d| d.decision.allowed());
        let results = items
            .iter()
            .zip(checked)
            .zip(decided)
            .map(|((item, c), d)| {
                self.account(app, item, c.partition.as_ref(), d, allowed, generation);
                Acquired {
                    outcome: Outcome::Decided(d),
                    partition: c.partition,
                }
            })
            .collect();
        Ok(AcquiredAll { allowed, results })
    }

    /// A call with a blocked item is denied whole, without taking anything: the blocked
    /// items are answered from the snapshot, the others only checked (their numbers as they
    /// stand), so each still gets its own reply.
    async fn all_blocked(
        &self,
        app: &AppSlug,
        items: &[AllItem],
        checked: Vec<Checked>,
    ) -> Result<AcquiredAll, AllRefused> {
        let open: Vec<usize> = (0..items.len()).filter(|&i| !checked[i].blocks()).collect();
        let checks: Vec<AllItem> = open
            .iter()
            .map(|&i| AllItem {
                permits: CheckOrPermits::Check,
                ..items[i].clone()
            })
            .collect();
        let mut open_results = if checks.is_empty() {
            Vec::new()
        } else {
            // Boxed: this is the caller's own future, entered again with no blocked item.
            match Box::pin(self.decide_all(app, &checks)).await {
                Ok(all) => all.results,
                // The call is denied whatever Redis says: the others' numbers are unknown.
                Err(AllRefused {
                    refusal: Refusal::Unavailable,
                    ..
                }) => open
                    .iter()
                    .map(|&i| Acquired {
                        outcome: Outcome::Degraded {
                            limit: checked[i].policy.as_deref().map(PolicyEntry::max_permits),
                            enforced: true,
                        },
                        partition: checked[i].partition.clone(),
                    })
                    .collect(),
                Err(refused) => {
                    return Err(AllRefused {
                        index: open[refused.index],
                        refusal: refused.refusal,
                    });
                }
            }
        }
        .into_iter();
        let results = items
            .iter()
            .zip(checked)
            .map(
                |(item, c)| match c.policy.as_deref().filter(|p| p.blocks()) {
                    Some(policy) => {
                        let denial = blocked_denial(policy, c.partition.as_ref());
                        if !item.permits.is_check() {
                            let caller =
                                c.partition.as_ref().map_or(app.as_str(), Partition::as_str);
                            self.count(&item.name, caller, denial.decision);
                        }
                        Acquired {
                            outcome: Outcome::Decided(denial),
                            partition: c.partition,
                        }
                    }
                    None => open_results
                        .next()
                        .expect("one checked result per item that is not blocked"),
                },
            )
            .collect();
        Ok(AcquiredAll {
            allowed: false,
            results,
        })
    }

    /// Puts back the policies Redis lost, one job of the batcher's queue each.
    async fn restore_all(
        &self,
        lost: &[&PolicyEntry],
    ) -> Result<(), ratekeeper_limiter::LimiterError> {
        for policy in lost {
            tracing::warn!(policy = %policy.config.name, "redis had lost the policy; restoring it");
            self.batcher.restore(&policy.config).await?;
        }
        Ok(())
    }

    /// The checks a single acquire makes before Redis, for one item.
    fn check_item(&self, app: &AppSlug, item: &AllItem) -> Result<Checked, Refusal> {
        let policy = self.snapshot.policy(item.name.as_str());
        let partition = partition_of(policy.as_deref(), app, item.key.clone())?;
        let permits = item.permits.decided_as().get();
        if let Some(policy) = policy.as_deref().filter(|p| p.blocks()) {
            check_blocked(policy, app, permits, partition.as_ref())?;
        } else if let Some(policy) = policy.as_deref() {
            let limit = match &partition {
                Some(partition) => {
                    if !policy.allows(app) {
                        return Err(Refusal::AppNotAllowed);
                    }
                    policy.limits_for(partition.as_str()).max_permits
                }
                None => policy.max_permits(),
            };
            if permits > limit {
                return Err(Refusal::PermitsAboveMax { limit });
            }
        }
        Ok(Checked { policy, partition })
    }

    /// One job of the batcher's queue for every item.
    async fn ask_all(
        &self,
        app: &AppSlug,
        items: &[AllItem],
        checked: &[Checked],
    ) -> Result<Vec<AcquireOutcome>, ratekeeper_limiter::LimiterError> {
        let asks: Vec<AllAsk<'_>> = items
            .iter()
            .zip(checked)
            .map(|(item, c)| {
                let target = match (&c.partition, c.policy.as_deref()) {
                    (Some(partition), Some(policy)) => AllTarget::Keyed(KeyedBucket {
                        policy: &policy.config,
                        caller: partition.as_str(),
                        limits: policy.limits_for(partition.as_str()),
                    }),
                    (_, policy) => AllTarget::Global {
                        name: &item.name,
                        algorithm: policy.map_or(Algorithm::TokenBucket, PolicyEntry::algorithm),
                        config: policy.map(|policy| &*policy.config),
                    },
                };
                AllAsk {
                    target,
                    ask: item.permits,
                }
            })
            .collect();
        self.batcher.acquire_all(&asks, app).await
    }

    /// Counts one item's decision and remembers its denial (see the module's words).
    fn account(
        &self,
        app: &AppSlug,
        item: &AllItem,
        partition: Option<&Partition>,
        decided: Decided,
        allowed: bool,
        generation: u64,
    ) {
        let caller = partition.map_or(app.as_str(), Partition::as_str);
        let denial = matches!(decided.decision, Decision::Denied | Decision::ShadowDenied);
        if denial && decided.algorithm != Algorithm::Concurrency {
            self.denials.remember(
                &item.name,
                caller,
                item.permits.decided_as().get(),
                decided,
                generation,
            );
        }
        if !item.permits.is_check() && (allowed || !decided.decision.allowed()) {
            self.count(&item.name, caller, decided.decision);
        }
    }

    /// Redis could not answer: each item as a single acquire's failure mode says; the
    /// first refused item (a fail-closed policy: 503) refuses the call.
    fn all_without_redis(
        &self,
        app: &AppSlug,
        items: &[AllItem],
        checked: Vec<Checked>,
        error: ratekeeper_limiter::LimiterError,
    ) -> Result<AcquiredAll, AllRefused> {
        if let Some(first) = items.first() {
            self.log_outage(&first.name, &error);
        }
        let outcomes = checked
            .iter()
            .enumerate()
            .map(|(index, c)| {
                fallback(app, c.policy.as_deref()).map_err(|refusal| AllRefused { index, refusal })
            })
            .collect::<Result<Vec<Outcome>, AllRefused>>();
        let outcomes = match outcomes {
            Ok(outcomes) => outcomes,
            Err(refused) => {
                if refused.refusal == Refusal::Unavailable {
                    self.outcomes.unavailable.inc();
                }
                return Err(refused);
            }
        };
        for item in items.iter().filter(|item| !item.permits.is_check()) {
            self.tally.count(item.name.as_str(), Decision::Granted);
            self.outcomes.degraded.inc();
        }
        let results = outcomes
            .into_iter()
            .zip(checked)
            .map(|(outcome, c)| Acquired {
                outcome,
                partition: c.partition,
            })
            .collect();
        Ok(AcquiredAll {
            allowed: true,
            results,
        })
    }
}
