//! One acquire as the scripts take it: its keys and arguments, made once and sent either
//! as its algorithm's own script call or as one entry of the batch script
//! (`lua/acquire_batch.lua`), which takes the same keys and arguments after a kind and a
//! count (identical acquires that waited together go as one entry).
//!
//! Public, so that tools that drive the scripts themselves (the benchmark, the script-cost
//! example) build their calls with this one encoder instead of writing the protocol again.

use rand::Rng;
use redis::{Cmd, ScriptInvocation};

use crate::client::{Limiter, StateKey, scripts};
use crate::decide::decision::LeaseId;
use crate::decide::keyed::KeyedBucket;
use crate::decide::reply::{HELD_EXPIRY, PACKED_KIND};
use crate::domain::{Algorithm, AppSlug, Mode, PolicyName, Scope};
use crate::policy_config::PolicyConfig;

/// An acquire ready to be sent.
pub struct AcquireCall {
    algorithm: Algorithm,
    /// The policy's hash (global) or the caller's bucket (keyed).
    key: String,
    /// A global policy's state key beside its hash, for the algorithms that have one.
    state_key: Option<String>,
    permits: i64,
    whose: Whose,
    /// The sliding log's request id, or the concurrency lease (a global script takes the
    /// id, a keyed one the members' prefix `<app>|<id>|`): the argument as the script takes it.
    id: Option<String>,
    /// The lease a grant will be held under (concurrency only).
    pub(crate) lease: Option<LeaseId>,
}

/// Whose bucket, with what the script needs beyond the permits.
#[derive(PartialEq)]
enum Whose {
    /// A global policy: its config is in its hash, where the app is checked; a token
    /// bucket's also comes with the call, as this instance has it.
    Global {
        app: AppSlug,
        passed: Option<PassedConfig>,
        /// Whether a token bucket's state still in the hash may move to its state key
        /// (the limiter's [`Limiter::moves_state`]).
        moves_state: bool,
    },
    /// A caller's bucket of a keyed policy: its limits from this instance's snapshot.
    Keyed {
        max_permits: i64,
        param: String,
        /// The rate (0 for the algorithms without one), as a packed entry takes it.
        rate: f64,
        gate: Gate,
        version: i64,
        /// Whether its expiry may be held ahead (the limiter's
        /// [`Limiter::holds_keyed_expiry`]).
        held_expiry: bool,
    },
}

/// A global token bucket's configuration as this instance has it, sent with its acquires
/// (`lua/lib/token_bucket_global.lua`): Redis decides with it when its version and
/// incarnation are those of the state, and reads the policy's hash otherwise.
#[derive(PartialEq)]
struct PassedConfig {
    max_permits: i64,
    rate: f64,
    gate: Gate,
    version: i64,
    created_ms: i64,
}

impl PassedConfig {
    /// Whether `config` may go with a global token bucket's acquire by `app`: only a
    /// global token bucket's that allows the app. Otherwise none goes, and the hash
    /// answers (no such policy, another algorithm, an app not allowed), whatever the
    /// caller believed.
    fn fits(config: &PolicyConfig, app: &AppSlug) -> bool {
        config.algorithm == Algorithm::TokenBucket
            && config.scope == Scope::Global
            && config.apps.split(',').any(|a| a == app.as_str())
    }

    fn of(config: &PolicyConfig) -> Self {
        Self {
            max_permits: config.max_permits,
            rate: config.rate,
            gate: Gate::of(config),
            version: config.version,
            created_ms: config.created_ms,
        }
    }
}

/// What a keyed acquire may do to its bucket, as the keyed scripts take it
/// (`lua/lib/keyed.lua`): a global policy's hash says the same to its scripts, so shadow
/// mode and a disabled policy are applied by the scripts for every scope.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Gate {
    /// Disabled, or a read of the bucket's state: nothing written.
    Closed,
    Enforce,
    /// Decided, but a denial answered as a shadow denial (granted).
    Shadow,
}

impl Gate {
    /// What the policy's switch and mode let an acquire do.
    fn of(policy: &PolicyConfig) -> Self {
        match (policy.enabled, policy.mode) {
            (false, _) => Self::Closed,
            // A blocked policy is denied by the instance and never reaches here; should a
            // stale caller send it, Redis enforces the limit as it stands.
            (true, Mode::Enforce | Mode::Block) => Self::Enforce,
            (true, Mode::Shadow) => Self::Shadow,
        }
    }

