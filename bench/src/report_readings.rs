//! The report's one-off readings: the policy set-up, Redis' memory, the keyed buckets, the
//! top callers, the server's memory, Redis' time in the scripts and the sample replies.

use std::fmt::Write;

use crate::figures::Scenario;
use crate::figures::fmt;
use crate::knobs::{FEW_KEYS, Knobs};
use crate::readings::mb;
use crate::results::Results;
use crate::server::PREFIX;

fn count<T: ToString>(value: Option<T>) -> String {
    value.map_or_else(|| "n/a".to_owned(), |v| v.to_string())
}

fn indented(o: &mut String, text: &str, by: &str) {
    for line in text.lines() {
        let _ = writeln!(o, "{by}{line}");
    }
}

pub fn append(o: &mut String, r: &Results, k: &Knobs) {
    let d = &r.readings;
    let _ = writeln!(o, "\npolicy set-up:");
    if let Some(c) = &d.creation {
        let _ = writeln!(
            o,
            "  {} policies created over HTTP in {:.1} s ({:.0}/s, {} in parallel)",
            k.policies,
            c.seconds,
            k.policies as f64 / c.seconds,
            k.create_parallel
        );
        if c.first_failures > 0 {
            let _ = writeln!(
                o,
                "  {} failed at first ({}) and were retried one at a time",
                c.first_failures, c.first_failure_codes
            );
        }
    }
    let _ = writeln!(
        o,
        "  {} policy keys in Redis {:.1} s after the first POST; DBSIZE {}",
        d.policies_in_redis,
        d.synced_s,
        count(d.dbsize)
    );

    let _ = writeln!(o, "\nRedis memory per policy (target <= 200 bytes):");
    let _ = writeln!(
        o,
        "  used_memory: {} before the {} policies, {} after",
        count(d.mem_before),
        k.policies,
        count(d.mem_after)
    );
    let _ = writeln!(
        o,
        "  -> {} bytes per policy (config only)",
        fmt(d.per_policy(d.mem_after, k.policies), 0)
    );
    let _ = writeln!(
        o,
        "  -> {} bytes per policy after scenario b, with bucket state ({}; includes client buffers)",
        fmt(d.per_policy(d.mem_after_load, k.policies), 0),
        count(d.mem_after_load)
    );
    let _ = writeln!(
        o,
        "  MEMORY USAGE {PREFIX}:{{p1}}: {} (config only), {} (after scenario b)",
        count(d.mem_key_config),
        count(d.mem_key_state)
    );

    let walks = r.walks.get(&Scenario::Keyed);
    let _ = writeln!(
        o,
        "\nKeyed buckets (target: MEMORY USAGE <= 120 bytes each):"
    );
    let _ = writeln!(
        o,
        "  {} buckets in Redis after round 1's scenario f, which handed out {} keys",
        d.keyed_buckets,
        count(walks.and_then(|w| w.walked.first().copied().flatten()))
    );
    let _ = writeln!(
        o,
        "    walking its {} in order (the probes of users and few add 2)",
        k.keys
    );
    let _ = writeln!(
        o,
        "  distinct keys seen by f in all rounds: {} of {} ({} handed out by wrk, {} answered)",
        count(walks.and_then(|w| w.seen())),
        k.keys,
        count(walks.and_then(|w| w.handed_out())),
        count(r.scenarios.get(&Scenario::Keyed).and_then(|s| s.requests))
    );
    let (mean, sample) = d.keyed_mean.map_or((None, 0), |(m, n)| (Some(m), n));
    let _ = writeln!(
        o,
        "  MEMORY USAGE, mean of {sample} buckets: {} bytes",
        fmt(mean, 0)
    );
    let _ = writeln!(
        o,
        "  used_memory grew by {} bytes per bucket during f (with Redis's key table; includes client buffers)",
        fmt(d.keyed_growth_per_bucket(), 0)
    );

    let _ = writeln!(o, "\nTop callers (memory must not grow with the keys):");
    for (what, keys, t) in [("users", k.keys, d.top_users), ("few", FEW_KEYS, d.top_few)] {
        let _ = writeln!(
            o,
            "  Redis, per_key over {keys} keys ({what}): {} sets, at most {} callers each, {} bytes in all",
            t.sets, t.largest, t.bytes
        );
    }
    let _ = writeln!(
        o,
        "  GET /api/v1/policies/users/top?minutes=5: {}",
        d.top_users_api
    );
    let _ = writeln!(
        o,
        "  the tallies: one worker's sketch, then many policies (examples/top_keys_memory.rs):"
    );
    indented(o, &d.sketch_table, "    ");

    let _ = writeln!(
        o,
        "\nServer memory (ratekeeper's VmRSS, resident now, and VmHWM, the peak so far; MB of 10^6 bytes):"
    );
    let _ = writeln!(o, "  {:<58} {:>8} {:>8}", "point", "RSS MB", "peak MB");
    for (point, rss, hwm) in &d.server_memory {
        let _ = writeln!(
            o,
            "  {point:<58} {:>8} {:>8}",
            fmt(mb(*rss), 1),
            fmt(mb(*hwm), 1)
        );
    }

    let _ = writeln!(
        o,
        "\nRedis' time in the acquire scripts (INFO commandstats, lowest of 5 rounds; 'in commands'"
    );
    let _ = writeln!(
        o,
        "is the part of each acquire spent in the commands the scripts ran):"
    );
    indented(o, &d.cost_table, "  ");

    let _ = writeln!(o, "\nsample replies:");
    let _ = writeln!(o, "  granted: 200 {}", d.sample_granted);
    let _ = writeln!(
        o,
        "  denied:  {:03} {}",
        d.sample_denied.0, d.sample_denied.1
    );
}
