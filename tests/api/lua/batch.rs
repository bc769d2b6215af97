//! Batched acquires (crates/limiter/src/decide/batch.rs, lua/acquire_batch.lua): acquires that wait
//! together go as one call, whatever their policies, algorithms, scopes and permits, and
//! each gets the answer the single script would have given it in the same order: the same
//! decision and remaining permits, the same times up to the milliseconds that passed
//! between the calls. Identical acquires of a bucket go as one entry and are still
//! answered one by one; on a Redis Cluster a batch is one call per slot.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use futures_util::future::join_all;
use prometheus::IntCounter;
use ratekeeper::domain::{
    Algorithm, AppSlug, FailureMode, MaxPermits, Millis, Mode, Permits, PolicyName, PolicySpec,
    Rate, Scope,
};
use ratekeeper_limiter::{
    AcquireOutcome, Batcher, BucketLimits, Decided, KeySpace, KeyedBucket, Limiter, PolicyConfig,
};
use redis::cluster_routing::Slot;

use crate::helpers::{LocalCluster, redis_url, test_prefix};

fn slug(s: &str) -> AppSlug {
    AppSlug::parse(s).unwrap()
}

/// A policy of shop's, open to shop only. Its rate or window is slow enough (a permit per
/// 1,000 s, an hour) that nothing refills while the test runs.
fn policy(name: &str, algorithm: Algorithm, max_permits: i64) -> PolicySpec {
    let hour = || Millis::parse_field("window_ms", 3_600_000).unwrap();
    PolicySpec {
        name: PolicyName::parse(name).unwrap(),
        owner_app: slug("shop"),
        algorithm,
        rate: matches!(algorithm, Algorithm::TokenBucket | Algorithm::Gcra)
            .then(|| Rate::parse_field("rate", 0.001).unwrap()),
        max_permits: MaxPermits::parse_field("max_permits", max_permits).unwrap(),
        window_ms: matches!(
            algorithm,
            Algorithm::FixedWindow | Algorithm::SlidingLog | Algorithm::SlidingWindow
        )
        .then(hour),
        lease_ttl_ms: (algorithm == Algorithm::Concurrency).then(hour),
        allowed_apps: vec![slug("shop")],
        failure_mode: FailureMode::Closed,
        enabled: true,
        mode: Mode::Enforce,
        description: String::new(),
        scope: Scope::Global,
        overrides: Vec::new(),
        descriptors: Vec::new(),
        units: Default::default(),
    }
}

/// A policy of each algorithm, global and per_key.
fn every_algorithm() -> Vec<PolicySpec> {
    let mut specs = Vec::new();
    for (name, algorithm) in [
        ("fw", Algorithm::FixedWindow),
        ("log", Algorithm::SlidingLog),
        ("sw", Algorithm::SlidingWindow),
        ("lease", Algorithm::Concurrency),
        ("gcra", Algorithm::Gcra),
    ] {
        specs.push(policy(name, algorithm, 2));
        let mut keyed = policy(&format!("{name}.key"), algorithm, 2);
        keyed.scope = Scope::PerKey;
        specs.push(keyed);
    }
    let mut disabled = policy("fw.off", Algorithm::FixedWindow, 1);
    disabled.enabled = false;
    let mut shadow = policy("gcra.shadow", Algorithm::Gcra, 1);
    shadow.mode = Mode::Shadow;
    specs.extend([disabled, shadow]);
    specs
}

