//! What every acquire script shares: limits, missing policies, membership, retry times.

use redis::FromRedisValue;

use super::{
    ABOVE_MAX, Config, DENIED, GRANTED, LONG, NO_POLICY, NOT_ALLOWED, OTHER_ALGORITHM, Policy,
    Reply, Timed, UNENFORCED,
};
use crate::helpers::random_suffix;
use crate::lua::scripts::*;

#[tokio::test]
async fn every_script_grants_max_permits_then_denies_without_consuming() {
    for algo in Algo::ALL {
        let p = Policy::new(Config::of(algo, 5)).await;
        let first = p.acquire(1, "shop").await;
        assert_eq!(first[..3], [GRANTED, 4, 0], "{algo:?} first call {first:?}");
        assert_eq!(first[4..], [5, 1], "{algo:?} max_permits and version");
        // Time until nothing is used any more: a permit at 0.001/s, or the window / lease.
        let reset = first[3];
        let ok = match algo {
            TokenBucket | Gcra => (1_000_000..=1_000_001).contains(&reset),
            FixedWindow => (1..=LONG).contains(&reset),
            SlidingLog => reset == LONG,
            SlidingWindow => (LONG..=2 * LONG).contains(&reset),
            Concurrency => (LONG..=LONG + 1).contains(&reset),
        };
        assert!(ok, "{algo:?} reset_after_ms {reset}");
        for remaining in (0..4).rev() {
            let reply = p.acquire(1, "shop").await;
            assert_eq!(reply[..2], [GRANTED, remaining], "{algo:?} {reply:?}");
        }
        let before = p.snapshot().await;
        for _ in 0..10 {
            let reply = p.acquire(1, "shop").await;
            assert_eq!(reply[..2], [DENIED, 0], "{algo:?} {reply:?}");
            let retry = reply[2];
            let ok = match algo {
                TokenBucket | Gcra => (1..=1_000_001).contains(&retry),
                FixedWindow | SlidingLog => (1..=LONG).contains(&retry),
                SlidingWindow => (1..=2 * LONG).contains(&retry),
                Concurrency => (1..=LONG + 1).contains(&retry),
            };
            assert!(ok, "{algo:?} retry_after_ms {retry}");
            assert!(reply[3] >= retry, "{algo:?} reset before retry: {reply:?}");
        }
        assert_eq!(
            p.snapshot().await,
            before,
            "{algo:?}: a denial wrote nothing"
        );
    }
}

#[tokio::test]
async fn every_script_answers_no_policy_for_a_missing_key() {
    let p = Policy::new(Config::of(TokenBucket, 5)).await;
    let missing = Policy {
        key: format!("{}-missing", p.key),
        ..p.clone()
    };
    for algo in Algo::ALL {
        let reply = missing.run(algo, 1, "shop", "id").await;
        assert_eq!(reply, vec![NO_POLICY, 0, 0, 0, 0, 0], "{algo:?}");
    }
}

#[tokio::test]
async fn every_script_checks_membership_exactly_not_as_a_pattern() {
    for algo in Algo::ALL {
        let mut c = Config::of(algo, 100);
        c.apps = ",myapp,my-app,";
        let p = Policy::new(c).await;
        for app in ["app", "my", "a[", "my.app", "my%-app", ""] {
            let reply = p.acquire(1, app).await;
            assert_eq!(
                reply,
                vec![NOT_ALLOWED, 0, 0, 0, 100, 1],
                "{algo:?} app {app:?}"
            );
        }
        assert_eq!(p.acquire(1, "my-app").await[0], GRANTED, "{algo:?}");
        assert_eq!(p.acquire(1, "myapp").await[0], GRANTED, "{algo:?}");
    }
}

#[tokio::test]
async fn every_script_refuses_permits_outside_one_to_max() {
    for algo in Algo::ALL {
        let p = Policy::new(Config::of(algo, 3)).await;
        for permits in [4, 0, -2, 1000] {
            let reply = p.acquire(permits, "shop").await;
            assert_eq!(reply, vec![ABOVE_MAX, 0, 0, 0, 3, 1], "{algo:?} {permits}");
        }
        assert_eq!(p.acquire(3, "shop").await[..2], [GRANTED, 0], "{algo:?}");
    }
}

