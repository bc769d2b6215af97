//! The report as text: the scenarios' medians, each round's req/s, the CPU time per
//! request, what each batching target leaves, every target against what was measured, and
//! the one-off readings.

use std::fmt::Write;

use crate::budget::{Leeway, Source, TARGETS};
use crate::figures::{Scenario, fmt, ratio};
use crate::knobs::{FEW_KEYS, Knobs};
use crate::results::Results;

fn count(value: Option<u64>) -> String {
    value.map_or_else(|| "n/a".to_owned(), |v| v.to_string())
}

pub fn text(r: &Results, k: &Knobs) -> String {
    let mut o = String::new();
    let s = |scenario: Scenario| r.scenarios.get(&scenario).cloned().unwrap_or_default();
    let _ = writeln!(o, "ratekeeper acquire benchmark");
    let _ = writeln!(o, "date:        {}", r.date);
    let _ = writeln!(o, "git:         {}", r.git);
    let _ = writeln!(
        o,
        "machine:     {}, load average before load: {}",
        r.machine, r.readings.load_average
    );
    let _ = writeln!(o, "tools:       {}", r.tools);
    let _ = writeln!(
        o,
        "settings:    wrk -t{} -c{} -d{} --latency, {} round(s) (warm-up {}); redis-benchmark -c{} -n{}, e) once, l) once per round\n",
        k.threads, k.connections, k.duration, k.rounds, k.warmup, k.connections, k.redis_requests
    );
    let _ = writeln!(
        o,
        "medians of {} round(s) (req/s, p50 and p99 each the median of its own column);",
        k.rounds
    );
    let _ = writeln!(
        o,
        "non-2xx, requests and socket errors of all rounds together; e) is one run, l) the median of a run per round"
    );
    let _ = writeln!(
        o,
        "{:<32} {:>10} {:>9} {:>9} {:>9} {:>10} {:>8}",
        "scenario", "req/s", "p50 ms", "p99 ms", "non-2xx", "requests", "sockerr"
    );
    for scenario in Scenario::ALL {
        let x = s(scenario);
        let dash = |v: Option<u64>| {
            if scenario.is_redis_benchmark() {
                "-".to_owned()
            } else {
                count(v)
            }
        };
        let _ = writeln!(
            o,
            "{:<32} {:>10} {:>9} {:>9} {:>9} {:>10} {:>8}",
            scenario.label(k),
            fmt(x.rps, 0),
            fmt(x.p50_ms, 3),
            fmt(x.p99_ms, 3),
            dash(x.non_2xx),
            if scenario.is_redis_benchmark() {
                k.redis_requests.to_string()
            } else {
                count(x.requests)
            },
            dash(x.socket_errors)
        );
    }
    let _ = writeln!(o, "\nreq/s of each round, in order:");
    for scenario in Scenario::IN_ROUNDS {
        let rounds: String = s(scenario)
            .rounds_rps
            .iter()
            .map(|v| format!(" {:>9}", fmt(*v, 0)))
            .collect();
        let _ = writeln!(o, "  {:<30}{rounds}", scenario.label(k));
    }
    let _ = writeln!(
        o,
        "\nCPU time per request, us (user + system from /proc/<pid>/stat over each run, median"
    );
    let _ = writeln!(
        o,
        "of the rounds): the process that served it (ratekeeper; bare_acquire for h, i, m), Redis,"
    );
    let _ = writeln!(
        o,
        "and the whole machine (/proc/stat: wrk and everything else included); 'cores busy' is the"
    );
    let _ = writeln!(o, "machine's time per request times the median req/s");
    let _ = writeln!(
        o,
        "  {:<30} {:>8} {:>8} {:>8} {:>11}",
        "", "server", "redis", "machine", "cores busy"
    );
    for scenario in Scenario::IN_ROUNDS {
        let x = s(scenario);
        let _ = writeln!(
            o,
            "  {:<30} {:>8} {:>8} {:>8} {:>11}",
            scenario.label(k),
            fmt(x.cpu_server, 1),
            fmt(x.cpu_redis, 1),
            fmt(x.cpu_machine, 1),
            fmt(x.cores_busy(), 2)
        );
    }
    let _ = writeln!(
        o,
        "  {:<30} {:>8} {:>8}   (Redis' floor: a pipelined INCR + PEXPIRE, no server)",
        Scenario::Floor.label(k),
        "-",
        fmt(s(Scenario::Floor).cpu_redis, 2),
    );
    leeway(&mut o, r);
    targets(&mut o, r);
    let _ = writeln!(o, "\nother ratios (no target):");
    for (what, a, b) in [
        (
            format!("keyed ({FEW_KEYS} keys) / hot"),
            Scenario::Few,
            Scenario::Hot,
        ),
        (
            "hot / redis-benchmark".to_owned(),
            Scenario::Hot,
            Scenario::Redis,
        ),
        (
            "many / redis-benchmark".to_owned(),
            Scenario::Many,
            Scenario::Redis,
        ),
        (
            "one EVALSHA / parse only".to_owned(),
            Scenario::Bare,
            Scenario::Noop,
        ),
    ] {
        let _ = writeln!(o, "  {what:<28} {:>6}", fmt(ratio(s(a).rps, s(b).rps), 2));
    }
    // The server's CPU per decision taken apart: the batched decision alone over parsing
    // (what asking Redis costs the server, whatever it decides), and hot over the batched
    // decision alone (what the platform around it costs: API key, snapshot, counts, headers).
    for (what, a, b) in [
        (
            "server µs, batched / parse only",
            Scenario::Batched,
            Scenario::Noop,
        ),
        ("server µs, hot / batched", Scenario::Hot, Scenario::Batched),
    ] {
        let _ = writeln!(
            o,
            "  {what:<31} {:>3}",
            fmt(ratio(s(a).cpu_server, s(b).cpu_server), 2)
        );
    }
    // k) decides two policies a request: its decisions/s against a)'s single ones.
    let _ = writeln!(
        o,
        "  decisions/s, all of 2 / hot  {:>6}",
        fmt(
            ratio(
                s(Scenario::AllOfTwo)
                    .rps
                    .map(|r| r * Scenario::AllOfTwo.decisions_per_request()),
                s(Scenario::Hot).rps
            ),
            2
        )
    );
    let _ = writeln!(
        o,
        "  share denied in d)           {:>6}",
        fmt(
            ratio(
                s(Scenario::Denied).non_2xx.map(|v| v as f64),
                s(Scenario::Denied).requests.map(|v| v as f64)
            ),
            2
        )
    );
    crate::report_readings::append(&mut o, r, k);
    o
}