/// The policies both limiters hold: plain, disabled, shadow, another app's, of every
/// algorithm, global and keyed.
fn policies() -> Vec<PolicyConfig> {
    let mut disabled = policy("disabled", Algorithm::TokenBucket, 3);
    disabled.enabled = false;
    let mut shadow = policy("shadow", Algorithm::TokenBucket, 2);
    shadow.mode = Mode::Shadow;
    let mut theirs = policy("theirs", Algorithm::TokenBucket, 5);
    theirs.allowed_apps = vec![slug("other")];
    let mut per_key = policy("per.key", Algorithm::TokenBucket, 3);
    per_key.scope = Scope::PerKey;
    let mut per_key_shadow = policy("per.key.shadow", Algorithm::TokenBucket, 1);
    per_key_shadow.scope = Scope::PerKey;
    per_key_shadow.mode = Mode::Shadow;
    [
        per_key,
        per_key_shadow,
        policy("hot", Algorithm::TokenBucket, 5),
        policy("cold", Algorithm::TokenBucket, 2),
        disabled,
        shadow,
        theirs,
        policy("windowed", Algorithm::FixedWindow, 2),
    ]
    .into_iter()
    .chain(every_algorithm())
    .collect::<Vec<_>>()
    .iter()
    .map(|spec| PolicyConfig::new(spec, 1, 1))
    .collect()
}

/// The acquires, in arrival order: (policy, permits, app), and a caller's key for the
/// keyed policies. A policy is asked for with the algorithm the limiter's config says,
/// except "?name": as a token bucket, as an instance that has not heard of the policy yet
/// asks (Redis answers with its algorithm, and its own script decides it, after the
/// batch).
const REQUESTS: [Request; 60] = [
    ("per.key:ann", 1, "shop"),
    ("per.key:ann", 2, "shop"),
    ("per.key:bob", 4, "shop"), // above max_permits
    ("per.key.shadow:ann", 1, "shop"),
    ("per.key:ann", 1, "shop"),        // denied: 0 left
    ("per.key.shadow:ann", 1, "shop"), // would deny
    ("per.key:bob", 3, "shop"),
    ("per.key:bob", 1, "shop"), // denied
    ("per.key:cat", 1, "shop"),
    ("hot", 1, "shop"),
    ("cold", 1, "shop"),
    ("hot", 2, "shop"),
    ("shadow", 1, "shop"),
    ("hot", 9, "shop"), // above max_permits
    ("disabled", 3, "shop"),
    ("shadow", 2, "shop"), // would deny: 1 left
    ("theirs", 1, "shop"), // shop not allowed
    ("hot", 2, "shop"),
    ("missing", 1, "shop"), // no such policy
    ("windowed", 1, "shop"),
    ("cold", 2, "shop"),      // denied: 1 left
    ("?windowed", 1, "shop"), // asked as a token bucket
    ("hot", 1, "shop"),       // denied: 0 left
    ("shadow", 1, "shop"),
    ("fw", 1, "shop"),
    ("log", 2, "shop"),
    ("sw", 1, "shop"),
    ("lease", 1, "shop"),
    ("gcra", 1, "shop"),
    ("fw.key:ann", 2, "shop"),
    ("log.key:ann", 1, "shop"),
    ("sw.key:ann", 3, "shop"), // above max_permits
    ("lease.key:ann", 2, "shop"),
    ("gcra.key:ann", 1, "shop"),
    ("fw", 2, "shop"),  // denied: 1 left
    ("log", 1, "shop"), // denied
    ("sw", 1, "shop"),
    ("lease", 1, "shop"),
    ("gcra", 1, "shop"),
    ("fw", 1, "theirs"),       // not allowed
    ("gcra", 3, "shop"),       // above max_permits
    ("fw.key:ann", 1, "shop"), // denied
    ("log.key:ann", 1, "shop"),
    ("log.key:ann", 1, "shop"), // denied
    ("sw.key:ann", 2, "shop"),
    ("sw.key:ann", 1, "shop"),    // denied
    ("lease.key:ann", 1, "shop"), // denied
    ("lease.key:bob", 1, "shop"),
    ("gcra.key:ann", 2, "shop"), // denied: 1 left
    ("gcra.key:ann", 1, "shop"),
    ("sw", 1, "shop"),     // denied
    ("lease", 1, "shop"),  // denied
    ("gcra", 1, "shop"),   // denied
    ("fw.off", 1, "shop"), // unenforced
    ("fw.off", 1, "shop"),
    ("gcra.shadow", 1, "shop"),
    ("gcra.shadow", 1, "shop"), // would deny
    ("?gcra", 1, "shop"),       // asked as a token bucket: denied by GCRA
    ("windowed", 1, "shop"),
    ("windowed", 1, "shop"), // denied
];