#[tokio::test]
async fn a_script_of_another_algorithm_answers_minus_4_with_the_index() {
    for policy_algo in Algo::ALL {
        let p = Policy::new(Config::of(policy_algo, 5)).await;
        for script in Algo::ALL {
            let reply = p.run(script, 1, "shop", &random_suffix()).await;
            if script == policy_algo {
                assert_eq!(reply[0], GRANTED, "{script:?} on its own policy");
            } else {
                assert_eq!(
                    reply,
                    vec![OTHER_ALGORITHM, policy_algo.index(), 0, 0, 0, 1],
                    "{script:?} on a {policy_algo:?} policy"
                );
            }
        }
    }
    // A hash written by the six-argument sync (no `algorithm` field) is a token bucket.
    let mut c = Config::of(TokenBucket, 5);
    let p = Policy::new(c.clone()).await;
    c.version = 2;
    assert_eq!(p.sync_six(&c, false).await, 1);
    assert_eq!(p.field("algorithm").await, None);
    for script in [FixedWindow, SlidingLog, SlidingWindow, Concurrency, Gcra] {
        let reply = p.run(script, 1, "shop", "id").await;
        assert_eq!(reply, vec![OTHER_ALGORITHM, 1, 0, 0, 0, 2], "{script:?}");
    }
}

#[tokio::test]
async fn a_disabled_policy_grants_unenforced_and_leaves_state_alone() {
    for algo in Algo::ALL {
        let mut c = Config::of(algo, 2);
        let p = Policy::new(c.clone()).await;
        assert_eq!(p.acquire(2, "shop").await[0], GRANTED, "{algo:?}");
        c.version = 2;
        c.enabled = false;
        assert_eq!(p.sync(&c).await.unwrap(), 1);
        let before = p.snapshot().await;
        for _ in 0..5 {
            let reply = p.acquire(1, "shop").await;
            assert_eq!(reply[..3], [UNENFORCED, 0, 0], "{algo:?} {reply:?}");
            assert_eq!(reply[4..], [2, 2], "{algo:?} {reply:?}");
        }
        assert_eq!(p.snapshot().await, before, "{algo:?}: state untouched");
        assert_eq!(p.acquire(1, "other").await[0], NOT_ALLOWED, "{algo:?}");
        c.version = 3;
        c.enabled = true;
        assert_eq!(p.sync(&c).await.unwrap(), 1);
        assert_eq!(
            p.acquire(1, "shop").await[0],
            DENIED,
            "{algo:?}: enforced again, still used up"
        );
    }
}

/// Test only: rewrites a policy's time-stamped state as Redis' clock will find it at a
/// virtual time, so that an acquire run right after this, in the same MULTI/EXEC, decides
/// as it would at that time. It takes the shift from Redis' own clock, so nothing the
/// client does (or how slowly) moves the virtual time of that acquire.
///
/// KEYS[1]  the key that holds the state
/// ARGV[1]  the virtual time, µs on Redis' clock
/// ARGV[2]  'hash': ARGV[3] the field, ARGV[4] its value as saved (a time in ms)
///          'zset': ARGV[3] the scores' unit in µs (1 or 1000), then member, score pairs
///          as saved (times in that unit)
///          'tb': ARGV[3] a token bucket's state key as saved (tokens and the time in ms,
///          two little-endian doubles, then its configuration's id)
/// Reply: Redis' time (µs) the shift was taken from.
const SHIFT_CLOCK: &str = r"
local t = redis.call('TIME')
local now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])
local ahead_us = tonumber(ARGV[1]) - now_us
if ARGV[2] == 'hash' then
  local ms = tonumber(ARGV[4]) - ahead_us / 1000
  redis.call('HSET', KEYS[1], ARGV[3], string.format('%.17g', ms))
elseif ARGV[2] == 'tb' then
  local tokens, last = struct.unpack('<d<d', ARGV[3])
  redis.call('SET', KEYS[1], struct.pack('<d<d', tokens, last - ahead_us / 1000)
    .. string.sub(ARGV[3], 17))
else
  local unit = tonumber(ARGV[3])
  for i = 4, #ARGV, 2 do
    local score = tonumber(ARGV[i + 1]) - ahead_us / unit
    redis.call('ZADD', KEYS[1], 'XX', string.format('%.17g', score), ARGV[i])
  end
end
return now_us
";

