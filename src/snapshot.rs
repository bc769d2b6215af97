//! In-memory copies of what the acquire path needs from SQL (live API keys, each policy's
//! configuration), so that path never queries SQL. The sync task replaces them
//! whole; readers take an `Arc` without locking.
//!
//! A policy is held once: the map is a set of entries found by their own name (no second
//! copy of the name as a key), and the config the sync task pushes to Redis is the entry's
//! own `Arc`. An instance with 100,000 policies holds each in a few hundred bytes. The
//! entry keeps its name in place where it is short (`inline_name.rs`), so that finding a
//! policy among thousands reads the entry, which the decision needs anyway, and not its
//! config and its name too.

use std::borrow::Borrow;
use std::collections::{HashMap, HashSet};
use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use arc_swap::ArcSwap;

use crate::domain::{Algorithm, AppSlug, DescriptorPattern, FailureMode, Scope};
use crate::store::{KeyGrant, PolicyRecord};
use ratekeeper_limiter::{BucketLimits, PolicyConfig};

mod descriptor_index;
mod descriptor_wildcard;
mod inline_name;

use descriptor_index::DescriptorIndex;
pub use descriptor_index::DescriptorMatch;
pub use inline_name::InlineName;

/// A live API key, by the SHA-256 of its text.
#[derive(Debug)]
pub struct KeyEntry {
    pub key_id: String,
    pub app: AppSlug,
    /// When the key stops working (Unix ms), if ever: checked on each acquire against
    /// this instance's clock, so an expiry needs no reload to take effect.
    pub expires_ms: Option<i64>,
    /// Unix ms of the last acquire with this key, 0 if none since loaded; written on the
    /// hot path without a lock, flushed to SQL by the sync task.
    pub last_used_ms: AtomicI64,
    /// Revoked: refused, and counted for its application (someone still sends it).
    pub revoked: bool,
}

impl KeyEntry {
    /// The entry of a key as SQL stores it, by its digest; `None` (logged) for one that
    /// cannot be (an invalid slug or hash).
    fn of(grant: KeyGrant) -> Option<([u8; 32], Self)> {
        let Ok(app) = AppSlug::parse(&grant.app_slug) else {
            tracing::error!(key_id = %grant.key_id, "api key of an invalid app slug ignored");
            return None;
        };
        let mut digest = [0u8; 32];
        if hex::decode_to_slice(&grant.key_hash, &mut digest).is_err() {
            tracing::error!(key_id = %grant.key_id, "api key of an invalid hash ignored");
            return None;
        }
        let entry = KeyEntry {
            key_id: grant.key_id,
            app,
            expires_ms: grant.expires_ms,
            last_used_ms: AtomicI64::new(0),
            revoked: grant.revoked_ms.is_some(),
        };
        Some((digest, entry))
    }
}

/// What the acquire path knows of a policy from SQL: enough to answer what needs no
/// Redis when Redis cannot be reached (allowed apps, capacity, enabled, failure mode), and
/// what Redis should hold, to put it back when Redis has lost it.
#[derive(Debug, Clone, PartialEq)]
pub struct PolicyEntry {
    /// The policy's name, where the snapshot's lookup compares it (see `inline_name.rs`).
    pub name: InlineName,
    /// The policy as Redis should hold it, shared with the sync task's list of them. Its
    /// `apps` (",a,b,") are the allowed applications.
    pub config: Arc<PolicyConfig>,
    pub failure_mode: FailureMode,
    /// Whose policy it is: the console's per-application activity adds its counts there.
    pub owner_app: AppSlug,
    /// A keyed policy's other limits, by caller (app slug or key); none for most policies,
    /// which then hold no table (an instance holds every policy).
    pub overrides: Option<Box<HashMap<String, BucketLimits>>>,
    /// The Envoy-style descriptor patterns that find the policy (the snapshot's index is
    /// built from them).
    pub descriptors: Vec<DescriptorPattern>,
}

impl KeyEntry {
    /// Whether the key has expired at `now_ms`.
    pub fn expired_at(&self, now_ms: i64) -> bool {
        self.expires_ms.is_some_and(|at| at <= now_ms)
    }
}

