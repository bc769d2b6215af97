//! The tools the run drives, installed with apt-get when missing (`apt-get update` only if
//! an install fails).

use std::path::Path;
use std::time::Duration;

use anyhow::{Result, bail};
use tokio::process::Command;

use crate::procs;

const INSTALL_LIMIT: Duration = Duration::from_secs(600);

/// Whether `command` is on the PATH.
pub fn on_path(command: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|paths| {
        std::env::split_paths(&paths).any(|dir| Path::new(&dir).join(command).is_file())
    })
}

/// Makes sure each (command, package) is there, installing the packages of missing ones.
pub async fn ensure(tools: &[(&str, &str)]) -> Result<()> {
    let mut updated = false;
    for &(command, package) in tools {
        if on_path(command) {
            continue;
        }
        if !on_path("apt-get") {
            bail!("{command} is missing and apt-get is not available; install {package}");
        }
        crate::log!("installing {package} (for {command})");
        if !install(package).await? {
            if !updated {
                crate::log!("apt-get install {package} failed; running apt-get update first");
                let update = procs::run(apt(&["update"]).await, INSTALL_LIMIT).await?;
                if !update.success {
                    bail!("apt-get update failed: {}", update.tail());
                }
                updated = true;
            }
            if !install(package).await? {
                bail!("apt-get install {package} failed");
            }
        }
        if !on_path(command) {
            bail!("{command} still missing after installing {package}");
        }
    }
    Ok(())
}

async fn install(package: &str) -> Result<bool> {
    let mut command = apt(&["install", "-y", package]).await;
    command.env("DEBIAN_FRONTEND", "noninteractive");
    Ok(procs::run(command, INSTALL_LIMIT).await?.success)
}

/// apt-get with `args`, through `sudo -n` when not root and sudo is there.
async fn apt(args: &[&str]) -> Command {
    let root = procs::run(procs::command("id", ["-u"]), Duration::from_secs(5))
        .await
        .is_ok_and(|out| out.stdout.trim() == "0");
    let mut command = if !root && on_path("sudo") {
        let mut sudo = Command::new("sudo");
        sudo.args(["-n", "env", "DEBIAN_FRONTEND=noninteractive", "apt-get"]);
        sudo
    } else {
        Command::new("apt-get")
    };
    command.args(args);
    command
}
