//! One wrk run and what its output says: req/s, p50 and p99, non-2xx answers, requests,
//! socket errors, and the walk lines of bench/acquire_keyed.lua (each thread's share, keys
//! handed out and next position).

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Result;

use crate::procs;

/// A wrk run to make: URL, extra options (headers, script) and the script's arguments.
pub struct WrkRun<'a> {
    pub threads: usize,
    pub connections: usize,
    pub duration: &'a str,
    pub duration_s: u64,
    pub url: String,
    pub options: Vec<String>,
    pub script: Option<PathBuf>,
    pub script_args: Vec<String>,
}

/// What a run's output says; `None` where it says nothing.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct WrkFigures {
    pub rps: Option<f64>,
    pub p50_ms: Option<f64>,
    pub p99_ms: Option<f64>,
    pub non_2xx: u64,
    pub requests: Option<u64>,
    pub socket_errors: u64,
    pub walks: Vec<Walk>,
}

/// One wrk thread's walk over its share of the keys.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Walk {
    pub thread: usize,
    pub share: u64,
    pub walked: u64,
    pub next: u64,
}

/// Runs wrk (killed 60 s after its duration); its whole output, and whether it succeeded.
pub async fn run(run: &WrkRun<'_>) -> Result<(bool, String)> {
    let mut command = procs::command(
        "wrk",
        [
            "-t",
            &run.threads.to_string(),
            "-c",
            &run.connections.to_string(),
        ],
    );
    command
        .args(["-d", run.duration, "--latency"])
        .args(&run.options);
    if let Some(script) = &run.script {
        command.arg("-s").arg(script);
    }
    // wrk wants the URL after its options and before `--` and the script's arguments.
    command.arg(&run.url).arg("--").args(&run.script_args);
    let out = procs::run(command, Duration::from_secs(run.duration_s + 60)).await?;
    Ok((out.success, format!("{}{}", out.stdout, out.stderr)))
}

/// A latency as wrk prints it (`812.00us`, `3.21ms`, `1.02s`, `2.00m`), in ms.
fn ms(value: &str) -> Option<f64> {
    let (number, factor) = if let Some(n) = value.strip_suffix("us") {
        (n, 0.001)
    } else if let Some(n) = value.strip_suffix("ms") {
        (n, 1.0)
    } else if let Some(n) = value.strip_suffix('m') {
        (n, 60_000.0)
    } else if let Some(n) = value.strip_suffix('s') {
        (n, 1000.0)
    } else {
        (value, 1.0)
    };
    number.parse::<f64>().ok().map(|n| n * factor)
}

pub fn parse(output: &str) -> WrkFigures {
    let mut figures = WrkFigures::default();
    for line in output.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        match fields.as_slice() {
            ["Requests/sec:", rps, ..] => figures.rps = rps.parse().ok(),
            ["50%", value, ..] => figures.p50_ms = ms(value),
            ["99%", value, ..] => figures.p99_ms = ms(value),
            [.., "Non-2xx", "or", "3xx", "responses:", n] => {
                figures.non_2xx = n.parse().unwrap_or(0)
            }
            [n, "requests", "in", ..] => figures.requests = n.parse().ok(),
            ["Socket", "errors:", rest @ ..] => {
                // connect A, read B, write C, timeout D
                figures.socket_errors = rest
                    .iter()
                    .filter_map(|f| f.trim_end_matches(',').parse::<u64>().ok())
                    .sum();
            }
            [walk, thread, share, walked, next] if *walk == "walk" => {
                let value = |f: &str, name: &str| f.strip_prefix(name)?.parse::<u64>().ok();
                if let (Some(t), Some(s), Some(w), Some(n)) = (
                    value(thread, "thread="),
                    value(share, "share="),
                    value(walked, "walked="),
                    value(next, "next="),
                ) {
                    figures.walks.push(Walk {
                        thread: t as usize,
                        share: s,
                        walked: w,
                        next: n,
                    });
                }
            }
            _ => {}
        }
    }
    figures
}

#[cfg(test)]
mod tests {
    use super::*;

    const OUTPUT: &str = "Running 3s test @ http://127.0.0.1:18080/v1/acquire
  2 threads and 64 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency     1.52ms  410.22us  12.01ms   80.11%
  Latency Distribution
     50%  812.00us
     75%    1.61ms
     90%    2.01ms
     99%    3.21ms
  120339 requests in 3.00s, 40.12MB read
  Socket errors: connect 0, read 2, write 0, timeout 1
  Non-2xx or 3xx responses: 12
Requests/sec:  40112.61
Transfer/sec:     13.37MB
walk thread=0 share=50000 walked=60170 next=10170
walk thread=1 share=50000 walked=60169 next=10169
";

    #[test]
    fn a_run_reads_as_its_figures() {
        let f = parse(OUTPUT);
        assert_eq!(f.rps, Some(40112.61));
        assert_eq!(f.p50_ms, Some(0.812));
        assert_eq!(f.p99_ms, Some(3.21));
        assert_eq!(f.non_2xx, 12);
        assert_eq!(f.requests, Some(120_339));
        assert_eq!(f.socket_errors, 3);
        assert_eq!(f.walks.len(), 2);
        assert_eq!(
            f.walks[1],
            Walk {
                thread: 1,
                share: 50_000,
                walked: 60_169,
                next: 10_169
            }
        );
    }

    #[test]
    fn latencies_read_in_ms() {
        assert_eq!(ms("1.50s"), Some(1500.0));
        assert_eq!(ms("2.00m"), Some(120_000.0));
        assert_eq!(ms("bad"), None);
    }
}
