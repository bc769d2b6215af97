//! One run, in order: tools, private Redis, server and its set-up, the probes, the rounds,
//! redis-benchmark, the examples, then the results written and the report printed.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use crate::admin_api::AdminApi;
use crate::figures::{Scenario, Summary};
use crate::knobs::Knobs;
use crate::private_redis::PrivateRedis;
use crate::procs::{self, TempDir};
use crate::readings::Readings;
use crate::results::{About, Results};
use crate::rounds::{self, Rounds};
use crate::server::{PREFIX, Server};
use crate::{cpu, probes, redis_benchmark, redis_floor, report, tools};

pub async fn run(knobs: &Knobs, tmp: &TempDir) -> Result<()> {
    tools::ensure(&[
        ("wrk", "wrk"),
        ("redis-server", "redis-server"),
        ("redis-benchmark", "redis-tools"),
    ])
    .await?;
    let hz = cpu::clock_ticks_per_second().await;
    let mut redis = PrivateRedis::start(tmp).await?;
    let mut server = Server::start(knobs, tmp, &redis).await?;
    let mut readings = Readings::default();
    note_memory(&mut readings, &server, "start-up done");

    let api = AdminApi::new(&server);
    let api_key = api
        .create_app(&knobs.policy_fields, &knobs.keyed_policy_fields)
        .await?;
    // Let the pushes of hot and tight land before the memory baseline.
    tokio::time::sleep(Duration::from_secs(1)).await;
    readings.mem_before = redis.used_memory().await;
    let started = Instant::now();
    readings.creation = Some(
        api.create_policies(knobs.policies, knobs.create_parallel, &knobs.policy_fields)
            .await?,
    );
    server
        .service
        .check_alive("while the policies were created")?;
    // The API answers after the SQL commit; the push to Redis follows. Wait for every key.
    loop {
        readings.policies_in_redis = redis.scan(&format!("{PREFIX}:{{p[0-9]*}}")).await?.len();
        if readings.policies_in_redis >= knobs.policies {
            break;
        }
        if started.elapsed()
            > Duration::from_secs(60)
                + Duration::from_secs_f64(readings.creation.as_ref().map_or(0.0, |c| c.seconds))
        {
            crate::log!(
                "WARNING: only {} of {} policy keys in Redis after 60 s; going on",
                readings.policies_in_redis,
                knobs.policies
            );
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    readings.synced_s = started.elapsed().as_secs_f64();
    crate::log!(
        "{} policy keys in Redis {:.1} s after the first POST",
        readings.policies_in_redis,
        readings.synced_s
    );
    note_memory(
        &mut readings,
        &server,
        &format!("the {} policies in Redis", knobs.policies),
    );
    readings.mem_after = redis.used_memory().await;
    readings.mem_key_config = redis.memory_usage(&format!("{PREFIX}:{{p1}}")).await;
    readings.dbsize = redis.dbsize().await;

    crate::log!("probing the acquire path");
    let last = format!("p{}", knobs.policies - 1);
    for (resource, caller) in [
        ("hot", None),
        ("p0", None),
        (last.as_str(), None),
        ("users", Some("probe")),
        ("few", Some("probe")),
    ] {
        let reply = probes::wait_granted(
            &server.base,
            "/v1/acquire",
            Some(&api_key),
            resource,
            caller,
            &mut server.service,
        )
        .await?;
        if resource == "hot" {
            readings.sample_granted = reply.body;
        }
    }

    readings.load_average = std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "n/a".to_owned());
    let mut bare = if knobs.bare_bin.is_file() {
        Some(rounds::start_bare(knobs, tmp, &redis, server.port).await?)
    } else {
        crate::log!(
            "WARNING: no {} (cargo build --release --example bare_acquire): scenarios h and i skipped",
            knobs.bare_bin.display()
        );
        None
    };
    let mut rounds = Rounds {
        knobs,
        hz,
        server: &mut server,
        bare: bare.as_mut(),
        redis: &mut redis,
        api: &api,
        api_key: &api_key,
        readings: &mut readings,
        figures: HashMap::new(),
        walks: HashMap::new(),
        raw: Vec::new(),
    };
    rounds.run_all().await?;
    let Rounds {
        figures,
        walks,
        raw,
        ..
    } = rounds;
    if let Some(bare) = bare {
        bare.service.stop(Duration::from_secs(10)).await;
    }

    let rb = redis_benchmark::run(knobs, &redis).await?;
    let floor = redis_floor::run(knobs, &redis, hz).await?;
    note_memory(&mut readings, &server, "the end");
    readings.sketch_table = example_table(&knobs.sketch_bin, &[], "top_keys_memory").await;
    // Redis' time in the scripts with the server stopped: the example resets and reads the
    // Redis' command statistics, which the server's own commands would blur.
    server.service.stop(Duration::from_secs(10)).await;
    crate::log!(
        "script cost: Redis' time per script call by batch shape (examples/script_cost.rs)"
    );
    readings.cost_table = example_table(&knobs.cost_bin, &[redis.url()], "script_cost").await;

    let mut scenarios: HashMap<Scenario, Summary> = figures
        .iter()
        .map(|(scenario, rounds)| (*scenario, Summary::of(rounds)))
        .collect();
    scenarios.insert(
        Scenario::Redis,
        Summary {
            rps: rb.rps,
            p50_ms: rb.p50_ms,
            p99_ms: rb.p99_ms,
            requests: Some(knobs.redis_requests as u64),
            ..Summary::default()
        },
    );
    scenarios.insert(
        Scenario::Floor,
        Summary {
            rps: floor.pairs_per_s,
            requests: Some(knobs.redis_requests as u64),
            cpu_redis: floor.us_per_pair,
            ..Summary::default()
        },
    );
    let results = Results::new(about(knobs).await, knobs, scenarios, walks, readings);
    let text = report::text(&results, knobs);
    let file = results.write(knobs, &text, &raw, &format!("{}{}", rb.csv, floor.csv))?;
    let server_log = tmp.join("server.log");
    if std::fs::metadata(&server_log).is_ok_and(|m| m.len() > 0) {
        let beside = knobs
            .root
            .join(format!("bench/results/{}.server.log", results.stamp));
        std::fs::copy(&server_log, &beside).context("copying the server log")?;
    }
    println!("\n{text}");
    crate::log!(
        "report written to {} (and latest.json beside it)",
        file.strip_prefix(&knobs.root).unwrap_or(&file).display()
    );
    redis.stop().await;
    Ok(())
}

fn note_memory(readings: &mut Readings, server: &Server, point: &str) {
    let (rss, hwm) = cpu::memory_kb(server.service.pid());
    readings.server_memory.push((point.to_owned(), rss, hwm));
}

/// An example's output (stdout and stderr), or why there is none.
async fn example_table(bin: &std::path::Path, args: &[String], name: &str) -> String {
    if !bin.is_file() {
        return format!("(not built: cargo build --release --example {name})");
    }
    match procs::run(
        procs::command(&bin.to_string_lossy(), args),
        Duration::from_secs(300),
    )
    .await
    {
        Ok(out) if out.success => format!("{}{}", out.stdout, out.stderr),
        Ok(out) => format!("{}{}{name} failed", out.stdout, out.stderr),
        Err(e) => format!("{name} failed: {e:#}"),
    }
}

/// The date, the commit and the machine, for the report's head.
async fn about(knobs: &Knobs) -> About {
    let sh = |program: &'static str, args: Vec<String>| async move {
        procs::run(procs::command(program, args), Duration::from_secs(10))
            .await
            .map(|out| format!("{}{}", out.stdout, out.stderr).trim().to_owned())
            .unwrap_or_default()
    };
    let root = knobs.root.to_string_lossy().into_owned();
    let git = |args: &[&str]| {
        let mut all = vec!["-C".to_owned(), root.clone()];
        all.extend(args.iter().map(|a| a.to_string()));
        sh("git", all)
    };
    let mut rev = git(&["rev-parse", "--short", "--verify", "-q", "HEAD"]).await;
    if rev.is_empty() {
        rev = "no-commit".to_owned();
    }
    if !git(&["status", "--porcelain", "--untracked-files=no"])
        .await
        .is_empty()
    {
        rev.push_str(" (dirty)");
    }
    let words = |text: String, n: usize| {
        text.lines()
            .next()
            .unwrap_or("")
            .split_whitespace()
            .take(n)
            .collect::<Vec<_>>()
            .join(" ")
    };
    About {
        date: sh("date", vec!["-u".into(), "+%Y-%m-%d %H:%M:%S UTC".into()]).await,
        stamp: sh("date", vec!["-u".into(), "+%Y%m%dT%H%M%SZ".into()]).await,
        git: rev,
        machine: format!(
            "{} cores, {}",
            std::thread::available_parallelism().map_or(0, |n| n.get()),
            sh("uname", vec!["-sr".into()]).await
        ),
        tools: format!(
            "{}, {}",
            words(sh("wrk", vec!["-v".into()]).await, 2),
            words(sh("redis-server", vec!["--version".into()]).await, 3)
        ),
    }
}