impl Policy {
    /// The state of a token bucket, GCRA, sliding log or concurrency policy as it stands,
    /// as SHIFT_CLOCK's KEYS[1] and ARGV[2..].
    async fn clock_state(&self) -> (String, Vec<Vec<u8>>) {
        let hash_field = |field: &str| {
            let field = field.to_owned();
            async move {
                let value = self.field(&field).await.expect("state written by a grant");
                let args = ["hash".to_owned(), field, value];
                (self.key.clone(), args.map(String::into_bytes).to_vec())
            }
        };
        let state_key = || async move {
            let key = self.state_key("tb");
            let raw: Vec<u8> = self.query(redis::cmd("GET").arg(&key)).await;
            assert!(raw.len() > 16, "state written by a grant");
            (key, vec![b"tb".to_vec(), raw])
        };
        let zset = |suffix: &str, unit: &str| {
            let (key, unit) = (self.state_key(suffix), unit.to_owned());
            async move {
                let pairs: Vec<(String, String)> = self
                    .query(
                        redis::cmd("ZRANGE")
                            .arg(&key)
                            .arg(0)
                            .arg(-1)
                            .arg("WITHSCORES"),
                    )
                    .await;
                let mut args = vec!["zset".to_owned(), unit];
                for (member, score) in pairs {
                    args.extend([member, score]);
                }
                (key, args.into_iter().map(String::into_bytes).collect())
            }
        };
        match self.algo {
            TokenBucket => state_key().await,
            Gcra => hash_field("tat").await,
            SlidingLog => zset("log", "1").await,
            Concurrency => zset("leases", "1000").await,
            other => panic!("{other:?} keeps its time in aligned windows"),
        }
    }

    /// One acquire of 1 permit at the virtual time `at_us`, with the state saved as
    /// `state`: the reply, and the span of virtual time in which the acquire decided (from
    /// `at_us` on, for as long as Redis' clock turned between the shift and the acquire).
    async fn acquire_at(&self, state: &(String, Vec<Vec<u8>>), at_us: i64) -> (Reply, i64, i64) {
        let mut shift = redis::cmd("EVAL");
        shift.arg(SHIFT_CLOCK).arg(1).arg(&state.0).arg(at_us);
        for arg in &state.1 {
            shift.arg(arg);
        }
        let acquire = self.acquire_cmd(self.algo, 1, "shop", &random_suffix());
        let (_, values, after_us) = self.atomically(vec![shift, acquire]).await;
        let shifted_at = i64::from_redis_value(values[0].clone()).unwrap();
        let reply = Reply::from_redis_value(values[1].clone()).unwrap();
        (reply, at_us, at_us + (after_us - shifted_at))
    }
}

/// A policy of 2 permits used up, and denied, in one MULTI/EXEC (so that nothing can come
/// back in between): the denial with the Redis time bracketing it.
async fn used_up_and_denied(p: &Policy) -> Timed {
    let grant = p.acquire_cmd(p.algo, 2, "shop", &random_suffix());
    let deny = p.acquire_cmd(p.algo, 1, "shop", &random_suffix());
    let (before_us, values, after_us) = p.atomically(vec![grant, deny]).await;
    let replies: Vec<Reply> = values
        .into_iter()
        .map(|v| Reply::from_redis_value(v).unwrap())
        .collect();
    assert_eq!(replies[0][..2], [GRANTED, 0], "{:?}: {replies:?}", p.algo);
    assert_eq!(replies[1][..2], [DENIED, 0], "{:?}: {replies:?}", p.algo);
    assert!(replies[1][2] > 0, "{:?}: {replies:?}", p.algo);
    Timed {
        before_us,
        reply: replies[1].clone(),
        after_us,
    }
}

/// A denial's retry_after_ms is the time it has to wait, checked in both directions on a
/// clock the test controls (the state's times are moved, see SHIFT_CLOCK): a call a
/// millisecond before the promised time is denied, and says the same time again; a call
/// at the promised time is granted. Permits come back only over an hour (or 1000 s), so
/// real time adds nothing the virtual clock does not account for.
#[tokio::test]
async fn retry_after_is_the_time_a_denied_request_waits() {
    for algo in [TokenBucket, Gcra, SlidingLog, Concurrency] {
        let p = Policy::new(Config::of(algo, 2)).await;
        let denied = used_up_and_denied(&p).await;
        let retry_us = denied.reply[2] * 1000;
        let state = p.clock_state().await;
        // The promise is denied.before + retry_after, give or take the rounding up of
        // retry_after (under 1 ms) and the width of the denial's bracket.
        let surely_before = denied.before_us + retry_us - 1000;
        let promised_by = denied.after_us + retry_us;

        // A millisecond before the promise (2 before its latest reading). Only an acquire
        // that Redis ran within 1 ms of the shift is sure to land before it; Redis paused in
        // between (a loaded machine): the same again.
        let mut checked = false;
        for _ in 0..100 {
            let (reply, from_us, to_us) = p.acquire_at(&state, surely_before - 1000).await;
            if to_us > surely_before {
                continue;
            }
            assert_eq!(reply[0], DENIED, "{algo:?} before the promise: {reply:?}");
            // The same promise, from a later moment.
            let promise_then = from_us + reply[2] * 1000;
            let slack = 1000 + (to_us - from_us) + (denied.after_us - denied.before_us);
            assert!(
                (promise_then - (denied.before_us + retry_us)).abs() <= slack,
                "{algo:?}: the promise moved by {} µs",
                promise_then - (denied.before_us + retry_us)
            );
            checked = true;
            break;
        }
        assert!(
            checked,
            "{algo:?}: Redis never ran two commands within 1 ms"
        );

        // At the promised time: granted.
        let (reply, _, _) = p.acquire_at(&state, promised_by).await;
        assert_eq!(reply[0], GRANTED, "{algo:?} at the promise: {reply:?}");
    }
}

