//! The ratekeeper under test: its CLI set-up (migrate, an admin, a personal access token)
//! on a temporary SQLite database, then `ratekeeper serve` on a free loopback port from
//! 18080, on the private Redis.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use tokio::io::AsyncWriteExt;
use tokio::process::Command;

use crate::knobs::Knobs;
use crate::private_redis::{PrivateRedis, SHARED_PORT};
use crate::procs::{self, Service, TempDir};

/// `RATEKEEPER_REDIS_PREFIX` of the server under test.
pub const PREFIX: &str = "bench";
const ADMIN: &str = "bench";
const ADMIN_PASSWORD: &str = "bench-password-123";

pub struct Server {
    pub base: String,
    pub port: u16,
    /// `http://127.0.0.1:PORT` of its gRPC service (Envoy's rate limit service).
    pub grpc: String,
    pub service: Service,
    /// The admin's personal access token.
    pub token: String,
}

/// The server's environment: the variables it is given; any other `RATEKEEPER_*` of the
/// bench's own environment reaches it as well.
fn server_command(
    bin: &Path,
    tmp: &TempDir,
    redis: &PrivateRedis,
    port: u16,
    grpc_port: u16,
) -> Command {
    let mut command = Command::new(bin);
    command
        .env(
            "RATEKEEPER_DATABASE_URL",
            format!("sqlite://{}", tmp.join("bench.db").display()),
        )
        .env("RATEKEEPER_REDIS_URL", redis.url())
        .env("RATEKEEPER_LISTEN", format!("127.0.0.1:{port}"))
        .env("RATEKEEPER_GRPC_LISTEN", format!("127.0.0.1:{grpc_port}"))
        .env("RATEKEEPER_REDIS_PREFIX", PREFIX)
        .env("RUST_LOG", "warn");
    command
}

impl Server {
    pub async fn start(knobs: &Knobs, tmp: &TempDir, redis: &PrivateRedis) -> Result<Self> {
        let port = procs::free_port(18080, SHARED_PORT)?;
        let grpc_port = procs::free_port(port + 1, SHARED_PORT)?;
        // An empty file is a valid new SQLite database.
        std::fs::write(tmp.join("bench.db"), b"").context("creating the SQLite database")?;
        let cli = |args: &[&str]| {
            let mut command = server_command(&knobs.server_bin, tmp, redis, port, grpc_port);
            command.args(args);
            command
        };
        crate::log!("ratekeeper migrate, then the admin '{ADMIN}' and a personal access token");
        let migrate = procs::run(cli(&["migrate"]), Duration::from_secs(300)).await?;
        if !migrate.success {
            bail!("ratekeeper migrate failed: {}", migrate.tail());
        }
        create_admin(cli(&["user", "create", ADMIN, "--admin"])).await?;
        let token_out =
            procs::run(cli(&["token", "create", ADMIN]), Duration::from_secs(120)).await?;
        if !token_out.success {
            bail!("ratekeeper token create failed: {}", token_out.tail());
        }
        // The token is alone on its line; the last non-empty line in case anything else
        // reached stdout.
        let token = token_out
            .stdout
            .lines()
            .rfind(|l| !l.trim().is_empty())
            .map(|l| l.trim().to_owned())
            .context("ratekeeper token create printed no token")?;

        let base = format!("http://127.0.0.1:{port}");
        crate::log!("starting ratekeeper on {base}");
        let service = Service::start("ratekeeper", cli(&["serve"]), &tmp.join("server.log"))?;
        let mut server = Self {
            base,
            port,
            grpc: format!("http://127.0.0.1:{grpc_port}"),
            service,
            token,
        };
        let started = Instant::now();
        let http = reqwest::Client::new();
        loop {
            let up = http
                .get(format!("{}/healthz", server.base))
                .timeout(Duration::from_secs(2))
                .send()
                .await
                .is_ok_and(|r| r.status() == 200);
            if up {
                break;
            }
            server.service.check_alive("during start-up")?;
            if started.elapsed() > Duration::from_secs(30) {
                bail!("GET /healthz did not answer 200 within 30 s");
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        crate::log!(
            "ratekeeper is up after {:.1} s",
            started.elapsed().as_secs_f64()
        );
        Ok(server)
    }
}

/// `ratekeeper user create ... --admin`, the password on stdin.
async fn create_admin(mut command: Command) -> Result<()> {
    let mut child = command
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .context("starting ratekeeper user create")?;
    let mut stdin = child.stdin.take().context("user create's stdin")?;
    stdin
        .write_all(format!("{ADMIN_PASSWORD}\n").as_bytes())
        .await?;
    drop(stdin);
    let out = tokio::time::timeout(Duration::from_secs(120), child.wait_with_output())
        .await
        .context("ratekeeper user create did not finish within 120 s")??;
    if !out.status.success() {
        bail!(
            "ratekeeper user create failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(())
}