    /// The gate as a packed entry takes it (`arg`'s number).
    fn number(self) -> u8 {
        match self {
            Self::Closed => 0,
            Self::Enforce => 1,
            Self::Shadow => 2,
        }
    }

    fn arg(self) -> &'static str {
        match self {
            Self::Closed => "0",
            Self::Enforce => "1",
            Self::Shadow => "2",
        }
    }

    /// The gate as the keyed scripts take it: its number, plus [`HELD_EXPIRY`] when the
    /// bucket's expiry may be held ahead.
    fn keyed(self, held_expiry: bool) -> u8 {
        self.number() + if held_expiry { HELD_EXPIRY } else { 0 }
    }
}

impl AcquireCall {
    /// An acquire of a global policy with the script of `algorithm` (what this instance
    /// believes it uses; the script answers -4 with the right one if not), and the
    /// policy's `config` in this instance's snapshot (`None`: not there yet).
    pub fn global(
        limiter: &Limiter,
        name: &PolicyName,
        algorithm: Algorithm,
        permits: i64,
        app: &AppSlug,
        config: Option<&PolicyConfig>,
    ) -> Self {
        let (id, lease) = match algorithm {
            Algorithm::Concurrency => {
                let lease = LeaseId::generate();
                (Some(lease.to_string()), Some(lease))
            }
            other => (request_id(other), None),
        };
        Self {
            algorithm,
            key: limiter.keys.policy(name),
            // Only the state key this algorithm's script takes: none for the sliding window
            // and GCRA, whose state lives in the hash.
            state_key: StateKey::of(algorithm).map(|which| limiter.keys.state(name, which)),
            permits,
            whose: Whose::Global {
                app: app.clone(),
                passed: (algorithm == Algorithm::TokenBucket)
                    .then(|| config.filter(|config| PassedConfig::fits(config, app)))
                    .flatten()
                    .map(PassedConfig::of),
                moves_state: limiter.moves_state(),
            },
            id,
            lease,
        }
    }

    /// An acquire of `permits` on one caller's bucket, as its policy's mode and switch say.
    pub fn keyed(limiter: &Limiter, bucket: &KeyedBucket<'_>, permits: i64, app: &AppSlug) -> Self {
        Self::keyed_gated(limiter, bucket, permits, app, Gate::of(bucket.policy))
    }

    /// A read of one caller's bucket: the keyed script, writing nothing.
    pub(crate) fn keyed_read(limiter: &Limiter, bucket: &KeyedBucket<'_>, app: &AppSlug) -> Self {
        Self::keyed_gated(limiter, bucket, 1, app, Gate::Closed)
    }

    fn keyed_gated(
        limiter: &Limiter,
        bucket: &KeyedBucket<'_>,
        permits: i64,
        app: &AppSlug,
        gate: Gate,
    ) -> Self {
        let algorithm = bucket.policy.algorithm;
        let (id, lease) = match algorithm {
            Algorithm::Concurrency => {
                let lease = LeaseId::generate();
                (Some(format!("{app}|{lease}|")), Some(lease))
            }
            other => (request_id(other), None),
        };
        Self {
            algorithm,
            key: limiter.keyed_key(bucket),
            state_key: None,
            permits,
            whose: Whose::Keyed {
                max_permits: bucket.limits.max_permits,
                param: bucket.limits.param(algorithm),
                rate: bucket.limits.rate,
                gate,
                version: bucket.policy.version,
                held_expiry: limiter.holds_keyed_expiry(),
            },
            id,
            lease,
        }
    }

    pub fn algorithm(&self) -> Algorithm {
        self.algorithm
    }

    /// The key the acquire decides on (the policy's hash, or the caller's bucket): a
    /// cluster routes its call by it.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// Whether `later` asks for exactly what this acquire asks: the same bucket, algorithm,
    /// permits and arguments, and no id of its own (a sliding log's request and a lease
    /// are each one of a kind). A batch sends such acquires as one entry with a count, and
    /// the script decides each in turn, as if each had its own entry.
    pub fn repeated_by(&self, later: &Self) -> bool {
        self.id.is_none()
            && later.id.is_none()
            && self.algorithm == later.algorithm
            && self.permits == later.permits
            && self.key == later.key
            && self.whose == later.whose
    }

