//! Child processes and the temporary directory, each cleaned up when dropped: a run that
//! fails or is interrupted (the future of the run dropped) leaves nothing behind. Only
//! what this run started is ever stopped, by its own pid.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use tokio::process::{Child, Command};

/// A long-running child (Redis, the server, the reference handlers): SIGKILLed if dropped
/// while running; [`Service::stop`] asks it to stop first.
pub struct Service {
    name: &'static str,
    child: Child,
    pid: u32,
}

impl Service {
    /// Starts `command` with its stdout and stderr to `log`.
    pub fn start(name: &'static str, mut command: Command, log: &Path) -> Result<Self> {
        let out =
            std::fs::File::create(log).with_context(|| format!("creating {}", log.display()))?;
        let err = out.try_clone().context("cloning a log file handle")?;
        let child = command
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("starting {name}"))?;
        let pid = child.id().with_context(|| format!("{name} has no pid"))?;
        Ok(Self { name, child, pid })
    }

    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// `Some(exit status)` once it has ended.
    pub fn ended(&mut self) -> Option<String> {
        match self.child.try_wait() {
            Ok(Some(status)) => Some(status.to_string()),
            Ok(None) => None,
            Err(e) => Some(format!("unknown ({e})")),
        }
    }

    /// Fails when it has ended, saying what it was doing.
    pub fn check_alive(&mut self, during: &str) -> Result<()> {
        match self.ended() {
            Some(status) => bail!("{} exited {during} ({status})", self.name),
            None => Ok(()),
        }
    }

    /// SIGTERM, then SIGKILL if it has not ended within `grace`.
    pub async fn stop(mut self, grace: Duration) {
        if self.ended().is_some() {
            return;
        }
        // No libc here (no unsafe): kill(1) sends the signal, to this child's pid only.
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(self.pid.to_string())
            .status()
            .await;
        if tokio::time::timeout(grace, self.child.wait())
            .await
            .is_err()
        {
            crate::log!(
                "{} did not stop within {grace:?} of SIGTERM; sending SIGKILL",
                self.name
            );
            let _ = self.child.kill().await;
        }
    }
}

/// `program` with `args`.
pub fn command<I, S>(program: &str, args: I) -> Command
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    let mut command = Command::new(program);
    command.args(args);
    command
}

/// A command run to its end within `limit` (killed if the limit passes or the run is
/// dropped): its exit success, stdout and stderr.
pub async fn run(mut command: Command, limit: Duration) -> Result<Output> {
    let program = format!("{:?}", command.as_std().get_program());
    let output = command.stdin(Stdio::null()).kill_on_drop(true).output();
    let output = tokio::time::timeout(limit, output)
        .await
        .with_context(|| format!("{program} did not finish within {limit:?}"))?
        .with_context(|| format!("running {program}"))?;
    Ok(Output {
        success: output.status.success(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    })
}

/// What [`run`] gives back.
pub struct Output {
    pub success: bool,
    pub stdout: String,
    pub stderr: String,
}

impl Output {
    /// Its last lines of stderr (else stdout), for an error message.
    pub fn tail(&self) -> String {
        let text = if self.stderr.trim().is_empty() {
            &self.stdout
        } else {
            &self.stderr
        };
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }
}

/// The run's temporary directory: removed when dropped, unless asked to keep it, or the
/// run failed and logs are in it.
pub struct TempDir {
    path: PathBuf,
    keep: bool,
    failed: bool,
}

impl TempDir {
    pub fn new(keep: bool) -> Result<Self> {
        let stamp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default();
        let path =
            std::env::temp_dir().join(format!("ratekeeper-bench.{}.{stamp}", std::process::id()));
        std::fs::create_dir(&path).with_context(|| format!("creating {}", path.display()))?;
        Ok(Self {
            path,
            keep,
            failed: true,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn join(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }

    /// The run got to its end: nothing in the directory is needed to find out why it failed.
    pub fn succeeded(&mut self) {
        self.failed = false;
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let has_logs = std::fs::read_dir(&self.path)
            .map(|entries| {
                entries
                    .flatten()
                    .any(|e| e.path().extension().is_some_and(|x| x == "log"))
            })
            .unwrap_or(false);
        if self.keep || (self.failed && has_logs) {
            crate::log!("temporary files kept in {}", self.path.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

/// The first free loopback port from `from` (within 500), never `skip`. As redis-server
/// and actix bind (with SO_REUSEADDR, which std's listener sets): a port in TIME_WAIT is
/// free, a listening one is not.
pub fn free_port(from: u16, skip: u16) -> Result<u16> {
    (from..from.saturating_add(500))
        .filter(|&p| p != skip)
        .find(|&p| std::net::TcpListener::bind(("127.0.0.1", p)).is_ok())
        .with_context(|| format!("no free loopback port from {from}"))
}
