//! The wrk scenarios in rounds: round 1 runs every scenario in order, then round 2 runs
//! them all again, and so on, so that a slow drift of the machine falls on every scenario
//! alike. Each run is measured by the CPU time of the process that served it, of Redis and
//! of the machine; round 1 also takes the one-off readings of memory.

use std::collections::HashMap;
use std::time::Duration;

use anyhow::Result;

use crate::admin_api::{APP, AdminApi};
use crate::cpu;
use crate::figures::{RoundFigures, Scenario};
use crate::grpc_load::{self, GrpcRun};
use crate::knobs::{FEW_KEYS, Knobs};
use crate::private_redis::PrivateRedis;
use crate::probes;
use crate::procs::Service;
use crate::readings::Readings;
use crate::server::{PREFIX, Server};
use crate::walks::Walks;
use crate::wrk::{self, WrkFigures, WrkRun};

/// The reference handlers of examples/bare_acquire.rs, on the same Redis.
pub struct Bare {
    pub base: String,
    pub service: Service,
}

pub struct Rounds<'a> {
    pub knobs: &'a Knobs,
    pub hz: f64,
    pub server: &'a mut Server,
    pub bare: Option<&'a mut Bare>,
    pub redis: &'a mut PrivateRedis,
    pub api: &'a AdminApi,
    pub api_key: &'a str,
    pub readings: &'a mut Readings,
    /// Per scenario, each round's figures.
    pub figures: HashMap<Scenario, Vec<RoundFigures>>,
    pub walks: HashMap<Scenario, Walks>,
    /// wrk's raw output of every run, labelled, for the results file.
    pub raw: Vec<(String, String)>,
}

