//! The scenarios and their figures: each round's, and the summary of the rounds (medians of
//! req/s, p50, p99 and CPU per request, each of its own column; sums of the counts).

use crate::knobs::{FEW_KEYS, Knobs};
use crate::wrk::WrkFigures;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scenario {
    Hot,
    Keyed,
    Few,
    Many,
    Ceiling,
    Denied,
    /// redis-benchmark, once after the rounds.
    Redis,
    /// redis-benchmark's pipelined INCR + PEXPIRE after the rounds, a run per round (the
    /// median): Redis' floor.
    Floor,
    Noop,
    Bare,
    /// examples/bare_acquire.rs's decision through the limiter crate's batcher: ratekeeper's
    /// batched decision without the platform around it.
    Batched,
    /// Envoy's `ShouldRateLimit` on the hot policy, from the bench's own gRPC load generator.
    Grpc,
    /// One acquire of all of two hot policies: two decisions a request.
    AllOfTwo,
}

impl Scenario {
    /// The wrk scenarios in the order of each round: f right after a) for a fair comparison.
    pub const IN_ROUNDS: [Self; 11] = [
        Self::Hot,
        Self::Grpc,
        Self::AllOfTwo,
        Self::Keyed,
        Self::Few,
        Self::Many,
        Self::Ceiling,
        Self::Denied,
        Self::Noop,
        Self::Bare,
        Self::Batched,
    ];
    /// Every scenario, in the order of the report's table.
    pub const ALL: [Self; 13] = [
        Self::Hot,
        Self::Grpc,
        Self::AllOfTwo,
        Self::Keyed,
        Self::Few,
        Self::Many,
        Self::Ceiling,
        Self::Denied,
        Self::Redis,
        Self::Floor,
        Self::Noop,
        Self::Bare,
        Self::Batched,
    ];

    /// Its name in the JSON and in messages.
    pub fn id(self) -> &'static str {
        match self {
            Self::Hot => "hot",
            Self::Keyed => "keyed",
            Self::Few => "few",
            Self::Many => "many",
            Self::Ceiling => "ceiling",
            Self::Denied => "denied",
            Self::Redis => "redis",
            Self::Floor => "floor",
            Self::Noop => "noop",
            Self::Bare => "bare",
            Self::Batched => "batched",
            Self::Grpc => "grpc",
            Self::AllOfTwo => "all_of_two",
        }
    }

    pub fn label(self, knobs: &Knobs) -> String {
        match self {
            Self::Hot => "a) acquire, 1 hot policy".to_owned(),
            Self::Keyed => format!("f) acquire, per_key, {} keys", knobs.keys),
            Self::Few => format!("g) acquire, per_key, {FEW_KEYS} keys"),
            Self::Many => format!("b) acquire, {} policies", knobs.policies),
            Self::Ceiling => "c) GET /healthz (ceiling)".to_owned(),
            Self::Denied => "d) acquire, denied flood".to_owned(),
            Self::Redis => "e) redis-benchmark EVALSHA".to_owned(),
            Self::Floor => "l) redis-benchmark -P 16 INCR + PEXPIRE (a pair)".to_owned(),
            Self::Noop => "h) reference: parse only".to_owned(),
            Self::Bare => "i) reference: parse + EVALSHA".to_owned(),
            Self::Batched => "m) reference: parse + batched decision".to_owned(),
            Self::Grpc => format!(
                "j) gRPC ShouldRateLimit, 1 hot descriptor, {} streams",
                knobs.grpc_streams
            ),
            Self::AllOfTwo => "k) acquire all of 2 hot policies".to_owned(),
        }
    }

    /// Served by examples/bare_acquire.rs rather than ratekeeper.
    pub fn is_bare(self) -> bool {
        matches!(self, Self::Noop | Self::Bare | Self::Batched)
    }

    /// redis-benchmark straight against Redis (no server, no wrk), after the rounds.
    pub fn is_redis_benchmark(self) -> bool {
        matches!(self, Self::Redis | Self::Floor)
    }

    /// Decisions a request of this scenario asks for.
    pub fn decisions_per_request(self) -> f64 {
        match self {
            Self::AllOfTwo => 2.0,
            _ => 1.0,
        }
    }
}

