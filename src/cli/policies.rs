//! `ratekeeper policies plan|apply FILE`: a policy file planned or applied against a
//! server's `POST /api/v1/apply` (with `--server`), or against the database directly
//! through the same control calls the API handler makes.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, anyhow, bail};
use clap::Args;
use serde_json::Value;

use crate::auth::Actor;
use crate::config::Settings;
use crate::control::{ApplyError, ControlError};
use crate::policy_file;
use crate::startup::Core;

use ratekeeper_client::{AdminClient, ApplyOptions, Error as ClientError, Problem};

use super::server_client::{self, CA_FILE_VARIABLE};

/// The environment variable holding the access token for `--server`.
pub const TOKEN_VARIABLE: &str = "RATEKEEPER_TOKEN";

/// The environment variable that gives `--server` (a CI's secret, say).
pub const SERVER_VARIABLE: &str = "RATEKEEPER_SERVER";

#[derive(Debug, Args)]
pub struct FileTarget {
    /// The policy file (YAML or JSON), or `-` for standard input.
    pub file: String,
    /// Also delete the policies of the file's applications that it does not list.
    #[arg(long)]
    pub prune: bool,
    /// A ratekeeper server's base URL (e.g. https://ratekeeper.internal); the access
    /// token is read from RATEKEEPER_TOKEN. Without it, the database is used directly.
    #[arg(long, value_name = "URL", env = SERVER_VARIABLE)]
    pub server: Option<String>,
    /// With an https:// --server: trust only the CA certificates in this PEM file (a
    /// private CA) instead of the system's.
    #[arg(long, value_name = "PATH", env = CA_FILE_VARIABLE)]
    pub ca_file: Option<PathBuf>,
}

/// Plans (`apply` false) or applies the file, then prints the plan on stdout.
pub async fn run(target: FileTarget, settings: Settings, apply: bool) -> anyhow::Result<()> {
    if let (None, Some(path)) = (&target.server, &target.ca_file) {
        bail!(
            "--ca-file {} (or {CA_FILE_VARIABLE}) is for --server; without it the database is used directly",
            path.display()
        );
    }
    let text = read_file(&target.file)?;
    let plan = match &target.server {
        Some(server) => {
            let ca_file = target.ca_file.as_deref();
            remote(server, ca_file, &text, target.prune, apply).await?
        }
        None => direct(&settings, &text, target.prune, apply).await?,
    };
    let mut out = std::io::stdout().lock();
    out.write_all(render(&plan, apply).as_bytes())?;
    Ok(())
}

fn read_file(path: &str) -> anyhow::Result<String> {
    if path == "-" {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .context("cannot read the policy file from standard input")?;
        return Ok(text);
    }
    std::fs::read_to_string(path).with_context(|| format!("cannot read the policy file {path}"))
}

/// Through the database, as the operator (the CLI's other commands act so too); the
/// changed policies are pushed to Redis after the commit, as the server does.
async fn direct(
    settings: &Settings,
    text: &str,
    prune: bool,
    apply: bool,
) -> anyhow::Result<Value> {
    let file = policy_file::parse_file(text)
        .map_err(|e| anyhow!("invalid policy file:\n{e}"))?
        .desired();
    let core = Core::build(settings).await?;
    let actor = Actor::operator();
    let plan = if apply {
        core.control.apply_file(&actor, &file, prune, None).await
    } else {
        core.control.plan_file(&actor, &file, prune).await
    };
    let plan = plan.map_err(|e| match e {
        ApplyError::Control(ControlError::Invalid(errors)) => {
            anyhow!("invalid policy file: {errors}")
        }
        ApplyError::Control(ControlError::Internal(cause)) => cause,
        other => anyhow!("{other}"),
    })?;
    Ok(serde_json::to_value(plan)?)
}

