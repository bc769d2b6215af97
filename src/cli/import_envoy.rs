//! `ratekeeper policies import-envoy FILE...`: envoyproxy/ratelimit configs printed as a
//! ratekeeper policy file (YAML, as `policies export` writes it) on stdout, to review and
//! then `policies plan|apply`. Nothing is read from or written to a database or server.

use std::io::{Read, Write};

use anyhow::{Context, bail};
use clap::Args;

use crate::policy_file;

#[derive(Debug, Args)]
pub struct ImportArgs {
    /// The config files (YAML; several documents in one file are several domains), or
    /// `-` for standard input.
    #[arg(required = true)]
    pub files: Vec<String>,
    /// The application that owns the policies.
    #[arg(long, value_name = "SLUG")]
    pub app: String,
    /// The applications allowed to use them, comma-separated [default: the owner].
    #[arg(long, value_name = "SLUG,...", value_delimiter = ',')]
    pub allow: Vec<String>,
}

pub fn run(args: &ImportArgs) -> anyhow::Result<()> {
    let mut files = Vec::with_capacity(args.files.len());
    for path in &args.files {
        files.push((path.clone(), read(path)?));
    }
    let document = match policy_file::from_envoy(&files, &args.app, &args.allow) {
        Ok(document) => document,
        Err(errors) => bail!("the Envoy config cannot be converted:\n{errors}"),
    };
    let yaml = serde_norway::to_string(&document).context("cannot write the policy file")?;
    std::io::stdout().lock().write_all(yaml.as_bytes())?;
    Ok(())
}

fn read(path: &str) -> anyhow::Result<String> {
    if path == "-" {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .context("cannot read the Envoy config from standard input")?;
        return Ok(text);
    }
    std::fs::read_to_string(path).with_context(|| format!("cannot read the Envoy config {path}"))
}