impl PolicyEntry {
    pub fn of(record: &PolicyRecord) -> Self {
        let config = Arc::new(PolicyConfig::new(
            &record.spec,
            record.created_ms,
            record.version,
        ));
        let base = BucketLimits::of(&config);
        let overrides: HashMap<String, BucketLimits> = record
            .spec
            .overrides
            .iter()
            .map(|o| {
                let limits = BucketLimits {
                    max_permits: o.max_permits.map_or(base.max_permits, |m| m.get()),
                    rate: o.rate.map_or(base.rate, |r| r.get()),
                    window_ms: o.window_ms.map(|w| w.get()).or(base.window_ms),
                    lease_ttl_ms: o.lease_ttl_ms.map(|l| l.get()).or(base.lease_ttl_ms),
                };
                (o.matches.clone(), limits)
            })
            .collect();
        Self {
            name: InlineName::new(config.name.as_str()),
            config,
            failure_mode: record.spec.failure_mode,
            owner_app: record.spec.owner_app.clone(),
            overrides: (!overrides.is_empty()).then(|| Box::new(overrides)),
            descriptors: record.spec.descriptors.clone(),
        }
    }

    pub fn scope(&self) -> Scope {
        self.config.scope
    }

    /// The limits of one caller's bucket: its override's, or the policy's.
    pub fn limits_for(&self, caller: &str) -> BucketLimits {
        self.overrides
            .as_ref()
            .and_then(|o| o.get(caller))
            .copied()
            .unwrap_or_else(|| BucketLimits::of(&self.config))
    }

    /// Whether `app` may acquire: exact, since slugs never contain the commas around each.
    pub fn allows(&self, app: &AppSlug) -> bool {
        let (apps, app) = (self.config.apps.as_bytes(), app.as_str().as_bytes());
        apps.windows(app.len() + 2)
            .any(|w| w[0] == b',' && w[w.len() - 1] == b',' && &w[1..w.len() - 1] == app)
    }

    pub fn max_permits(&self) -> i64 {
        self.config.max_permits
    }

    /// Whether every acquire is denied by the instance (an enabled policy in mode `block`;
    /// a disabled one grants, whatever its mode).
    pub fn blocks(&self) -> bool {
        self.config.enabled && self.config.mode == crate::domain::Mode::Block
    }

    pub fn algorithm(&self) -> Algorithm {
        self.config.algorithm
    }

    pub fn version(&self) -> i64 {
        self.config.version
    }
}

/// A policy in the set, found by its name.
#[derive(Clone)]
struct ByName(Arc<PolicyEntry>);

impl ByName {
    fn of(record: &PolicyRecord) -> Self {
        Self(Arc::new(PolicyEntry::of(record)))
    }
}

impl Borrow<[u8]> for ByName {
    fn borrow(&self) -> &[u8] {
        self.0.name.as_bytes()
    }
}

// Hash and Eq by the name alone, as `Borrow<[u8]>` requires.
impl Hash for ByName {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.0.name.hash(state);
    }
}

impl PartialEq for ByName {
    fn eq(&self, other: &Self) -> bool {
        self.0.name == other.0.name
    }
}

impl Eq for ByName {}

/// The policies by name, and their descriptor patterns' index, replaced together so that
/// a lookup never sees one without the other.
#[derive(Default, Clone)]
struct Policies {
    by_name: HashSet<ByName>,
    descriptors: DescriptorIndex,
}

impl Policies {
    fn of(by_name: HashSet<ByName>) -> Self {
        let descriptors = DescriptorIndex::build(by_name.iter().map(|p| &p.0));
        Self {
            by_name,
            descriptors,
        }
    }
}

/// A replacement of the policies under way (`Snapshot::reload_policies`). An entry that did
/// not change is kept, not rebuilt: a reload after one edit among 100,000 policies leaves
/// the other 99,999 where they were in memory, instead of a second set that the allocator
/// keeps; and the records are taken one at a time, so a reload holds no list of them.
pub struct PolicyReload<'a> {
    snapshot: &'a Snapshot,
    current: Arc<Policies>,
    next: HashSet<ByName>,
    configs: Vec<Arc<PolicyConfig>>,
}

impl PolicyReload<'_> {
    pub fn add(&mut self, record: &PolicyRecord) {
        let fresh = PolicyEntry::of(record);
        let entry = match self
            .current
            .by_name
            .get(record.spec.name.as_str().as_bytes())
        {
            Some(kept) if *kept.0 == fresh => kept.clone(),
            _ => ByName(Arc::new(fresh)),
        };
        self.configs.push(entry.0.config.clone());
        self.next.insert(entry);
    }

    /// The policies added replace the current ones; their configs, in the order added.
    pub fn finish(self) -> Vec<Arc<PolicyConfig>> {
        self.snapshot
            .policies
            .store(Arc::new(Policies::of(self.next)));
        self.configs
    }
}

#[derive(Default)]
pub struct Snapshot {
    /// By the SHA-256 of the key (the hex of it is what SQL stores).
    keys: ArcSwap<HashMap<[u8; 32], Arc<KeyEntry>>>,
    /// When the SQL read of those keys began (Unix ms): a key announced before it and not
    /// among them was revoked since (see `acquire::new_keys`).
    keys_read_ms: AtomicI64,
    policies: ArcSwap<Policies>,
}

