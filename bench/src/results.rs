//! The run's results in one place: the summaries, the verdicts of the targets, the
//! readings; written as the report text (with wrk's raw output) and as JSON, to
//! bench/results/<timestamp>.{txt,json} and bench/results/latest.json.

use std::collections::HashMap;
use std::path::PathBuf;

use anyhow::{Context, Result};
use serde_json::{Value, json};

use crate::budget::{
    Leeway, Measured, RSS_MIN_KEYS_SEEN, RSS_MIN_POLICIES, TARGETS, Target, Verdict,
};
use crate::figures::{Scenario, Summary};
use crate::knobs::Knobs;
use crate::readings::{Readings, mb};
use crate::walks::Walks;

pub struct Verdicts {
    pub target: Target,
    pub value: Option<f64>,
    pub verdict: Verdict,
}

pub struct Results {
    pub date: String,
    /// `YYYYMMDDTHHMMSSZ`, the results files' name.
    pub stamp: String,
    pub git: String,
    pub machine: String,
    pub tools: String,
    pub scenarios: HashMap<Scenario, Summary>,
    pub walks: HashMap<Scenario, Walks>,
    pub readings: Readings,
    pub verdicts: Vec<Verdicts>,
    /// What the server's memory target was judged on, or why it was not.
    pub rss_note: String,
}

/// The about-the-run lines, filled in by `main`.
pub struct About {
    pub date: String,
    pub stamp: String,
    pub git: String,
    pub machine: String,
    pub tools: String,
}

impl Results {
    pub fn new(
        about: About,
        knobs: &Knobs,
        scenarios: HashMap<Scenario, Summary>,
        walks: HashMap<Scenario, Walks>,
        readings: Readings,
    ) -> Self {
        let keys_seen = walks.get(&Scenario::Keyed).and_then(Walks::seen);
        let (end_rss, end_hwm) = readings
            .server_memory
            .last()
            .map_or((None, None), |(_, rss, hwm)| (*rss, *hwm));
        let at_size =
            knobs.policies >= RSS_MIN_POLICIES && keys_seen.is_some_and(|k| k >= RSS_MIN_KEYS_SEEN);
        let server_rss_mb = at_size.then(|| mb(end_rss)).flatten();
        let rss_note = if at_size {
            format!(
                "{} MB at the end (peak {} MB)",
                crate::figures::fmt(mb(end_rss), 1),
                crate::figures::fmt(mb(end_hwm), 1)
            )
        } else {
            format!(
                "not measured at this size ({} policies, {} distinct keys seen)",
                knobs.policies,
                keys_seen.map_or_else(|| "n/a".to_owned(), |k| k.to_string())
            )
        };
        let measured = Measured {
            scenarios: &scenarios,
            redis_bytes_per_policy: readings.per_policy(readings.mem_after, knobs.policies),
            keyed_bucket_bytes: readings.keyed_mean.map(|(mean, _)| mean),
            server_rss_mb,
        };
        let verdicts = TARGETS
            .iter()
            .map(|target| {
                let value = target.measure.value(&measured);
                Verdicts {
                    target: *target,
                    value,
                    verdict: target.bound.judge(value),
                }
            })
            .collect();
        Self {
            date: about.date,
            stamp: about.stamp,
            git: about.git,
            machine: about.machine,
            tools: about.tools,
            scenarios,
            walks,
            readings,
            verdicts,
            rss_note,
        }
    }