/// The policy a request names, and the algorithm it is asked for with.
fn asked(configs: &[PolicyConfig], name: &str) -> (PolicyName, Algorithm) {
    let (name, stale) = match name.strip_prefix('?') {
        Some(name) => (name, true),
        None => (name, false),
    };
    let name = name.split(':').next().unwrap();
    let algorithm = match configs.iter().find(|c| c.name.as_str() == name) {
        Some(config) if !stale => config.algorithm,
        _ => Algorithm::TokenBucket,
    };
    (PolicyName::parse(name).unwrap(), algorithm)
}

/// "policy:caller" names a keyed policy's caller: its config and the caller.
fn keyed<'a>(configs: &'a [PolicyConfig], name: &'a str) -> Option<(&'a PolicyConfig, &'a str)> {
    let (policy, caller) = name.split_once(':')?;
    Some((configs.iter().find(|c| c.name.as_str() == policy)?, caller))
}

fn bucket_of<'a>(config: &'a PolicyConfig, caller: &'a str) -> KeyedBucket<'a> {
    KeyedBucket {
        policy: config,
        caller,
        limits: BucketLimits::of(config),
    }
}

async fn limiter_with_policies(url: &str, calls: &IntCounter) -> (Limiter, String) {
    let prefix = test_prefix("batch");
    let limiter = Limiter::new(url, &prefix, Duration::from_secs(5))
        .unwrap()
        .counting_into(calls.clone());
    for config in policies() {
        assert!(limiter.push_policy(&config).await.unwrap());
    }
    (limiter, prefix)
}

/// The outcome's exact part, and its two times. Times run on between the calls: a bucket
/// refills (at 0.001/s a millisecond is a millisecond of waiting) and a fixed window's end
/// comes nearer, so the two runs' times may differ by at most the time from the first
/// single call to the batch's last answer (milliseconds, or hundreds of them on a loaded
/// machine), while a wrong decision is off by a whole permit: 1,000 s.
fn comparable(outcome: &AcquireOutcome) -> (String, i64, i64) {
    match *outcome {
        AcquireOutcome::Decided(Decided {
            decision,
            remaining,
            retry_after_ms,
            reset_after_ms,
            limit,
            version,
            lease,
            algorithm,
        }) => (
            format!(
                "{decision:?} remaining {remaining} limit {limit} v{version} lease {} \
                 {algorithm:?}",
                lease.is_some()
            ),
            retry_after_ms,
            reset_after_ms,
        ),
        ref other => (format!("{other:?}"), 0, 0),
    }
}

/// A request: (policy, permits, app), see [`REQUESTS`].
type Request = (&'static str, i64, &'static str);

/// Whether a request is asked for with another algorithm than its policy's.
fn is_stale(request: &Request) -> bool {
    request.0.starts_with('?')
}

/// Where a batch ran: its calls, the keys each request decided on (by which its call was
/// chosen on a cluster), and the prefix of the batch's and of the single scripts' keys.
struct BatchRun {
    calls: u64,
    keys: Vec<String>,
    prefixes: [String; 2],
}

