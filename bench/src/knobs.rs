//! The run's knobs, from `BENCH_*` environment variables (names and defaults as
//! bench/README.md lists them), checked before anything starts.

use std::path::PathBuf;

use anyhow::{Context, Result, bail, ensure};

/// The distinct keys of scenario g.
pub const FEW_KEYS: usize = 1000;

pub struct Knobs {
    /// wrk's `-d` of each scenario, as given (`10s`, `1m`, `30`).
    pub duration: String,
    pub duration_s: u64,
    pub rounds: usize,
    pub warmup: String,
    pub warmup_s: u64,
    pub connections: usize,
    pub threads: usize,
    pub policies: usize,
    pub create_parallel: usize,
    pub redis_requests: usize,
    pub keys: usize,
    /// Concurrent `ShouldRateLimit` calls of scenario j, and the HTTP/2 connections they share.
    pub grpc_streams: usize,
    pub grpc_connections: usize,
    pub keep_tmp: bool,
    /// The JSON fields of `hot` and `p0..`: a limit never reached.
    pub policy_fields: String,
    /// The JSON fields of `users` and `few`: never denied, refilling slowly, so each key's
    /// bucket outlives the run (its TTL is its time to full) and its memory is measured.
    pub keyed_policy_fields: String,
    pub server_bin: PathBuf,
    pub bare_bin: PathBuf,
    pub cost_bin: PathBuf,
    pub sketch_bin: PathBuf,
    /// The repository: bench/'s wrk scripts, bench/results/, `git rev-parse`.
    pub root: PathBuf,
}

impl Knobs {
    pub fn from_env() -> Result<Self> {
        ensure!(
            std::env::args().len() == 1,
            "no arguments; use the BENCH_* environment variables (see bench/README.md)"
        );
        let duration = text("BENCH_DURATION", "10s");
        let duration_s = seconds(&duration).filter(|&s| s > 0).with_context(|| {
            format!("BENCH_DURATION must look like 10s, 1m or 30 (got '{duration}')")
        })?;
        let warmup = text("BENCH_WARMUP", "2s");
        let warmup_s = seconds(&warmup)
            .with_context(|| format!("BENCH_WARMUP must look like 2s or 0 (got '{warmup}')"))?;
        // Binaries built together sit together: the server beside this one, the examples
        // in its examples/.
        let here = std::env::current_exe().context("locating the bench binary")?;
        let dir = here
            .parent()
            .context("the bench binary's directory")?
            .to_path_buf();
        let path = |var: &str, default: PathBuf| {
            std::env::var_os(var).map(PathBuf::from).unwrap_or(default)
        };
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .context("the repository of bench/")?
            .to_path_buf();
        let knobs = Self {
            duration,
            duration_s,
            rounds: count("BENCH_ROUNDS", 3)?,
            warmup,
            warmup_s,
            connections: count("BENCH_CONNECTIONS", 64)?,
            threads: count("BENCH_THREADS", 2)?,
            policies: count("BENCH_POLICIES", 10_000)?,
            create_parallel: count("BENCH_CREATE_PARALLEL", 8)?,
            redis_requests: count("BENCH_REDIS_REQUESTS", 200_000)?,
            keys: count("BENCH_KEYS", 100_000)?,
            grpc_streams: count("BENCH_GRPC_STREAMS", 64)?,
            grpc_connections: count("BENCH_GRPC_CONNECTIONS", 2)?,
            keep_tmp: text("BENCH_KEEP_TMP", "0") == "1",
            policy_fields: text("BENCH_POLICY", r#""rate":1000000,"max_permits":1000000000"#),
            keyed_policy_fields: text(
                "BENCH_KEYED_POLICY",
                r#""rate":0.01,"max_permits":1000000000"#,
            ),
            server_bin: path("BENCH_BIN", dir.join("ratekeeper")),
            bare_bin: path("BENCH_BARE_BIN", dir.join("examples/bare_acquire")),
            cost_bin: path("BENCH_COST_BIN", dir.join("examples/script_cost")),
            sketch_bin: path("BENCH_SKETCH_BIN", dir.join("examples/top_keys_memory")),
            root,
        };
        ensure!(
            knobs.connections >= knobs.threads,
            "BENCH_CONNECTIONS must be at least BENCH_THREADS"
        );
        ensure!(
            knobs.keys >= knobs.threads && FEW_KEYS >= knobs.threads,
            "BENCH_KEYS must be at least BENCH_THREADS (each thread walks its own keys)"
        );
        ensure!(
            knobs.server_bin.is_file(),
            "no executable {} (build it, or point BENCH_BIN at one)",
            knobs.server_bin.display()
        );
        for script in [
            "acquire_one.lua",
            "acquire_many.lua",
            "acquire_keyed.lua",
            "acquire_all.lua",
        ] {
            ensure!(knobs.bench_file(script).is_file(), "missing bench/{script}");
        }
        Ok(knobs)
    }

    pub fn bench_file(&self, name: &str) -> PathBuf {
        self.root.join("bench").join(name)
    }
}

fn text(var: &str, default: &str) -> String {
    std::env::var(var).unwrap_or_else(|_| default.to_owned())
}

/// A positive integer knob.
fn count(var: &str, default: usize) -> Result<usize> {
    let value = text(var, &default.to_string());
    match value.parse::<usize>() {
        Ok(n) if n > 0 => Ok(n),
        _ => bail!("{var} must be a positive integer (got '{value}')"),
    }
}

/// Seconds of a wrk duration (`10s`, `2m`, `1h`, `30`).
pub fn seconds(duration: &str) -> Option<u64> {
    let (number, unit) = match duration.char_indices().last()? {
        (i, c @ ('s' | 'm' | 'h')) => (&duration[..i], c),
        _ => (duration, 's'),
    };
    if number.is_empty() || !number.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n: u64 = number.parse().ok()?;
    Some(match unit {
        'h' => n * 3600,
        'm' => n * 60,
        _ => n,
    })
}

#[cfg(test)]
mod tests {
    use super::seconds;

    #[test]
    fn durations_read_as_wrk_reads_them() {
        assert_eq!(seconds("10s"), Some(10));
        assert_eq!(seconds("2m"), Some(120));
        assert_eq!(seconds("1h"), Some(3600));
        assert_eq!(seconds("30"), Some(30));
        assert_eq!(seconds("0"), Some(0));
        assert_eq!(seconds("s"), None);
        assert_eq!(seconds("1.5s"), None);
        assert_eq!(seconds(""), None);
    }
}
