//! The targets, in one table: the budget of bench/README.md ("The budget") and the
//! batching targets beside it. The report and the JSON print each against what the run
//! measured; nothing is asserted (a benchmark exits non-zero only when its set-up fails).

use std::collections::HashMap;

use crate::figures::{Scenario, Summary, ratio};

use Scenario::{Bare, Ceiling, Denied, Floor, Grpc, Hot, Keyed, Many, Noop};

/// What a target is about.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Measure {
    /// The median req/s of one scenario over another's.
    Throughput(Scenario, Scenario),
    /// A scenario's median p99 at the run's connections, in ms.
    P99(Scenario),
    /// The server's CPU µs per request of one scenario over another's.
    ServerCpu(Scenario, Scenario),
    /// Redis' CPU µs per request of one scenario.
    RedisCpu(Scenario),
    /// Redis' CPU µs per decision of one scenario over another's (the floor, l).
    RedisCpuRatio(Scenario, Scenario),
    /// A scenario's median p99 over another's.
    P99Ratio(Scenario, Scenario),
    /// Redis' `used_memory` growth per policy, configuration only, in bytes.
    RedisBytesPerPolicy,
    /// The mean `MEMORY USAGE` of a keyed bucket, in bytes.
    KeyedBucketBytes,
    /// The server's RSS at the end, in MB, with 100,000 policies and 1,000,000 keys seen.
    ServerRssMb,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Bound {
    AtLeast(f64),
    AtMost(f64),
}

/// Where a target comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// The budget as CPU time per decision, per process, against the reference handlers
    /// of the same run: what sizes a deployment, robust on a shared machine.
    Cpu,
    /// The budget: ratios within one run against the no-op ceiling, latency, memory.
    Budget,
    /// The batching targets, against the reference handlers h and i of the same run.
    Batching,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Target {
    pub source: Source,
    pub measure: Measure,
    pub bound: Bound,
}

const fn target(source: Source, measure: Measure, bound: Bound) -> Target {
    Target {
        source,
        measure,
        bound,
    }
}

use Bound::{AtLeast, AtMost};
use Measure::{
    KeyedBucketBytes, P99, P99Ratio, RedisBytesPerPolicy, RedisCpu, RedisCpuRatio, ServerCpu,
    ServerRssMb, Throughput,
};
use Source::{Batching, Budget, Cpu};

/// Every target, the one place they are written.
pub const TARGETS: &[Target] = &[
    target(Cpu, RedisCpu(Hot), AtMost(2.0)),
    target(Cpu, RedisCpu(Many), AtMost(4.0)),
    target(Cpu, RedisCpu(Keyed), AtMost(4.0)),
    // Within 2x of Redis' cheapest inexact decision, a pipelined INCR + PEXPIRE (l).
    target(Cpu, RedisCpuRatio(Hot, Floor), AtMost(2.0)),
    target(Cpu, RedisCpuRatio(Many, Floor), AtMost(2.0)),
    target(Cpu, RedisCpuRatio(Keyed, Floor), AtMost(2.0)),
    target(Cpu, ServerCpu(Hot, Noop), AtMost(1.3)),
    target(Cpu, ServerCpu(Keyed, Noop), AtMost(1.3)),
    target(Cpu, ServerCpu(Many, Noop), AtMost(1.3)),
    target(Cpu, ServerCpu(Denied, Noop), AtMost(1.25)),
    target(Cpu, Throughput(Hot, Bare), AtLeast(1.5)),
    target(Cpu, Throughput(Keyed, Bare), AtLeast(1.5)),
    target(Cpu, Throughput(Many, Bare), AtLeast(1.5)),
    target(Cpu, P99Ratio(Hot, Noop), AtMost(1.5)),
    // Envoy's rate limit service: decisions/s of one descriptor against the HTTP acquire
    // of the same policy, and the same server budget per decision.
    target(Cpu, Throughput(Grpc, Hot), AtLeast(0.9)),
    target(Cpu, ServerCpu(Grpc, Noop), AtMost(1.3)),
    target(Budget, Throughput(Hot, Ceiling), AtLeast(0.55)),
    target(Budget, P99(Hot), AtMost(4.0)),
    target(Budget, Throughput(Many, Ceiling), AtLeast(0.55)),
    target(Budget, P99(Many), AtMost(4.0)),
    target(Budget, Throughput(Denied, Ceiling), AtLeast(0.8)),
    target(Budget, Throughput(Keyed, Hot), AtLeast(0.9)),
    target(Budget, P99(Keyed), AtMost(4.0)),
    target(Budget, RedisBytesPerPolicy, AtMost(200.0)),
    target(Budget, KeyedBucketBytes, AtMost(120.0)),
    target(Budget, ServerRssMb, AtMost(100.0)),
    target(Batching, Throughput(Hot, Noop), AtLeast(0.85)),
    target(Batching, Throughput(Many, Noop), AtLeast(0.7)),
    target(Batching, Throughput(Keyed, Noop), AtLeast(0.7)),
    target(Batching, Throughput(Denied, Noop), AtLeast(0.9)),
    target(Batching, Throughput(Hot, Bare), AtLeast(1.3)),
    target(Batching, Throughput(Many, Bare), AtLeast(1.3)),
    target(Batching, Throughput(Keyed, Bare), AtLeast(1.3)),
    target(Batching, P99(Hot), AtMost(3.0)),
    target(Batching, P99(Many), AtMost(3.0)),
    target(Batching, P99(Keyed), AtMost(3.0)),
];