/// One run of a scenario: what wrk says, and the CPU µs per request of the process that
/// served it, of Redis and of the whole machine.
#[derive(Debug, Default, Clone)]
pub struct RoundFigures {
    pub wrk: WrkFigures,
    /// wrk failed: every figure of this run is unknown.
    pub failed: bool,
    pub cpu_server: Option<f64>,
    pub cpu_redis: Option<f64>,
    pub cpu_machine: Option<f64>,
}

/// A scenario over its rounds.
#[derive(Debug, Default, Clone)]
pub struct Summary {
    pub rps: Option<f64>,
    pub p50_ms: Option<f64>,
    pub p99_ms: Option<f64>,
    pub non_2xx: Option<u64>,
    pub requests: Option<u64>,
    pub socket_errors: Option<u64>,
    pub rounds_rps: Vec<Option<f64>>,
    pub cpu_server: Option<f64>,
    pub cpu_redis: Option<f64>,
    pub cpu_machine: Option<f64>,
}

impl Summary {
    pub fn of(rounds: &[RoundFigures]) -> Self {
        let known: Vec<&RoundFigures> = rounds.iter().filter(|r| !r.failed).collect();
        let column = |f: fn(&RoundFigures) -> Option<f64>| median(rounds.iter().filter_map(f));
        let total = |f: fn(&RoundFigures) -> Option<u64>| {
            let values: Vec<u64> = known.iter().filter_map(|r| f(r)).collect();
            (!values.is_empty()).then(|| values.iter().sum())
        };
        Self {
            rps: column(|r| r.wrk.rps),
            p50_ms: column(|r| r.wrk.p50_ms),
            p99_ms: column(|r| r.wrk.p99_ms),
            non_2xx: total(|r| Some(r.wrk.non_2xx)),
            requests: total(|r| r.wrk.requests),
            socket_errors: total(|r| Some(r.wrk.socket_errors)),
            rounds_rps: rounds.iter().map(|r| r.wrk.rps).collect(),
            cpu_server: column(|r| r.cpu_server),
            cpu_redis: column(|r| r.cpu_redis),
            cpu_machine: column(|r| r.cpu_machine),
        }
    }

    /// How many cores worked: the machine's CPU time per request times req/s.
    pub fn cores_busy(&self) -> Option<f64> {
        Some(self.cpu_machine? * self.rps? / 1e6)
    }
}

/// The median (the mean of the middle two for an even count); `None` of nothing.
pub fn median(values: impl Iterator<Item = f64>) -> Option<f64> {
    let mut v: Vec<f64> = values.filter(|x| x.is_finite()).collect();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => None,
        n if n % 2 == 1 => Some(v[n / 2]),
        n => Some((v[n / 2 - 1] + v[n / 2]) / 2.0),
    }
}

/// A figure with `decimals`, or n/a.
pub fn fmt(value: Option<f64>, decimals: usize) -> String {
    value.map_or_else(|| "n/a".to_owned(), |v| format!("{v:.decimals$}"))
}

/// `a / b`, when both are known and `b` is not 0.
pub fn ratio(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    let (a, b) = (a?, b?);
    (b != 0.0).then(|| a / b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_median_of_an_even_count_is_the_mean_of_the_middle_two() {
        assert_eq!(median([3.0, 1.0, 2.0].into_iter()), Some(2.0));
        assert_eq!(median([4.0, 1.0, 3.0, 2.0].into_iter()), Some(2.5));
        assert_eq!(median(std::iter::empty()), None);
    }

    #[test]
    fn a_failed_round_counts_in_no_column() {
        let ok = RoundFigures {
            wrk: WrkFigures {
                rps: Some(10.0),
                requests: Some(100),
                non_2xx: 1,
                ..Default::default()
            },
            ..Default::default()
        };
        let failed = RoundFigures {
            failed: true,
            ..Default::default()
        };
        let s = Summary::of(&[ok.clone(), failed, ok]);
        assert_eq!(s.rps, Some(10.0));
        assert_eq!(s.requests, Some(200));
        assert_eq!(s.non_2xx, Some(2));
        assert_eq!(s.rounds_rps, vec![Some(10.0), None, Some(10.0)]);
    }
}
