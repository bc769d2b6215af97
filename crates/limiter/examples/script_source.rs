//! Prints a script's whole source exactly as the server loads it (the reply codes and the
//! algorithm table ahead of its `lua/` files), for tools that load it into Redis
//! themselves, such as the benchmark's redis-benchmark run:
//!
//!   cargo run -q -p ratekeeper-limiter --example script_source -- token_bucket

use ratekeeper_limiter::scripts;

fn main() {
    let name = std::env::args().nth(1).unwrap_or_default();
    let script = match name.as_str() {
        "token_bucket" => &scripts::TOKEN_BUCKET,
        "acquire_batch" => &scripts::ACQUIRE_BATCH,
        other => {
            eprintln!("script_source: no script {other:?} (token_bucket, acquire_batch)");
            std::process::exit(2);
        }
    };
    print!("{}", script.source());
}
