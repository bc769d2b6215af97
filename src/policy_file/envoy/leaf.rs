//! A converted descriptor (`Leaf`): the policy it becomes, and a name for it.

use std::collections::HashSet;

use crate::domain::DescriptorEntry;
use crate::policy_file::format::{FileDescriptor, FilePolicy};
use crate::policy_file::units::Amount;

use super::EnvoyError;

/// The longest unit a fixed window can be: a day.
const LONGEST_WINDOW_S: i64 = 86_400;

pub(super) enum Limit {
    Unlimited,
    /// `requests` per unit; 0 denies every request (a blocked policy).
    Every {
        requests: i64,
        unit: (&'static str, i64),
    },
}

impl Limit {
    /// A limit of 0: nothing passes.
    pub(super) fn blocks(&self) -> bool {
        matches!(self, Self::Every { requests: 0, .. })
    }
}

/// One descriptor with a rate limit: the policy it becomes.
pub(super) struct Leaf {
    pub(super) domain: String,
    pub(super) path: Vec<DescriptorEntry>,
    pub(super) limit: Limit,
    pub(super) shadow: bool,
    pub(super) name: Option<String>,
    /// The `name`s of the rate limits it replaces, each with its line.
    pub(super) replaces: Vec<(String, usize)>,
    pub(super) document: usize,
    pub(super) line: usize,
}

impl Leaf {
    pub(super) fn error(&self, message: String) -> EnvoyError {
        EnvoyError {
            document: self.document,
            line: self.line,
            message,
        }
    }

    pub(super) fn policy(&self, taken: &mut HashSet<String>, allowed: &[String]) -> FilePolicy {
        let entries: Vec<String> = self.path.iter().map(ToString::to_string).collect();
        let keyed = self.path.iter().any(DescriptorEntry::keys_bucket);
        let path_name = format!("{}/{}", self.domain, entries.join("/"));
        let name = unique_name(self.name.as_deref().unwrap_or(&path_name), taken);
        let (algorithm, rate, max_permits, window, what) = match &self.limit {
            Limit::Unlimited => (
                "fixed_window",
                None,
                1,
                Some(Amount::Text("1s".into())),
                "unlimited: granted without counting (disabled)".to_owned(),
            ),
            // Blocked: the window keeps the unit, which a gateway sees in `current_limit`.
            Limit::Every {
                requests: 0,
                unit: (unit, seconds),
            } => (
                "fixed_window",
                None,
                1,
                Some(window_of(unit, *seconds)),
                format!("0 per {unit}: every request denied (blocked)"),
            ),
            Limit::Every {
                requests,
                unit: (unit, seconds),
            } if *seconds <= LONGEST_WINDOW_S => (
                "fixed_window",
                None,
                *requests,
                Some(window_of(unit, *seconds)),
                format!("{requests} per {unit}"),
            ),
            Limit::Every {
                requests,
                unit: (unit, seconds),
            } => (
                "token_bucket",
                Some(Amount::Number(*requests as f64 / *seconds as f64)),
                *requests,
                None,
                format!(
                    "{requests} per {unit} (a token bucket refilling them over the {unit}: windows are a day at most)"
                ),
            ),
        };
        let description = format!(
            "Imported from envoyproxy/ratelimit, domain {}: {}, {what}",
            self.domain,
            entries.join(", ")
        );
        FilePolicy {
            name,
            algorithm: Some(algorithm.to_owned()),
            rate,
            max_permits,
            window,
            lease: None,
            scope: Some(if keyed { "per_key" } else { "global" }.to_owned()),
            allowed_apps: Some(allowed.to_vec()),
            failure_mode: None,
            enabled: Some(!matches!(self.limit, Limit::Unlimited)),
            mode: Some(
                if self.limit.blocks() {
                    "block"
                } else if self.shadow {
                    "shadow"
                } else {
                    "enforce"
                }
                .to_owned(),
            ),
            description: Some(description.chars().take(1000).collect()),
            overrides: Vec::new(),
            descriptors: vec![FileDescriptor {
                domain: Some(self.domain.clone()),
                entries,
                replaces: Vec::new(),
            }],
        }
    }
}

/// The window of a blocked limit: its unit, or a day for the longer units (a window is a
/// day at most; nothing is counted in it anyway).
fn window_of(unit: &str, seconds: i64) -> Amount {
    if seconds <= LONGEST_WINDOW_S {
        Amount::Text(format!("1{}", &unit[..1]))
    } else {
        Amount::Text("1d".into())
    }
}

/// `wanted` in the policy-name charset (`[A-Za-z0-9][A-Za-z0-9._:/-]{0,127}`): `=` as `:`,
/// any other character outside it as `-`, and a number added if another policy took it.
fn unique_name(wanted: &str, taken: &mut HashSet<String>) -> String {
    let mut base: String = wanted
        .chars()
        .map(|c| match c {
            '=' => ':',
            c if c.is_ascii_alphanumeric() || "._:/-".contains(c) => c,
            _ => '-',
        })
        .collect();
    if !base.starts_with(|c: char| c.is_ascii_alphanumeric()) {
        base.insert_str(0, "envoy-");
    }
    base.truncate(128);
    let mut name = base.clone();
    let mut n = 2;
    while !taken.insert(name.clone()) {
        let suffix = format!("-{n}");
        let mut shorter = base.clone();
        shorter.truncate(128 - suffix.len());
        name = format!("{shorter}{suffix}");
        n += 1;
    }
    name
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_fit_the_charset_and_are_unique() {
        let mut taken = HashSet::new();
        assert_eq!(
            unique_name("mongo_cps/database=users", &mut taken),
            "mongo_cps/database:users"
        );
        assert_eq!(
            unique_name("mongo_cps/database=users", &mut taken),
            "mongo_cps/database:users-2"
        );
        assert_eq!(unique_name("_x/a b=c@d", &mut taken), "envoy-_x/a-b:c-d");
        let long = unique_name(&"a".repeat(300), &mut taken);
        assert_eq!(long.len(), 128);
        assert_eq!(unique_name(&"a".repeat(300), &mut taken).len(), 128);
    }
}