/// Through the server: the dry run, then (to apply) exactly that plan by its `plan_id`,
/// so that a change made in between is refused (409) rather than overwritten.
async fn remote(
    server: &str,
    ca_file: Option<&Path>,
    text: &str,
    prune: bool,
    apply: bool,
) -> anyhow::Result<Value> {
    let token = std::env::var(TOKEN_VARIABLE).ok().filter(|t| !t.is_empty());
    let Some(token) = token else {
        bail!(
            "--server needs an access token in the {TOKEN_VARIABLE} environment variable (make one with `ratekeeper token create NAME` or in the console)"
        );
    };
    let client = server_client::for_server(server, &token, ca_file)?;
    let dry_run = ApplyOptions {
        dry_run: true,
        prune,
        plan_id: None,
    };
    let plan = send(&client, text, &dry_run).await?;
    if !apply {
        return Ok(plan);
    }
    let plan_id = plan["plan_id"]
        .as_str()
        .ok_or_else(|| anyhow!("the server's plan has no plan_id"))?
        .to_owned();
    let exactly = ApplyOptions {
        dry_run: false,
        prune,
        plan_id: Some(plan_id),
    };
    send(&client, text, &exactly).await
}

/// One `POST /api/v1/apply`: a dry run without `plan_id`, an apply with it.
async fn send(client: &AdminClient, text: &str, options: &ApplyOptions) -> anyhow::Result<Value> {
    let endpoint = client.apply_url();
    client.apply(text, options).await.map_err(|e| match e {
        ClientError::Transport(e) => server_client::unreachable(e, endpoint),
        ClientError::Unexpected(problem) if (200..300).contains(&problem.status) => anyhow!(
            "the answer of {endpoint} is not a plan: {}",
            problem.detail.unwrap_or_default()
        ),
        other => match other.problem() {
            Some(problem) => anyhow!(
                "the server refused the file ({}): {}",
                status_text(problem.status),
                problem_text(problem)
            ),
            None => anyhow::Error::new(other),
        },
    })
}

/// A status as `403 Forbidden`.
fn status_text(status: u16) -> String {
    match reqwest::StatusCode::from_u16(status) {
        Ok(code) => code.to_string(),
        Err(_) => status.to_string(),
    }
}

/// A problem as plain lines: its detail (else its title), then each field error.
fn problem_text(problem: &Problem) -> String {
    let mut text = problem
        .detail
        .clone()
        .unwrap_or_else(|| problem.title.clone());
    for error in &problem.errors {
        text.push_str(&format!("\n  {}: {}", error.field, error.message));
    }
    text
}

/// The plan, one line per policy and a summary line.
fn render(plan: &Value, applied: bool) -> String {
    let mut text = String::new();
    let mut counts = [0usize; 4];
    for policy in plan["policies"].as_array().into_iter().flatten() {
        let name = policy["name"].as_str().unwrap_or("?");
        let line = match policy["action"].as_str().unwrap_or("") {
            "create" => {
                counts[0] += 1;
                format!(
                    "+ create {name} ({})",
                    policy["app"].as_str().unwrap_or("?")
                )
            }
            "update" => {
                counts[1] += 1;
                let changes: Vec<String> = policy["changes"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|c| {
                        let field = c["field"].as_str().unwrap_or("?");
                        format!("{field} {} -> {}", shown(&c["before"]), shown(&c["after"]))
                    })
                    .collect();
                format!("~ update {name}: {}", changes.join(", "))
            }
            "delete" => {
                counts[2] += 1;
                format!("- delete {name}")
            }
            _ => {
                counts[3] += 1;
                format!("= unchanged {name}")
            }
        };
        text.push_str(&line);
        text.push('\n');
    }
    let [create, update, delete, unchanged] = counts;
    let verb = if applied { "Applied" } else { "Plan" };
    text.push_str(&format!(
        "{verb}: {create} to create, {update} to update, {delete} to delete, {unchanged} unchanged.\n"
    ));
    text
}

/// A field's value as the file writes it; `(none)` when absent.
fn shown(value: &Value) -> String {
    match value {
        Value::Null => "(none)".to_owned(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}