/// Decides `requests` one by one with the single scripts on one limiter, and all together
/// through a batcher on another (both on the Redis at `url`), and asserts each request got
/// the same answer both ways.
async fn batch_against_single(url: &str, rounds: &[&[Request]]) -> BatchRun {
    let requests: Vec<Request> = rounds.concat();
    let single_calls = IntCounter::new("single", "calls").unwrap();
    let (single, single_prefix) = limiter_with_policies(url, &single_calls).await;
    let configs = policies();
    // The order the batch decides them in, round by round: a request asked for with another
    // algorithm than its policy's is answered so by the batch, and decided by its own
    // script right after it (without batching too, the requests that came between its two
    // calls went first). So the single scripts take those last in their round.
    let mut order: Vec<usize> = Vec::with_capacity(requests.len());
    let mut first = 0;
    for round in rounds {
        let (fresh, stale): (Vec<usize>, Vec<usize>) =
            (first..first + round.len()).partition(|&i| !is_stale(&requests[i]));
        order.extend(fresh.into_iter().chain(stale));
        first += round.len();
    }
    let mut expected = vec![(String::new(), 0, 0); requests.len()];
    let started = Instant::now();
    for &i in &order {
        let (name, permits, app) = requests[i];
        let permits = Permits::parse(permits).unwrap();
        let outcome = match keyed(&configs, name) {
            Some((config, caller)) => {
                let bucket = bucket_of(config, caller);
                single
                    .acquire_keyed_unbatched(&bucket, permits, &slug(app))
                    .await
            }
            None => {
                let (name, algorithm) = asked(&configs, name);
                (single.acquire_unbatched(&name, algorithm, permits, &slug(app))).await
            }
        };
        expected[i] = comparable(&outcome.unwrap());
    }

    let batch_calls = IntCounter::new("batch", "calls").unwrap();
    let (batched, batch_prefix) = limiter_with_policies(url, &batch_calls).await;
    let pushes = batch_calls.get();
    let key_space = KeySpace::new(&batch_prefix);
    let names: Vec<(PolicyName, Algorithm)> = requests
        .iter()
        .map(|(name, ..)| asked(&configs, name))
        .collect();
    let apps: Vec<AppSlug> = requests.iter().map(|(.., app)| slug(app)).collect();
    // The batch passes a global token bucket's configuration, as the server does from its
    // snapshot; the single scripts above passed none (the hash decided): the same answers.
    let passed: Vec<Option<&PolicyConfig>> = names
        .iter()
        .map(|(name, _)| configs.iter().find(|c| &c.name == name))
        .collect();
    let buckets: Vec<Option<KeyedBucket<'_>>> = requests
        .iter()
        .map(|(name, ..)| keyed(&configs, name).map(|(config, caller)| bucket_of(config, caller)))
        .collect();
    let keys = (names.iter().zip(&buckets))
        .map(|((name, _), bucket)| match bucket {
            Some(bucket) => batched.keyed_key(bucket),
            None => key_space.policy(name),
        })
        .collect();
    let batcher = Batcher::new(batched);
    // On this one-thread runtime every acquire of a round is queued before the batcher's
    // task first runs: they all wait together, as acquires do while a call is in flight.
    let mut outcomes = Vec::with_capacity(requests.len());
    let mut first = 0;
    for round in rounds {
        let decided = join_all((first..first + round.len()).map(|i| {
            let permits = Permits::parse(requests[i].1).unwrap();
            let (batcher, name, app, bucket) = (&batcher, &names[i], &apps[i], &buckets[i]);
            let config = passed[i];
            async move {
                match bucket {
                    Some(bucket) => batcher.acquire_keyed(bucket, permits, app).await,
                    None => batcher.acquire(&name.0, name.1, permits, app, config).await,
                }
            }
        }))
        .await;
        outcomes.extend(decided);
        first += round.len();
    }
    // Rounded up, and one more for the whole milliseconds the scripts' replies carry.
    let span_ms = started.elapsed().as_millis() as u64 + 2;
    let got: Vec<(String, i64, i64)> = outcomes
        .iter()
        .map(|o| comparable(o.as_ref().unwrap()))
        .collect();
    for (i, (want, got)) in expected.iter().zip(&got).enumerate() {
        assert_eq!(want.0, got.0, "request {i}: {:?}", requests[i]);
        for (what, want, got) in [("retry", want.1, got.1), ("reset", want.2, got.2)] {
            assert!(
                want.abs_diff(got) <= span_ms,
                "request {i} {:?}: {what} after {got} ms, the single script said {want} ms \
                 (both runs took {span_ms} ms)",
                requests[i]
            );
        }
    }
    BatchRun {
        calls: batch_calls.get() - pushes,
        keys,
        prefixes: [single_prefix, batch_prefix],
    }
}