/// The server's memory target is judged only on a run of its size.
pub const RSS_MIN_POLICIES: usize = 100_000;
pub const RSS_MIN_KEYS_SEEN: u64 = 1_000_000;

/// What the targets are measured on.
pub struct Measured<'a> {
    pub scenarios: &'a HashMap<Scenario, Summary>,
    pub redis_bytes_per_policy: Option<f64>,
    pub keyed_bucket_bytes: Option<f64>,
    /// `None` when the run is smaller than the target's size.
    pub server_rss_mb: Option<f64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Met,
    NotMet,
    /// Not measured in this run (a scenario failed, or the run is too small).
    Unknown,
}

impl Verdict {
    pub fn word(self) -> &'static str {
        match self {
            Self::Met => "met",
            Self::NotMet => "NOT MET",
            Self::Unknown => "n/a",
        }
    }
}

impl Measure {
    pub fn describe(self) -> String {
        match self {
            Throughput(x, of) => format!("{} / {} req/s", x.id(), of.id()),
            ServerCpu(x, of) => format!("{} / {} server µs/req", x.id(), of.id()),
            RedisCpu(x) => format!("{} Redis µs/req", x.id()),
            RedisCpuRatio(x, of) => format!("{} / {} Redis µs/req", x.id(), of.id()),
            P99Ratio(x, of) => format!("{} / {} p99", x.id(), of.id()),
            P99(x) => format!("{} p99 ms", x.id()),
            RedisBytesPerPolicy => "Redis bytes per policy".to_owned(),
            KeyedBucketBytes => "bytes per keyed bucket".to_owned(),
            ServerRssMb => "server RSS MB".to_owned(),
        }
    }

    pub fn value(self, m: &Measured<'_>) -> Option<f64> {
        let of = |s: Scenario| m.scenarios.get(&s);
        match self {
            Throughput(x, against) => ratio(of(x)?.rps, of(against)?.rps),
            ServerCpu(x, against) => ratio(of(x)?.cpu_server, of(against)?.cpu_server),
            RedisCpu(x) => of(x)?.cpu_redis,
            RedisCpuRatio(x, against) => ratio(of(x)?.cpu_redis, of(against)?.cpu_redis),
            P99Ratio(x, against) => ratio(of(x)?.p99_ms, of(against)?.p99_ms),
            P99(x) => of(x)?.p99_ms,
            RedisBytesPerPolicy => m.redis_bytes_per_policy,
            KeyedBucketBytes => m.keyed_bucket_bytes,
            ServerRssMb => m.server_rss_mb,
        }
    }
}