impl Snapshot {
    /// The policy an Envoy descriptor (its `entries` as key and value, in order) names
    /// through a declared pattern in `domain`, and its bucket key; `None` when no pattern
    /// matches (the caller then tries the `generic_key`/`resource` convention).
    pub fn descriptor_policy(
        &self,
        domain: &str,
        entries: &[(&str, &str)],
    ) -> Option<DescriptorMatch> {
        self.policies.load().descriptors.find(domain, entries)
    }

    pub fn key(&self, digest: &[u8; 32]) -> Option<Arc<KeyEntry>> {
        self.keys.load().get(digest).cloned()
    }

    pub fn policy(&self, name: &str) -> Option<Arc<PolicyEntry>> {
        self.policies
            .load()
            .by_name
            .get(name.as_bytes())
            .map(|p| p.0.clone())
    }

    /// The policies some applications own (for the webhook watcher, off the hot path: it
    /// walks every policy).
    pub fn policies_owned_by(&self, apps: &[&str]) -> Vec<Arc<PolicyEntry>> {
        self.policies
            .load()
            .by_name
            .iter()
            .filter(|p| apps.contains(&p.0.owner_app.as_str()))
            .map(|p| p.0.clone())
            .collect()
    }

    pub fn keys_read_ms(&self) -> i64 {
        self.keys_read_ms.load(Ordering::Relaxed)
    }

    /// Replaces the keys with those SQL held when a read that began at `read_ms` saw
    /// them, carrying over last-used times not yet flushed.
    pub fn replace_keys(&self, grants: Vec<KeyGrant>, read_ms: i64) {
        let old = self.keys.load();
        let mut next = HashMap::with_capacity(grants.len());
        for grant in grants {
            let Some((digest, mut entry)) = KeyEntry::of(grant) else {
                continue;
            };
            let used = old
                .get(&digest)
                .map_or(0, |e| e.last_used_ms.load(Ordering::Relaxed));
            entry.last_used_ms = AtomicI64::new(used);
            next.insert(digest, Arc::new(entry));
        }
        self.keys.store(Arc::new(next));
        self.keys_read_ms.store(read_ms, Ordering::Relaxed);
    }

    /// Adds one key created after the keys were read (until the next read brings it);
    /// gives back the entry held, the one already there if another call added it first.
    pub fn add_key(&self, grant: KeyGrant) -> Option<Arc<KeyEntry>> {
        let (digest, entry) = KeyEntry::of(grant)?;
        let entry = Arc::new(entry);
        let mut held = entry.clone();
        self.keys.rcu(|keys| {
            let mut next = HashMap::clone(keys);
            held = next.entry(digest).or_insert_with(|| entry.clone()).clone();
            next
        });
        Some(held)
    }

    /// Replaces the policies with `records`, and gives back their configs in that order
    /// (the same `Arc`s the entries hold).
    pub fn replace_policies(&self, records: &[PolicyRecord]) -> Vec<Arc<PolicyConfig>> {
        let mut reload = self.reload_policies();
        for record in records {
            reload.add(record);
        }
        reload.finish()
    }

    /// Begins replacing the policies with those given to [`PolicyReload::add`], one at a
    /// time as SQL reads them; they replace the current ones at [`PolicyReload::finish`].
    pub fn reload_policies(&self) -> PolicyReload<'_> {
        let current = self.policies.load_full();
        PolicyReload {
            snapshot: self,
            next: HashSet::with_capacity(current.by_name.len()),
            configs: Vec::with_capacity(current.by_name.len()),
            current,
        }
    }

    /// Adds or replaces one policy at once (after a local write), before the next reload.
    /// The set is copied, but a copy only counts references: no entry is copied; the
    /// descriptor index is built again from it (only policies with patterns go in).
    pub fn upsert_policy(&self, record: &PolicyRecord) {
        let entry = ByName::of(record);
        self.policies.rcu(|current| {
            let mut next = current.by_name.clone();
            next.replace(entry.clone());
            Policies::of(next)
        });
    }

    pub fn remove_policy(&self, name: &str) {
        self.policies.rcu(|current| {
            let mut next = current.by_name.clone();
            next.remove(name.as_bytes());
            Policies::of(next)
        });
    }

    /// Keys used since the last call, with when, taking the marks (a use racing with this
    /// call is at worst recorded on the next one).
    pub fn key_usage(&self) -> Vec<(String, i64)> {
        self.keys
            .load()
            .values()
            .filter_map(|e| {
                let at = e.last_used_ms.swap(0, Ordering::Relaxed);
                (at > 0).then(|| (e.key_id.clone(), at))
            })
            .collect()
    }
}