    pub fn json(&self, knobs: &Knobs) -> Value {
        let scenarios: serde_json::Map<String, Value> = Scenario::ALL
            .iter()
            .filter_map(|s| Some((s, self.scenarios.get(s)?)))
            .map(|(s, x)| {
                let figures = json!({
                    "label": s.label(knobs),
                    "rps": x.rps,
                    "p50_ms": x.p50_ms,
                    "p99_ms": x.p99_ms,
                    "non_2xx": x.non_2xx,
                    "requests": x.requests,
                    "socket_errors": x.socket_errors,
                    "rounds_rps": x.rounds_rps,
                    "cpu_us_per_request": {
                        "server": x.cpu_server,
                        "redis": x.cpu_redis,
                        "machine": x.cpu_machine,
                    },
                    "cores_busy": x.cores_busy(),
                });
                (s.id().to_owned(), figures)
            })
            .collect();
        let targets: Vec<Value> = self
            .verdicts
            .iter()
            .map(|v| {
                let leeway = Leeway::of(&v.target, &self.scenarios).map(|l| {
                    json!({
                        "may_use_us": l.may_use,
                        "uses_us": l.uses,
                        "redis_us": l.redis,
                        "beyond_h_us": l.beyond_h,
                        "h_plus_redis_us": l.h_plus_redis,
                        "out_of_reach": l.out_of_reach(),
                    })
                });
                json!({
                    "source": format!("{:?}", v.target.source).to_lowercase(),
                    "measure": v.target.measure.describe(),
                    "bound": v.target.bound.describe(),
                    "limit": v.target.bound.limit(),
                    "measured": v.value,
                    "verdict": v.verdict.word(),
                    "machine_time": leeway,
                })
            })
            .collect();
        let d = &self.readings;
        let keyed = self.walks.get(&Scenario::Keyed);
        json!({
            "date": self.date,
            "git": self.git,
            "machine": self.machine,
            "tools": self.tools,
            "load_average_before": d.load_average,
            "settings": {
                "duration": knobs.duration, "rounds": knobs.rounds, "warmup": knobs.warmup,
                "connections": knobs.connections, "threads": knobs.threads,
                "policies": knobs.policies, "keys": knobs.keys,
                "redis_requests": knobs.redis_requests,
                "policy": knobs.policy_fields, "keyed_policy": knobs.keyed_policy_fields,
            },
            "scenarios": scenarios,
            "targets": targets,
            "memory": {
                "redis_bytes_per_policy": d.per_policy(d.mem_after, knobs.policies),
                "redis_bytes_per_policy_with_state": d.per_policy(d.mem_after_load, knobs.policies),
                "keyed_bucket_bytes": d.keyed_mean.map(|(m, _)| m),
                "keyed_growth_per_bucket": d.keyed_growth_per_bucket(),
                "keyed_buckets_after_round_1": d.keyed_buckets,
                "keyed_keys_seen": keyed.and_then(Walks::seen),
                "server": d.server_memory.iter().map(|(point, rss, hwm)| json!({
                    "point": point, "rss_mb": mb(*rss), "peak_mb": mb(*hwm),
                })).collect::<Vec<_>>(),
                "server_rss": self.rss_note,
            },
            "policy_setup": d.creation.as_ref().map(|c| json!({
                "seconds": c.seconds, "first_failures": c.first_failures,
                "in_redis": d.policies_in_redis, "synced_s": d.synced_s,
            })),
        })
    }

    /// Writes the report (with wrk's raw output) and the JSON; the text file's path.
    pub fn write(
        &self,
        knobs: &Knobs,
        report: &str,
        raw: &[(String, String)],
        redis_csv: &str,
    ) -> Result<PathBuf> {
        let dir = knobs.root.join("bench/results");
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let mut text = format!("{report}\nraw wrk output:\n");
        for (label, output) in raw {
            text.push_str(&format!("--- {label}\n{output}"));
        }
        text.push_str(&format!("--- redis-benchmark\n{redis_csv}"));
        let txt = dir.join(format!("{}.txt", self.stamp));
        std::fs::write(&txt, text).with_context(|| format!("writing {}", txt.display()))?;
        let json = serde_json::to_string_pretty(&self.json(knobs))? + "\n";
        for name in [format!("{}.json", self.stamp), "latest.json".to_owned()] {
            let path = dir.join(name);
            std::fs::write(&path, &json).with_context(|| format!("writing {}", path.display()))?;
        }
        Ok(txt)
    }
}