/// What each batching throughput target leaves of the machine's CPU time per request.
fn leeway(o: &mut String, r: &Results) {
    let _ = writeln!(
        o,
        "\nwhat each batching target leaves, in the machine's CPU time per request (us): with the"
    );
    let _ = writeln!(
        o,
        "cores saturated, req/s go as 1 / that time, so 'X >= R x ref' lets X use at most ref's"
    );
    let _ = writeln!(
        o,
        "time / R. 'redis' and 'beyond h' (ratekeeper's own time less the parse-only handler's)"
    );
    let _ = writeln!(
        o,
        "are where X's time goes beyond the parse-only request; 'h + redis' is what X would use"
    );
    let _ = writeln!(
        o,
        "if ratekeeper cost no more than the parse-only handler: above 'may use', the target is"
    );
    let _ = writeln!(
        o,
        "out of reach in this run whatever the server does, short of taking Redis' time down:"
    );
    let _ = writeln!(
        o,
        "  {:<30} {:>8} {:>8} {:>8} {:>9} {:>10}",
        "target", "may use", "uses", "redis", "beyond h", "h + redis"
    );
    for target in TARGETS {
        let Some(l) = Leeway::of(target, &r.scenarios) else {
            continue;
        };
        let what = format!("{} {}", target.measure.describe(), target.bound.describe());
        let _ = writeln!(
            o,
            "  {:<30} {:>8} {:>8} {:>8} {:>9} {:>10}{}",
            what,
            fmt(l.may_use, 1),
            fmt(l.uses, 1),
            fmt(l.redis, 1),
            fmt(l.beyond_h, 1),
            fmt(l.h_plus_redis, 1),
            if l.out_of_reach() {
                "  out of reach"
            } else {
                ""
            }
        );
    }
}

/// Every target against what was measured.
fn targets(o: &mut String, r: &Results) {
    for (source, title) in [
        (
            Source::Cpu,
            "the budget in CPU per decision, per process (bench/README.md \"The budget\"; informational):",
        ),
        (
            Source::Budget,
            "the earlier ratios against the no-op ceiling, latency and memory (informational):",
        ),
        (
            Source::Batching,
            "the batching targets, against the reference handlers of the same run (h: parse only, i: parse + one EVALSHA):",
        ),
    ] {
        let _ = writeln!(o, "\n{title}");
        for v in r.verdicts.iter().filter(|v| v.target.source == source) {
            let _ = writeln!(
                o,
                "  {:<32} {:>9}   target {:<8} {}",
                v.target.measure.describe(),
                fmt(v.value, 2),
                v.target.bound.describe(),
                v.verdict.word()
            );
        }
    }
    let _ = writeln!(
        o,
        "  (the parse-only handler's own p99 in this run: {} ms)",
        fmt(r.scenarios.get(&Scenario::Noop).and_then(|s| s.p99_ms), 3)
    );
    let _ = writeln!(o, "  server RSS: {}", r.rss_note);
}