impl Bound {
    pub fn describe(self) -> String {
        match self {
            AtLeast(v) => format!(">= {v}"),
            AtMost(v) => format!("<= {v}"),
        }
    }

    pub fn limit(self) -> f64 {
        match self {
            AtLeast(v) | AtMost(v) => v,
        }
    }

    pub fn judge(self, value: Option<f64>) -> Verdict {
        match (self, value) {
            (_, None) => Verdict::Unknown,
            (AtLeast(limit), Some(v)) if v >= limit => Verdict::Met,
            (AtMost(limit), Some(v)) if v <= limit => Verdict::Met,
            _ => Verdict::NotMet,
        }
    }
}

/// What a throughput target against a reference handler leaves of the machine's CPU time
/// per request: with the cores saturated, req/s go as one over that time, so "X >= R x
/// ref" lets X use at most ref's time / R.
#[derive(Debug, Clone, Copy)]
pub struct Leeway {
    pub may_use: Option<f64>,
    pub uses: Option<f64>,
    pub redis: Option<f64>,
    /// X's server time beyond the parse-only handler's.
    pub beyond_h: Option<f64>,
    /// The parse-only request's machine time plus X's Redis time: what X would use if the
    /// server cost no more than the parse-only handler.
    pub h_plus_redis: Option<f64>,
}

impl Leeway {
    /// The leeway of a batching throughput target; `None` for any other target.
    pub fn of(target: &Target, scenarios: &HashMap<Scenario, Summary>) -> Option<Self> {
        let Throughput(x, reference) = target.measure else {
            return None;
        };
        let AtLeast(at_least) = target.bound else {
            return None;
        };
        if target.source != Batching {
            return None;
        }
        let (x, reference, h) = (
            scenarios.get(&x)?,
            scenarios.get(&reference)?,
            scenarios.get(&Noop)?,
        );
        Some(Self {
            may_use: reference.cpu_machine.map(|t| t / at_least),
            uses: x.cpu_machine,
            redis: x.cpu_redis,
            beyond_h: x.cpu_server.zip(h.cpu_server).map(|(x, h)| x - h),
            h_plus_redis: h.cpu_machine.zip(x.cpu_redis).map(|(h, r)| h + r),
        })
    }

    /// No work taken off the server meets the target in this run, only less of Redis' time.
    pub fn out_of_reach(&self) -> bool {
        matches!((self.h_plus_redis, self.may_use), (Some(floor), Some(may)) if floor > may)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_judge_both_ways() {
        assert_eq!(AtLeast(0.55).judge(Some(0.6)), Verdict::Met);
        assert_eq!(AtLeast(0.55).judge(Some(0.5)), Verdict::NotMet);
        assert_eq!(AtMost(4.0).judge(Some(4.0)), Verdict::Met);
        assert_eq!(AtMost(4.0).judge(None), Verdict::Unknown);
    }

    #[test]
    fn a_batching_target_leaves_the_reference_time_over_its_ratio() {
        let summary = |machine: f64, server: f64, redis: f64| Summary {
            rps: Some(1.0),
            cpu_machine: Some(machine),
            cpu_server: Some(server),
            cpu_redis: Some(redis),
            ..Default::default()
        };
        let scenarios = HashMap::from([
            (Hot, summary(50.0, 20.0, 8.0)),
            (Noop, summary(34.0, 12.0, 0.0)),
        ]);
        let hot = TARGETS
            .iter()
            .find(|t| t.measure == Throughput(Hot, Noop))
            .unwrap();
        let leeway = Leeway::of(hot, &scenarios).unwrap();
        assert_eq!(leeway.may_use, Some(40.0));
        assert_eq!(leeway.beyond_h, Some(8.0));
        assert_eq!(leeway.h_plus_redis, Some(42.0));
        assert!(leeway.out_of_reach());
        assert!(Leeway::of(&TARGETS[0], &scenarios).is_none());
    }
}
