//! An envoyproxy/ratelimit config (YAML: a `domain` and its nested `descriptors`) made into
//! a ratekeeper policy file (`ratekeeper policies import-envoy`): one policy per
//! descriptor with a `rate_limit`, declaring the descriptor's path as its pattern, so that
//! the same gateway descriptors reach the same limits.
//!
//! Envoy's ratelimit counts fixed windows, so a limit becomes a `fixed_window` policy with
//! the unit as its window and `requests_per_unit` as its `max_permits`; units longer than a
//! day (week, month = 30 days, year = 365 days, as envoyproxy/ratelimit defines them) are
//! longer than any ratekeeper window, and become a token bucket holding the unit's requests
//! and refilling them over the unit. `unlimited` becomes a disabled policy (granted without
//! counting, and still found before a bare sibling), `shadow_mode` the shadow mode, a limit
//! of 0 the mode `block` (every request denied). A wildcard value stays a wildcard entry
//! (one bucket per matching value), written `shared key=val*` with `share_threshold: true`
//! (one bucket for them all). `replaces` names other rate limits of the domain by their
//! `name`, which become the pattern's `replaces` (by the names of their policies). What has
//! no equivalent (`quota_mode`, `shadow_mode` on a limit of 0) is refused with its line,
//! never converted into something else.

mod convert;
mod leaf;
mod tree;

use crate::domain::AppSlug;

use super::format::AppDocument;

/// One error of a config: where (the file, its document from 1, the line) and why.
#[derive(Debug, Clone, PartialEq)]
pub struct EnvoyError {
    pub document: usize,
    pub line: usize,
    pub message: String,
}

/// Every error found, each with its file's name.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{}", .0.iter().map(|(file, e)| format!("{file}: document {}, line {}: {}", e.document, e.line, e.message)).collect::<Vec<_>>().join("\n"))]
pub struct EnvoyErrors(pub Vec<(String, EnvoyError)>);

/// The policy file of the configs `files` (each a name and its text; a text may hold
/// several YAML documents, one domain each), owned by `owner` and allowed to `allowed`
/// (the owner alone when empty).
pub fn from_envoy(
    files: &[(String, String)],
    owner: &str,
    allowed: &[String],
) -> Result<AppDocument, EnvoyErrors> {
    let refuse = |message: String| {
        EnvoyErrors(vec![(
            "--app/--allow".to_owned(),
            EnvoyError {
                document: 0,
                line: 0,
                message,
            },
        )])
    };
    let owner = AppSlug::parse_field("--app", owner).map_err(|e| refuse(e.to_string()))?;
    let allowed = if allowed.is_empty() {
        vec![owner.to_string()]
    } else {
        allowed
            .iter()
            .map(|a| AppSlug::parse_field("--allow", a).map(|s| s.to_string()))
            .collect::<Result<_, _>>()
            .map_err(|e| refuse(e.to_string()))?
    };
    convert::convert(files, &owner, &allowed)
}