/// The calls one batch of `requests` takes on a single node: one for the batch, and one
/// more when some acquires were asked for with another algorithm than the policy's (the
/// batch answers them with the policy's, and they go again, together, in the next call).
fn single_node_calls(requests: &[Request]) -> u64 {
    1 + u64::from(requests.iter().any(is_stale))
}

#[tokio::test]
async fn a_batch_answers_each_acquire_as_the_single_script_in_that_order() {
    let run = batch_against_single(&redis_url(), &[&REQUESTS]).await;
    assert_eq!(run.calls, single_node_calls(&REQUESTS));
    for prefix in &run.prefixes {
        delete_keys(prefix).await;
    }
}

/// Runs of identical acquires on one bucket, some with other buckets' acquires between
/// them: each run goes as one entry of the batch, decided acquire by acquire, through the
/// bucket's capacity and past it.
const RUNS: [Request; 40] = [
    ("hot", 1, "shop"),
    ("hot", 1, "shop"),
    ("hot", 1, "shop"),
    ("per.key:ann", 1, "shop"),
    ("hot", 1, "shop"), // the same run: nothing else on hot came between
    ("hot", 1, "shop"),
    ("hot", 1, "shop"), // the last of 5
    ("hot", 1, "shop"), // denied
    ("per.key:ann", 1, "shop"),
    ("per.key:ann", 1, "shop"),
    ("per.key:ann", 1, "shop"), // denied
    ("hot", 2, "shop"),         // denied, a new entry
    ("hot", 1, "shop"),         // denied, a new entry again
    ("shadow", 1, "shop"),
    ("shadow", 1, "shop"),
    ("shadow", 1, "shop"), // would deny
    ("disabled", 1, "shop"),
    ("disabled", 1, "shop"),
    ("cold", 1, "other"), // not allowed
    ("cold", 1, "other"),
    ("cold", 1, "shop"),
    ("cold", 1, "shop"),
    ("cold", 1, "shop"), // denied
    ("?windowed", 1, "shop"),
    ("?windowed", 1, "shop"),
    ("windowed", 1, "shop"),
    ("fw", 1, "shop"),
    ("fw", 1, "shop"),
    ("fw", 1, "shop"), // denied
    ("gcra.key:ann", 1, "shop"),
    ("gcra.key:ann", 1, "shop"),
    ("gcra.key:ann", 1, "shop"), // denied
    ("per.key.shadow:bob", 1, "shop"),
    ("per.key.shadow:bob", 1, "shop"), // would deny
    ("sw.key:ann", 1, "shop"),
    ("sw.key:ann", 1, "shop"),
    ("sw.key:ann", 1, "shop"), // denied
    ("missing", 1, "shop"),
    ("missing", 1, "shop"),
    ("hot", 1, "shop"),
];

#[tokio::test]
async fn identical_acquires_of_a_bucket_are_answered_one_by_one() {
    let run = batch_against_single(&redis_url(), &[&RUNS]).await;
    assert_eq!(run.calls, single_node_calls(&RUNS));
    for prefix in &run.prefixes {
        delete_keys(prefix).await;
    }
}

/// Three batches over the same token buckets, each bucket in one entry or several: each
/// batch must find every bucket where the one before left it. The first batch makes the
/// buckets' state keys (a bucket's first acquire reads its hash), so that the second
/// decides each on its state key alone, and the third sees what the second wrote.
const FIRST_ROUND: [Request; 5] = [
    ("hot", 1, "shop"),
    ("cold", 1, "shop"),
    ("per.key:ann", 1, "shop"),
    ("per.key:bob", 1, "shop"),
    ("shadow", 1, "shop"),
];
const SECOND_ROUND: [Request; 7] = [
    ("hot", 2, "shop"),         // 2 left
    ("per.key:ann", 1, "shop"), // 1 left
    ("gcra", 1, "shop"),        // another algorithm between two entries of hot
    ("hot", 1, "shop"),         // another entry of hot: 1 left
    ("cold", 1, "shop"),        // 0 left
    ("shadow", 2, "shop"),      // would deny: 1 left
    ("per.key:bob", 2, "shop"), // 0 left
];
const THIRD_ROUND: [Request; 7] = [
    ("hot", 1, "shop"),  // 0 left
    ("cold", 1, "shop"), // denied
    ("hot", 1, "shop"),  // denied
    ("per.key:ann", 1, "shop"),
    ("per.key:bob", 1, "shop"), // denied
    ("shadow", 1, "shop"),
    ("gcra", 1, "shop"),
];

