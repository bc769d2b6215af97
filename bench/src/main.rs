//! The acquire-path benchmark (`bench/acquire.sh` builds and runs it): a private Redis and
//! a private ratekeeper on loopback, 10,000 + 4 policies made through the CLI and the admin
//! API, the wrk scenarios in rounds, redis-benchmark of the token bucket's script, memory
//! probes, the examples top_keys_memory and script_cost, then a report of the rounds'
//! medians against the targets of bench/README.md, as text and as JSON in bench/results/.
//! It asserts nothing about time: it exits non-zero only when the set-up fails (or when
//! interrupted). Every child it starts is stopped when it ends, however it ends.
#![forbid(unsafe_code)]

mod admin_api;
mod budget;
mod cpu;
mod figures;
mod grpc_load;
mod knobs;
mod private_redis;
mod probes;
mod procs;
mod readings;
mod redis_benchmark;
mod redis_floor;
mod report;
mod report_readings;
mod results;
mod rounds;
mod run;
mod server;
mod tools;
mod walks;
mod wrk;

use std::process::ExitCode;

use knobs::Knobs;
use procs::TempDir;

/// A line on stderr with the time of day (UTC).
#[macro_export]
macro_rules! log {
    ($($arg:tt)*) => {
        eprintln!("[bench {}] {}", $crate::time_of_day(), format!($($arg)*))
    };
}

/// `HH:MM:SS` UTC, for log lines.
pub fn time_of_day() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
        % 86_400;
    format!("{:02}:{:02}:{:02}", secs / 3600, secs / 60 % 60, secs % 60)
}

#[tokio::main]
async fn main() -> ExitCode {
    // Refused only when one is installed already: either way reqwest has one.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let knobs = match Knobs::from_env() {
        Ok(knobs) => knobs,
        Err(e) => {
            log!("ERROR: {e:#}");
            return ExitCode::FAILURE;
        }
    };
    let mut tmp = match TempDir::new(knobs.keep_tmp) {
        Ok(tmp) => tmp,
        Err(e) => {
            log!("ERROR: {e:#}");
            return ExitCode::FAILURE;
        }
    };
    // Whichever ends first; the run's future is dropped with every child it started.
    let outcome = tokio::select! {
        ran = run::run(&knobs, &tmp) => ran.map(|()| ExitCode::SUCCESS),
        _ = tokio::signal::ctrl_c() => {
            log!("interrupted");
            Ok(ExitCode::from(130))
        }
        _ = terminated() => {
            log!("terminated");
            Ok(ExitCode::from(143))
        }
    };
    match outcome {
        Ok(code) => {
            if code == ExitCode::SUCCESS {
                tmp.succeeded();
            }
            code
        }
        Err(e) => {
            log!("ERROR: {e:#}");
            print_server_log_tail(&tmp);
            ExitCode::FAILURE
        }
    }
}

/// SIGTERM (e.g. from `timeout`).
async fn terminated() {
    use tokio::signal::unix::{SignalKind, signal};
    match signal(SignalKind::terminate()) {
        Ok(mut term) => {
            term.recv().await;
        }
        Err(_) => std::future::pending().await,
    }
}

fn print_server_log_tail(tmp: &TempDir) {
    let log = tmp.join("server.log");
    if let Ok(text) = std::fs::read_to_string(&log)
        && !text.trim().is_empty()
    {
        let lines: Vec<&str> = text.lines().collect();
        log!("last lines of the ratekeeper log ({}):", log.display());
        for line in &lines[lines.len().saturating_sub(40)..] {
            eprintln!("{line}");
        }
    }
}