    /// Its algorithm's own script, for this acquire alone.
    pub fn script(&self) -> &'static scripts::LuaScript {
        match self.whose {
            Whose::Global { .. } => scripts::acquire_script(self.algorithm),
            Whose::Keyed { .. } => scripts::keyed_acquire_script(self.algorithm),
        }
    }

    /// Its algorithm's own script, called for this acquire alone, as a pipeline takes it.
    pub(crate) fn alone(&self) -> ScriptInvocation<'static> {
        let mut invocation = self.script().prepare_invoke();
        for key in self.keys() {
            invocation.key(key);
        }
        self.add_args(|arg| {
            invocation.arg(arg);
        });
        invocation
    }

    /// A call of its algorithm's own script (its function in the library) for this
    /// acquire alone: what the batcher sends for an acquire that waited for nothing.
    pub fn alone_cmd(&self) -> Cmd {
        let mut cmd = self.script().call_cmd(self.key_count());
        self.push_keys(&mut cmd);
        self.add_args(|arg| {
            cmd.arg(arg);
        });
        cmd
    }

    /// A call of the batch script (`lua/acquire_batch.lua`) deciding `entries` in order,
    /// each an acquire and how many identical acquires it stands for (at least 1): every
    /// entry's keys, then every entry's kind (the algorithm's number, negative for a keyed
    /// bucket), count and own arguments. The reply is one string of packed integers
    /// ([`scripts::batch_reply_integers`]), [`REPLY_LEN`](crate::decide::reply::REPLY_LEN)
    /// per acquire.
    pub fn batch_cmd<'c, I>(entries: I) -> Cmd
    where
        I: IntoIterator<Item = (&'c AcquireCall, usize)>,
        I::IntoIter: Clone,
    {
        let entries = entries.into_iter();
        let keys = entries.clone().map(|(call, _)| call.key_count()).sum();
        let mut cmd = scripts::ACQUIRE_BATCH.call_cmd(keys);
        for (call, _) in entries.clone() {
            call.push_keys(&mut cmd);
        }
        for (call, count) in entries {
            call.push_batch_entry(&mut cmd, count);
        }
        cmd
    }

    /// Adds it to a call of the batch script, standing for `count` identical acquires: a
    /// token bucket's packed in one argument after its kind, the others as
    /// [`Self::push_tagged_args`] adds them.
    fn push_batch_entry(&self, call: &mut Cmd, count: usize) {
        if self.algorithm != Algorithm::TokenBucket || self.id.is_some() {
            self.push_tagged_args(call, count as i64);
            return;
        }
        // `lua/acquire_batch.lua`'s PACKED_GLOBAL and PACKED_KEYED, little-endian.
        let mut packed = Vec::with_capacity(64);
        packed.extend_from_slice(&i32::try_from(count).unwrap_or(i32::MAX).to_le_bytes());
        packed.extend_from_slice(&self.permits.to_le_bytes());
        let kind = match &self.whose {
            Whose::Global {
                app,
                passed,
                moves_state,
            } => {
                // Not in this instance's snapshot: -1 is no version, the hash decides.
                let (max_permits, rate, gate, version, created_ms) = match passed {
                    Some(p) => (p.max_permits, p.rate, p.gate, p.version, p.created_ms),
                    None => (0, 0.0, Gate::Closed, -1, -1),
                };
                packed.extend_from_slice(&max_permits.to_le_bytes());
                packed.extend_from_slice(&rate.to_le_bytes());
                packed.push(gate.number());
                packed.extend_from_slice(&version.to_le_bytes());
                packed.extend_from_slice(&created_ms.to_le_bytes());
                packed.push(u8::from(*moves_state));
                packed.extend_from_slice(app.as_str().as_bytes());
                packed.push(0);
                PACKED_KIND
            }
            Whose::Keyed {
                max_permits,
                rate,
                gate,
                version,
                held_expiry,
                ..
            } => {
                packed.extend_from_slice(&max_permits.to_le_bytes());
                packed.extend_from_slice(&rate.to_le_bytes());
                packed.push(gate.keyed(*held_expiry));
                packed.extend_from_slice(&version.to_le_bytes());
                -PACKED_KIND
            }
        };
        call.arg(kind).arg(packed);
    }

    /// A call of a script that takes acquires as the batch script does, each with the
    /// integer that follows its kind (the batch's count, `lua/acquire_all.lua`'s take,
    /// `lua/give_back.lua`'s instant): every entry's keys, then every entry's kind, that
    /// integer and its own arguments.
    pub(crate) fn entries_cmd<'c, I>(script: &scripts::LuaScript, entries: I) -> Cmd
    where
        I: Iterator<Item = (&'c AcquireCall, i64)> + Clone,
    {
        let keys = entries.clone().map(|(call, _)| call.key_count()).sum();
        let mut cmd = script.call_cmd(keys);
        for (call, _) in entries.clone() {
            call.push_keys(&mut cmd);
        }
        for (call, tag) in entries {
            call.push_tagged_args(&mut cmd, tag);
        }
        cmd
    }

    /// How many keys it takes.
    fn key_count(&self) -> usize {
        1 + usize::from(self.state_key.is_some())
    }

    /// Its keys, in the single script's order.
    fn keys(&self) -> impl Iterator<Item = &str> {
        std::iter::once(self.key.as_str()).chain(self.state_key.as_deref())
    }

    /// Adds its keys to a script call.
    fn push_keys(&self, call: &mut Cmd) {
        for key in self.keys() {
            call.arg(key);
        }
    }

    /// Adds it to the arguments of a call of such a script: its kind, the integer `tag`
    /// (for the batch script, how many identical acquires it stands for), then its own
    /// arguments.
    fn push_tagged_args(&self, call: &mut Cmd, tag: i64) {
        let kind = match self.whose {
            Whose::Global { .. } => self.algorithm.index(),
            Whose::Keyed { .. } => -self.algorithm.index(),
        };
        call.arg(kind).arg(tag);
        self.add_args(|arg| {
            call.arg(arg);
        });
    }

    /// Its arguments in the single script's order, each as it is sent.
    fn add_args(&self, mut add: impl FnMut(Arg<'_>)) {
        add(Arg::Int(self.permits));
        match &self.whose {
            Whose::Global {
                app,
                passed,
                moves_state,
            } => {
                add(Arg::Text(app.as_str()));
                if self.algorithm == Algorithm::TokenBucket {
                    match passed {
                        Some(passed) => {
                            add(Arg::Int(passed.max_permits));
                            add(Arg::Text(&passed.rate.to_string()));
                            add(Arg::Text(passed.gate.arg()));
                            add(Arg::Int(passed.version));
                            add(Arg::Int(passed.created_ms));
                        }
                        // Not in this instance's snapshot: "-" is no version, the hash decides.
                        None => {
                            for unknown in ["0", "0", "0", "-", "-"] {
                                add(Arg::Text(unknown));
                            }
                        }
                    }
                    add(Arg::Text(if *moves_state { "1" } else { "0" }));
                }
            }
            Whose::Keyed {
                max_permits,
                param,
                gate,
                version,
                held_expiry,
                ..
            } => {
                add(Arg::Int(*max_permits));
                add(Arg::Text(param));
                add(Arg::Int(i64::from(gate.keyed(*held_expiry))));
                add(Arg::Int(*version));
            }
        }
        if let Some(id) = &self.id {
            add(Arg::Text(id));
        }
    }
}

/// One argument of a script call.
enum Arg<'a> {
    Int(i64),
    Text(&'a str),
}

impl redis::ToRedisArgs for Arg<'_> {
    fn write_redis_args<W: ?Sized + redis::RedisWrite>(&self, out: &mut W) {
        match self {
            Self::Int(n) => n.write_redis_args(out),
            Self::Text(text) => text.write_redis_args(out),
        }
    }
}

/// A sliding log's request id: it makes each grant's log members unique, even within one
/// microsecond. The other algorithms take none (the concurrency lease is made apart).
fn request_id(algorithm: Algorithm) -> Option<String> {
    (algorithm == Algorithm::SlidingLog).then(|| {
        let request: u64 = rand::rng().random();
        format!("{request:016x}")
    })
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::client::functions;
    use crate::decide::keyed::BucketLimits;
    use crate::decide::reply::{GLOBAL_ARGS, KEYED_ARGS, TOKEN_BUCKET_ARGS};

    fn args_of(call: &AcquireCall) -> usize {
        let mut n = 0;
        call.add_args(|_| n += 1);
        n
    }

    fn words(cmd: &Cmd) -> Vec<String> {
        cmd.args_iter()
            .map(|arg| match arg {
                redis::Arg::Simple(bytes) => String::from_utf8_lossy(bytes).into_owned(),
                _ => "?".to_owned(),
            })
            .collect()
    }

    #[tokio::test]
    async fn a_batch_call_is_every_entrys_keys_then_every_entrys_kind_and_packed_arguments() {
        let limiter = Limiter::new("redis://127.0.0.1:1", "t", Duration::from_secs(1)).unwrap();
        let app = AppSlug::parse("shop").unwrap();
        let call = |name: &str| {
            let name = PolicyName::parse(name).unwrap();
            AcquireCall::global(&limiter, &name, Algorithm::TokenBucket, 1, &app, None)
        };
        let (hot, other) = (call("hot"), call("other"));
        let batch = functions::LIBRARY.function("acquire_batch");
        let cmd = AcquireCall::batch_cmd([(&hot, 3), (&other, 1)]);
        assert_eq!(
            words(&cmd)[..9],
            [
                "FCALL",
                &batch,
                "4",
                "t:{hot}",
                "t:{hot}:tb",
                "t:{other}",
                "t:{other}:tb",
                "100",
                // (the packed entry, below)
                &words(&cmd)[8],
            ]
        );
        assert_eq!(words(&cmd)[9], "100");
        // lua/acquire_batch.lua's PACKED_GLOBAL: count, permits, max_permits, rate, gate,
        // version and created_ms (-1: not known here), move, the app and a zero.
        let packed = |count: i32| {
            let mut bytes = count.to_le_bytes().to_vec();
            bytes.extend(1i64.to_le_bytes());
            bytes.extend(0i64.to_le_bytes());
            bytes.extend(0f64.to_le_bytes());
            bytes.push(0);
            bytes.extend((-1i64).to_le_bytes());
            bytes.extend((-1i64).to_le_bytes());
            bytes.push(1);
            bytes.extend(b"shop\0");
            bytes
        };
        let raw: Vec<Vec<u8>> = cmd
            .args_iter()
            .map(|arg| match arg {
                redis::Arg::Simple(bytes) => bytes.to_vec(),
                _ => Vec::new(),
            })
            .collect();
        assert_eq!(raw[8], packed(3));
        assert_eq!(raw[10], packed(1));
        assert_eq!(raw.len(), 11);
        let alone = functions::LIBRARY.function("token_bucket");
        assert_eq!(
            words(&hot.alone_cmd()),
            [
                "FCALL",
                &alone,
                "2",
                "t:{hot}",
                "t:{hot}:tb",
                "1",
                "shop",
                "0",
                "0",
                "0",
                "-",
                "-",
                "1"
            ]
        );
    }

    #[tokio::test]
    async fn every_acquire_takes_the_arguments_the_batch_script_steps_by() {
        let limiter = Limiter::new("redis://127.0.0.1:1", "t", Duration::from_secs(1)).unwrap();
        let (name, app) = (
            PolicyName::parse("p").unwrap(),
            AppSlug::parse("shop").unwrap(),
        );
        for algorithm in Algorithm::ALL {
            let with_id = usize::from(matches!(
                algorithm,
                Algorithm::SlidingLog | Algorithm::Concurrency
            ));
            let global = AcquireCall::global(&limiter, &name, algorithm, 1, &app, None);
            let global_args = match algorithm {
                Algorithm::TokenBucket => TOKEN_BUCKET_ARGS,
                _ => GLOBAL_ARGS,
            };
            assert_eq!(args_of(&global), global_args + with_id, "{algorithm:?}");
            let config = PolicyConfig {
                name: name.clone(),
                created_ms: 1,
                version: 1,
                algorithm,
                max_permits: 5,
                rate: 1.0,
                window_ms: Some(1000),
                lease_ttl_ms: Some(1000),
                apps: ",shop,".to_owned(),
                enabled: true,
                scope: Scope::PerKey,
                mode: Mode::Enforce,
            };
            let bucket = KeyedBucket {
                policy: &config,
                caller: "ann",
                limits: BucketLimits::of(&config),
            };
            let keyed = AcquireCall::keyed(&limiter, &bucket, 1, &app);
            assert_eq!(args_of(&keyed), KEYED_ARGS + with_id, "{algorithm:?}");
        }
    }
}