#[tokio::test]
async fn the_next_batch_finds_each_bucket_where_a_batch_left_it() {
    let rounds: [&[Request]; 3] = [&FIRST_ROUND, &SECOND_ROUND, &THIRD_ROUND];
    let run = batch_against_single(&redis_url(), &rounds).await;
    assert_eq!(run.calls, 3, "a call per batch");
    for prefix in &run.prefixes {
        delete_keys(prefix).await;
    }
}

/// On a Redis Cluster a script may only touch the keys of one slot: a batch is one call
/// per slot its acquires' keys are in (a policy's hash tag is its name; each caller's
/// bucket of a keyed policy has a tag of its own), each answering as the single script.
#[tokio::test]
async fn on_a_cluster_a_batch_is_one_call_per_slot() {
    let cluster = LocalCluster::start().await;
    for requests in [&REQUESTS[..], &RUNS[..]] {
        let run = batch_against_single(&cluster.url(), &[requests]).await;
        let slots: HashSet<Slot> = run.keys.iter().map(Slot::for_key).collect();
        // The acquires asked for with another algorithm go again: a call per slot of theirs.
        let stale: HashSet<Slot> = (requests.iter().zip(&run.keys))
            .filter(|(request, _)| is_stale(request))
            .map(|(_, key)| Slot::for_key(key))
            .collect();
        assert!(slots.len() > 1, "the requests span slots: {slots:?}");
        assert_eq!(run.calls, (slots.len() + stale.len()) as u64);
    }
}

/// Every key under `prefix`.
async fn delete_keys(prefix: &str) {
    let client = redis::Client::open(redis_url()).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg(format!("{prefix}:*"))
        .query_async(&mut conn)
        .await
        .unwrap();
    if !keys.is_empty() {
        let _: () = redis::cmd("DEL")
            .arg(keys)
            .query_async(&mut conn)
            .await
            .unwrap();
    }
}

/// Before it forms a batch, the batcher lets its worker read what is already at its
/// sockets: an acquire whose request the worker reads in that poll goes in the same call
/// as the one that woke the batcher, not in a call after it. Here the second acquire waits
/// for a byte that is written only after the first acquire is queued, so it can be read
/// only at the runtime's next poll of its sockets, after the batcher has been woken.
#[tokio::test]
async fn a_batch_takes_the_acquires_its_worker_reads_before_it_forms() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let calls = IntCounter::new("read_first_calls", "calls").unwrap();
    let (limiter, prefix) = limiter_with_policies(&redis_url(), &calls).await;
    let configs = policies();
    let hot = configs.iter().find(|c| c.name.as_str() == "hot").unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let mut client = tokio::net::TcpStream::connect(listener.local_addr().unwrap())
        .await
        .unwrap();
    let (mut server, _) = listener.accept().await.unwrap();
    let batcher = Batcher::new(limiter);
    let (app, one) = (slug("shop"), Permits::parse(1).unwrap());
    let acquire = || batcher.acquire(&hot.name, Algorithm::TokenBucket, one, &app, Some(hot));
    let before = calls.get();
    let (first, second, ()) = tokio::join!(
        acquire(),
        async {
            let mut byte = [0u8; 1];
            server.read_exact(&mut byte).await.unwrap();
            acquire().await
        },
        async { client.write_all(b"x").await.unwrap() },
    );
    assert!(first.is_ok() && second.is_ok(), "{first:?} {second:?}");
    assert_eq!(calls.get() - before, 1, "both acquires in one call");
    delete_keys(&prefix).await;
}
