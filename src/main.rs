#![forbid(unsafe_code)]

use std::process::ExitCode;

use clap::Parser;
use ratekeeper::cli::{self, Cli};
use ratekeeper::config::Settings;
use ratekeeper::telemetry;

// See Cargo.toml: memory freed after a reload or a load spike goes back to the system.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// How long mimalloc keeps memory it freed before it gives it back to the system, in ms
/// (its own default is 1,000).
const PURGE_DELAY_MS: &str = "100";

/// Starts the process again at once with mimalloc's purge delay set, unless it already is.
///
/// Under load over 100,000 policies the workers' tallies and the flusher free and allocate
/// some megabytes a second; kept a second before it went back, that memory held the server
/// above its 100 MB budget, which a tenth of a second keeps (bench/README.md, "Names
/// compared in place, freed memory given back sooner"). mimalloc reads its options from
/// the environment when the process starts, before `main`, and the only other way to set
/// one is an unsafe call, which this crate forbids. `exec` keeps the process (its pid, its
/// open files); it returns only when it failed, and then the process goes on with
/// mimalloc's default. An operator's own `MIMALLOC_PURGE_DELAY` is kept.
#[cfg(unix)]
fn with_purge_delay() {
    use std::os::unix::process::CommandExt;
    const VARIABLE: &str = "MIMALLOC_PURGE_DELAY";
    if std::env::var_os(VARIABLE).is_some() {
        return;
    }
    let Ok(exe) = std::env::current_exe() else {
        return;
    };
    let mut args = std::env::args_os();
    let mut again = std::process::Command::new(exe);
    if let Some(name) = args.next() {
        again.arg0(name);
    }
    let _failed = again.args(args).env(VARIABLE, PURGE_DELAY_MS).exec();
}

#[cfg(not(unix))]
fn with_purge_delay() {}

fn main() -> ExitCode {
    with_purge_delay();
    run()
}

#[tokio::main]
async fn run() -> ExitCode {
    let cli = Cli::parse();
    let settings = match Settings::load() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    telemetry::init_tracing(settings.log_json);
    match cli::run(cli, settings).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