impl Rounds<'_> {
    /// The warm-up on `hot` (if any), then every round.
    pub async fn run_all(&mut self) -> Result<()> {
        for scenario in [Scenario::Keyed, Scenario::Few] {
            self.walks.insert(scenario, Walks::new(self.knobs.threads));
        }
        if self.knobs.warmup_s > 0 {
            self.run(Scenario::Hot, 0).await?;
        }
        for round in 1..=self.knobs.rounds {
            self.round(round).await?;
        }
        Ok(())
    }

    async fn round(&mut self, round: usize) -> Result<()> {
        let first = round == 1;
        for scenario in Scenario::IN_ROUNDS {
            if scenario.is_bare() && self.bare.is_none() {
                continue;
            }
            if first && scenario == Scenario::Keyed {
                self.readings.mem_before_keyed = self.redis.used_memory().await;
            }
            self.run(scenario, round).await?;
            if first {
                self.after_first(scenario).await?;
            }
        }
        if first {
            self.keyed_and_top_memory().await;
        }
        Ok(())
    }

    /// Round 1's readings right after a scenario.
    async fn after_first(&mut self, scenario: Scenario) -> Result<()> {
        let r = &mut *self.readings;
        match scenario {
            Scenario::Keyed => {
                r.mem_after_keyed = self.redis.used_memory().await;
                r.keyed_buckets = self.redis.scan(&format!("{PREFIX}:k:*")).await?.len();
            }
            Scenario::Many => {
                r.mem_after_load = self.redis.used_memory().await;
                r.mem_key_state = self.redis.memory_usage(&format!("{PREFIX}:{{p1}}")).await;
            }
            Scenario::Denied => {
                let reply = probes::acquire_once(
                    &self.server.base,
                    "/v1/acquire",
                    Some(self.api_key),
                    "tight",
                    None,
                )
                .await;
                r.sample_denied = (reply.status, reply.body);
            }
            _ => {}
        }
        Ok(())
    }

    /// Round 1's readings of the keyed buckets' and the top callers' memory.
    async fn keyed_and_top_memory(&mut self) {
        let r = &mut *self.readings;
        r.keyed_mean = self
            .redis
            .mean_memory_usage(&format!("{PREFIX}:k:*"), 1000)
            .await;
        // The flusher adds each instance's counts to Redis every couple of seconds.
        let started = std::time::Instant::now();
        loop {
            r.top_users = self.redis.top_sets(PREFIX, "users").await;
            r.top_few = self.redis.top_sets(PREFIX, "few").await;
            if r.top_users.sets > 0 && r.top_few.sets > 0 {
                break;
            }
            if started.elapsed() > Duration::from_secs(15) {
                crate::log!("WARNING: no top callers' sets in Redis after 15 s");
                break;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        r.top_users_api = self.api.top_callers("users").await;
    }

    /// The wrk run of one scenario (round 0: the warm-up).
    fn wrk_run(&self, scenario: Scenario, round: usize) -> WrkRun<'_> {
        let k = self.knobs;
        let auth = vec![
            "-H".to_owned(),
            format!("Authorization: Bearer {}", self.api_key),
        ];
        let acquire = format!("{}/v1/acquire", self.server.base);
        let bare_base = self
            .bare
            .as_ref()
            .map(|b| b.base.clone())
            .unwrap_or_default();
        let one = |resource: &str| vec![resource.to_owned(), "1".to_owned()];
        let walk = |scenario: Scenario, resource: &str, keys: usize, prefix: &str| {
            let starts = self
                .walks
                .get(&scenario)
                .map(Walks::starts)
                .unwrap_or_default();
            vec![
                resource.to_owned(),
                keys.to_string(),
                prefix.to_owned(),
                starts,
            ]
        };
        let (url, options, script, script_args) = match scenario {
            Scenario::Hot => (acquire, auth, "acquire_one.lua", one("hot")),
            Scenario::Keyed => (
                acquire,
                auth,
                "acquire_keyed.lua",
                walk(scenario, "users", k.keys, "u"),
            ),
            Scenario::Few => (
                acquire,
                auth,
                "acquire_keyed.lua",
                walk(scenario, "few", FEW_KEYS, "f"),
            ),
            Scenario::Many => (
                acquire,
                auth,
                "acquire_many.lua",
                vec![k.policies.to_string(), "p".to_owned()],
            ),
            Scenario::Ceiling => (format!("{}/healthz", self.server.base), vec![], "", vec![]),
            Scenario::Denied => (acquire, auth, "acquire_one.lua", one("tight")),
            Scenario::Noop => (
                format!("{bare_base}/noop"),
                vec![],
                "acquire_one.lua",
                one("hot"),
            ),
            Scenario::Bare => (
                format!("{bare_base}/v1/acquire"),
                vec![],
                "acquire_one.lua",
                one("hot"),
            ),
            Scenario::Batched => (
                format!("{bare_base}/v1/acquire/batched"),
                vec![],
                "acquire_one.lua",
                one("hot"),
            ),
            Scenario::AllOfTwo => (
                acquire,
                auth,
                "acquire_all.lua",
                vec!["hot".to_owned(), "hot2".to_owned()],
            ),
            Scenario::Redis | Scenario::Floor => unreachable!("redis-benchmark is not a wrk run"),
            Scenario::Grpc => unreachable!("the gRPC scenario is the bench's own load"),
        };
        let (duration, duration_s) = if round == 0 {
            (k.warmup.as_str(), k.warmup_s)
        } else {
            (k.duration.as_str(), k.duration_s)
        };
        WrkRun {
            threads: k.threads,
            connections: k.connections,
            duration,
            duration_s,
            url,
            options,
            script: (!script.is_empty()).then(|| k.bench_file(script)),
            script_args,
        }
    }

    /// Scenario j: the bench's own gRPC load on the hot policy (wrk speaks no gRPC). A
    /// server without the service (an older binary) fails the run, not the bench.
    async fn grpc_load(&self, round: usize) -> (bool, String, WrkFigures) {
        let k = self.knobs;
        let seconds = if round == 0 { k.warmup_s } else { k.duration_s };
        let run = GrpcRun {
            address: self.server.grpc.clone(),
            api_key: self.api_key.to_owned(),
            entries: vec![("generic_key".to_owned(), "hot".to_owned())],
            streams: k.grpc_streams,
            connections: k.grpc_connections,
            duration: Duration::from_secs(seconds),
        };
        crate::log!(
            "gRPC load (round {round}): {} streams on {} connections, {seconds} s",
            run.streams,
            run.connections
        );
        match grpc_load::run(&run).await {
            Ok(figures) => {
                let summary = format!(
                    "gRPC ShouldRateLimit: {} requests, {} not OK, {} errors, {:.0} req/s, p50 {:.3} ms, p99 {:.3} ms",
                    figures.requests.unwrap_or(0),
                    figures.non_2xx,
                    figures.socket_errors,
                    figures.rps.unwrap_or(0.0),
                    figures.p50_ms.unwrap_or(0.0),
                    figures.p99_ms.unwrap_or(0.0),
                );
                (figures.requests.unwrap_or(0) > 0, summary, figures)
            }
            Err(e) => (false, format!("{e:#}"), WrkFigures::default()),
        }
    }

    /// One wrk run, measured; its figures go to the scenario's rounds (not the warm-up's).
    async fn run(&mut self, scenario: Scenario, round: usize) -> Result<()> {
        let label = scenario.label(self.knobs);
        let what = if round == 0 {
            "warm-up".to_owned()
        } else {
            format!("round {round} of {}", self.knobs.rounds)
        };
        let serving = match (&self.bare, scenario) {
            (Some(bare), scenario) if scenario.is_bare() => bare.service.pid(),
            _ => self.server.service.pid(),
        };
        let before = (
            cpu::process_ticks(serving),
            cpu::process_ticks(self.redis.service.pid()),
            cpu::machine_ticks(),
        );
        let (ok, output, wrk) = if scenario == Scenario::Grpc {
            self.grpc_load(round).await
        } else {
            let run = self.wrk_run(scenario, round);
            crate::log!(
                "wrk {} ({what}): {} threads, {} connections, {}",
                if round == 0 { "warmup" } else { scenario.id() },
                run.threads,
                run.connections,
                run.duration
            );
            let (ok, output) = wrk::run(&run).await?;
            let wrk = wrk::parse(&output);
            (ok, output, wrk)
        };
        let after = (
            cpu::process_ticks(serving),
            cpu::process_ticks(self.redis.service.pid()),
            cpu::machine_ticks(),
        );
        let figures = if ok {
            // CPU per decision: a request of several decisions counts each.
            let decisions = wrk
                .requests
                .map(|r| (r as f64 * scenario.decisions_per_request()) as u64);
            let per_request = |b, a| cpu::per_request(b, a, decisions, self.hz);
            RoundFigures {
                cpu_server: per_request(before.0, after.0),
                cpu_redis: per_request(before.1, after.1),
                cpu_machine: per_request(before.2, after.2),
                wrk,
                failed: false,
            }
        } else {
            let tail: Vec<&str> = output.lines().rev().take(20).collect();
            crate::log!(
                "WARNING: wrk {} failed:\n{}",
                scenario.id(),
                tail.into_iter().rev().collect::<Vec<_>>().join("\n")
            );
            RoundFigures {
                failed: true,
                ..Default::default()
            }
        };
        self.server
            .service
            .check_alive(&format!("during wrk {}", scenario.id()))?;
        self.redis
            .check_alive(&format!("during wrk {}", scenario.id()))?;
        if round == 0 {
            self.raw.push(("warm-up".to_owned(), output));
            return Ok(());
        }
        if let Some(walks) = self.walks.get_mut(&scenario)
            && !walks.note(&figures.wrk.walks)
        {
            crate::log!(
                "WARNING: wrk {} round {round} reported the walk of {} of {} threads; its keys seen are unknown",
                scenario.id(),
                figures.wrk.walks.len(),
                self.knobs.threads
            );
        }
        self.raw
            .push((format!("{}, round {round}", scenario.id()), output));
        self.figures.entry(scenario).or_default().push(figures);
        if round == 1 {
            let (rss, hwm) = cpu::memory_kb(self.server.service.pid());
            self.readings
                .server_memory
                .push((format!("after {label}, round 1"), rss, hwm));
        }
        Ok(())
    }
}

/// Starts examples/bare_acquire.rs on the same Redis (its own bucket `rbare:{hot}`), and
/// waits until it answers 200.
pub async fn start_bare(
    knobs: &Knobs,
    tmp: &crate::procs::TempDir,
    redis: &PrivateRedis,
    after_port: u16,
) -> Result<Bare> {
    let port = crate::procs::free_port(after_port + 1, crate::private_redis::SHARED_PORT)?;
    let base = format!("http://127.0.0.1:{port}");
    let mut command = tokio::process::Command::new(&knobs.bare_bin);
    command
        .arg(format!("127.0.0.1:{port}"))
        .arg(redis.url())
        .arg("rbare:{hot}")
        .arg(APP);
    let mut service = Service::start("bare_acquire", command, &tmp.join("bare.log"))?;
    probes::wait_granted(&base, "/v1/acquire", None, "hot", None, &mut service).await?;
    Ok(Bare { base, service })
}