/// The windowed algorithms keep their time in windows aligned on Redis' clock, which a
/// test cannot move; so their retry_after_ms is checked against that clock as Redis read
/// it around the denial, and the window's end is made by moving the state back one window
/// (windows of an hour: the calls here fall in one window).
#[tokio::test]
async fn retry_after_of_an_aligned_window_is_read_on_redis_clock() {
    const W_US: i64 = LONG * 1000;
    // Fixed window: the wait is the time to the window's end, and after it a new window
    // grants.
    let p = Policy::new(Config::of(FixedWindow, 2)).await;
    let denied = used_up_and_denied(&p).await;
    let fw = p.state_key("fw");
    let start: i64 = p.query(redis::cmd("HGET").arg(&fw).arg("start")).await;
    let end_us = start * 1000 + W_US;
    let retry_us = denied.reply[2] * 1000;
    assert!(
        retry_us >= end_us - denied.after_us && retry_us - 1000 < end_us - denied.before_us,
        "fixed window: retry_after_ms {} for a window ending {} µs after the call",
        denied.reply[2],
        end_us - denied.before_us
    );
    p.query::<i64>(redis::cmd("HSET").arg(&fw).arg("start").arg(start - LONG))
        .await;
    assert_eq!(
        p.acquire(1, "shop").await[..2],
        [GRANTED, 1],
        "the next window"
    );

    // Sliding window: 2 granted in this window and none in the one before. The estimate
    // leaves room for 1 once the next window is half over (2 * (1 - e / W) + 1 <= 2): the
    // wait is W - e + W / 2, from the elapsed time e Redis read.
    let p = Policy::new(Config::of(SlidingWindow, 2)).await;
    let denied = used_up_and_denied(&p).await;
    let (start, curr, prev): (i64, i64, i64) = p
        .query(
            redis::cmd("HMGET")
                .arg(&p.key)
                .arg("sw_start")
                .arg("sw_curr")
                .arg("sw_prev"),
        )
        .await;
    assert_eq!((curr, prev), (2, 0));
    let promise_us = start * 1000 + W_US + W_US / 2;
    let retry_us = denied.reply[2] * 1000;
    assert!(
        retry_us >= promise_us - denied.after_us && retry_us - 1000 < promise_us - denied.before_us,
        "sliding window: retry_after_ms {} for room {} µs after the call",
        denied.reply[2],
        promise_us - denied.before_us
    );
    // One window later (this window's grants now the previous window's), the promise is
    // the same moment: denied before it, saying so; granted after it.
    let one_window_on = |windows: i64| {
        let p = p.clone();
        async move {
            let set = redis::cmd("HSET")
                .arg(&p.key)
                .arg("sw_start")
                .arg(start - windows * LONG)
                .arg("sw_curr")
                .arg(2)
                .arg("sw_prev")
                .arg(0)
                .clone();
            let acquire = p.acquire_cmd(SlidingWindow, 1, "shop", "");
            let (before, values, after) = p.atomically(vec![set, acquire]).await;
            let reply = Reply::from_redis_value(values[1].clone()).unwrap();
            (reply, before + windows * W_US, after + windows * W_US)
        }
    };
    let (reply, from_us, to_us) = one_window_on(1).await;
    if to_us <= promise_us - 1000 {
        assert_eq!(reply[0], DENIED, "before the promise: {reply:?}");
        let promise_then = reply[2] * 1000;
        assert!(
            promise_then >= promise_us - to_us && promise_then - 1000 < promise_us - from_us,
            "the promise moved: {reply:?}"
        );
    } else if from_us >= promise_us {
        assert_eq!(reply[0], GRANTED, "after the promise: {reply:?}");
    }
    let (reply, _, _) = one_window_on(2).await;
    assert_eq!(
        reply[..2],
        [GRANTED, 1],
        "two windows on, both are forgotten"
    );
}
