#![forbid(unsafe_code)]

use std::process::ExitCode;

use clap::Parser;
use ratekeeper::cli::{self, Cli};
use ratekeeper::config::Settings;
use ratekeeper::telemetry;

// See Cargo.toml: memory freed after a reload or a load spike goes back to the system.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> ExitCode {
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
