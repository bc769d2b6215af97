//! The walk over an Envoy config's tree: each descriptor with a `rate_limit` becomes a
//! policy whose pattern is the path of keys (and values) down to it.

use std::collections::{HashMap, HashSet};

use crate::domain::{
    AppSlug, DescriptorEntry, MAX_CAPACITY, MAX_DESCRIPTOR_ENTRIES, SHARED_PREFIX,
};
use crate::policy_file::caps::{self, Caps, Refusal};
use crate::policy_file::checks::checked;
use crate::policy_file::format::AppDocument;

use super::leaf::{Leaf, Limit};
use super::tree::{self, Node, Value};
use super::{EnvoyError, EnvoyErrors};

/// A unit of envoyproxy/ratelimit, in seconds as it defines them.
const UNITS: [(&str, i64); 7] = [
    ("second", 1),
    ("minute", 60),
    ("hour", 3_600),
    ("day", 86_400),
    ("week", 7 * 86_400),
    ("month", 30 * 86_400),
    ("year", 365 * 86_400),
];

/// A policy file's caps, but deep enough for 8 nested descriptors (a list and a mapping
/// each, and a rate limit) and one more, which is then refused by name.
const ENVOY_CAPS: Caps = Caps {
    depth: 4 * MAX_DESCRIPTOR_ENTRIES,
    ..Caps::FILE
};

pub(super) fn convert(
    files: &[(String, String)],
    owner: &AppSlug,
    allowed: &[String],
) -> Result<AppDocument, EnvoyErrors> {
    let mut errors: Vec<(String, EnvoyError)> = Vec::new();
    let mut leaves: Vec<(usize, Leaf)> = Vec::new();
    let mut domains: HashSet<String> = HashSet::new();
    for (f, (file, text)) in files.iter().enumerate() {
        if let Err(refusal) = caps::check(text, ENVOY_CAPS) {
            errors.push((file.clone(), refused(refusal)));
            continue;
        }
        let documents = match tree::documents(text, 0) {
            Ok(documents) => documents,
            Err(e) => {
                errors.push((file.clone(), e));
                continue;
            }
        };
        for (d, root) in documents.iter().enumerate() {
            let mut walk = Walk {
                document: d + 1,
                errors: Vec::new(),
                leaves: Vec::new(),
            };
            walk.root(root, &mut domains);
            errors.extend(walk.errors.into_iter().map(|e| (file.clone(), e)));
            leaves.extend(walk.leaves.into_iter().map(|l| (f, l)));
        }
    }
    let mut document = AppDocument {
        app: owner.to_string(),
        policies: Vec::new(),
    };
    let mut taken = HashSet::new();
    let mut policies: Vec<_> = leaves
        .iter()
        .map(|(_, leaf)| leaf.policy(&mut taken, allowed))
        .collect();
    // A rate limit's `name` (unique in its domain) is its policy's name, once made unique.
    let by_name: HashMap<(&str, &str), String> = leaves
        .iter()
        .zip(&policies)
        .filter_map(|((_, leaf), p)| {
            Some((
                (leaf.domain.as_str(), leaf.name.as_deref()?),
                p.name.clone(),
            ))
        })
        .collect();
    for ((f, leaf), policy) in leaves.iter().zip(policies.iter_mut()) {
        for (name, line) in &leaf.replaces {
            match by_name.get(&(leaf.domain.as_str(), name.as_str())) {
                Some(replaced) => policy.descriptors[0].replaces.push(replaced.clone()),
                None => errors.push((
                    files[*f].0.clone(),
                    EnvoyError {
                        document: leaf.document,
                        line: *line,
                        message: format!(
                            "`replaces` names `{name}`, which no rate limit of domain {} is called",
                            leaf.domain
                        ),
                    },
                )),
            }
        }
    }
    for ((f, leaf), policy) in leaves.iter().zip(policies) {
        // The same checks as a policy file's: what is printed applies.
        if let Err(found) = checked(&document, &policy) {
            for (field, message) in found {
                let e = leaf.error(format!("the policy {}: {field} {message}", policy.name));
                errors.push((files[*f].0.clone(), e));
            }
        }
        document.policies.push(policy);
    }
    if errors.is_empty() {
        Ok(document)
    } else {
        Err(EnvoyErrors(errors))
    }
}

fn refused(refusal: Refusal) -> EnvoyError {
    match refusal {
        Refusal::TooLarge { bytes, cap } => EnvoyError {
            document: 1,
            line: 1,
            message: format!("is {bytes} bytes, more than the {cap} a file may be"),
        },
        Refusal::At {
            document,
            line,
            message,
        } => EnvoyError {
            document,
            line,
            message,
        },
    }
}

/// A `rate_limit` mapping read: its limit, its `name`, and the names it replaces (each
/// with its line).
struct RateLimitParts {
    limit: Limit,
    name: Option<String>,
    replaces: Vec<(String, usize)>,
}

struct Walk {
    document: usize,
    errors: Vec<EnvoyError>,
    leaves: Vec<Leaf>,
}

impl Walk {
    fn error(&mut self, node: &Node, message: impl Into<String>) {
        self.errors.push(EnvoyError {
            document: self.document,
            line: node.line,
            message: message.into(),
        });
    }

    fn error_at(&mut self, line: usize, message: impl Into<String>) {
        self.errors.push(EnvoyError {
            document: self.document,
            line,
            message: message.into(),
        });
    }

    /// A mapping's pairs with text keys, each with its key's line (a nested mapping
    /// starts on its own first key's), or an error naming what it should be.
    fn fields<'a>(
        &mut self,
        node: &'a Node,
        what: &str,
    ) -> Option<Vec<(&'a str, usize, &'a Node)>> {
        let Value::Map(pairs) = &node.value else {
            self.error(node, format!("must be {what}"));
            return None;
        };
        let mut fields: Vec<(&str, usize, &Node)> = Vec::with_capacity(pairs.len());
        for (key, value) in pairs {
            match key.scalar() {
                Some(k) if fields.iter().any(|(seen, _, _)| *seen == k) => {
                    self.error(key, format!("`{k}` is given twice"))
                }
                Some(k) => fields.push((k, key.line, value)),
                None => self.error(key, "a key must be text"),
            }
        }
        Some(fields)
    }

    fn text(&mut self, node: &Node, field: &str) -> Option<String> {
        match node.scalar() {
            Some(_) if node.is_null() => None,
            Some(text) => Some(text.to_owned()),
            None => {
                self.error(node, format!("`{field}` must be text"));
                None
            }
        }
    }

    fn flag(&mut self, node: &Node, field: &str) -> bool {
        match node.scalar().map(str::to_ascii_lowercase).as_deref() {
            Some("true") => true,
            Some("false") => false,
            _ if node.is_null() => false,
            _ => {
                self.error(node, format!("`{field}` must be true or false"));
                false
            }
        }
    }

    fn root(&mut self, root: &Node, domains: &mut HashSet<String>) {
        if root.is_null() {
            return self.error(
                root,
                "is empty: an Envoy config has a `domain` and `descriptors`",
            );
        }
        let Some(fields) = self.fields(
            root,
            "an Envoy config: a mapping with `domain` and `descriptors`",
        ) else {
            return;
        };
        let mut domain = None;
        let mut descriptors = None;
        for (key, line, value) in fields {
            match key {
                "domain" => domain = self.text(value, "domain").map(|d| (d, value)),
                "descriptors" => descriptors = Some(value),
                other => self.error_at(
                    line,
                    format!("unknown field `{other}` (a config has `domain` and `descriptors`)"),
                ),
            }
        }
        let Some((domain, at)) = domain else {
            return self.error(root, "`domain` is required and must not be empty");
        };
        if domain.contains('=') || DescriptorEntry::parse_field("domain", &domain).is_err() {
            return self.error(
                at,
                "`domain` must be 1-64 characters of A-Z, a-z, 0-9 and _ . : -",
            );
        }
        if !domains.insert(domain.clone()) {
            return self.error(
                at,
                format!("the domain {domain} is configured a second time"),
            );
        }
        if let Some(list) = descriptors {
            self.descriptors(list, &domain, &[]);
        }
    }

    fn descriptors(&mut self, list: &Node, domain: &str, path: &[DescriptorEntry]) {
        if list.is_null() {
            return;
        }
        let Value::List(items) = &list.value else {
            return self.error(list, "`descriptors` must be a list");
        };
        let mut seen: Vec<DescriptorEntry> = Vec::new();
        for item in items {
            if let Some(entry) = self.descriptor(item, domain, path) {
                if seen.contains(&entry) {
                    self.error(
                        item,
                        format!("the descriptor {entry} is configured a second time at this level"),
                    );
                }
                seen.push(entry);
            }
        }
    }

    /// One descriptor (and those nested in it); its entry, when it has a valid one.
    fn descriptor(
        &mut self,
        node: &Node,
        domain: &str,
        path: &[DescriptorEntry],
    ) -> Option<DescriptorEntry> {
        let fields = self.fields(
            node,
            "a descriptor: a mapping with `key` and optional `value`, `rate_limit`, `descriptors`",
        )?;
        let (mut key, mut value, mut rate_limit, mut nested) = (None, None, None, None);
        let (mut shadow, mut share) = (false, None);
        for (field, line, v) in fields {
            match field {
                "key" => key = self.text(v, "key"),
                // Envoy reads an empty value as none: any value.
                "value" => {
                    value = self
                        .text(v, "value")
                        .filter(|v| !v.is_empty())
                        .map(|t| (t, v))
                }
                "rate_limit" => rate_limit = Some((v, line)),
                "descriptors" => nested = Some(v),
                "shadow_mode" => shadow = self.flag(v, "shadow_mode"),
                "quota_mode" => {
                    if self.flag(v, "quota_mode") {
                        self.error(v, "`quota_mode` has no ratekeeper equivalent");
                    }
                }
                "share_threshold" => share = Some((self.flag(v, field), v)),
                // Metrics of envoyproxy/ratelimit's own: nothing to convert.
                "detailed_metric" | "value_to_metric" => {
                    self.flag(v, field);
                }
                "metadata" => {}
                other => self.error_at(line, format!("unknown field `{other}` of a descriptor")),
            }
        }
        let Some(key) = key.filter(|k| !k.is_empty()) else {
            self.error(node, "a descriptor needs a `key`");
            return None;
        };
        // As envoyproxy/ratelimit: sharing applies to a wildcard value only.
        let shared = match share {
            Some((true, at)) if !value.as_ref().is_some_and(|(v, _)| v.contains('*')) => {
                self.error(
                    at,
                    "`share_threshold` applies to a wildcard value (one holding `*`) only",
                );
                return None;
            }
            Some((flag, _)) => flag,
            None => false,
        };
        let text = match &value {
            Some((v, _)) if shared => format!("{SHARED_PREFIX}{key}={v}"),
            Some((v, _)) => format!("{key}={v}"),
            None => key.clone(),
        };
        let entry = match DescriptorEntry::parse_field("entry", &text) {
            Ok(entry) if entry.key == key => entry,
            Ok(_) => {
                self.error(node, "a key must not contain `=`");
                return None;
            }
            Err(e) => {
                self.error(node, e.message);
                return None;
            }
        };
        let mut here = path.to_vec();
        here.push(entry.clone());
        if here.len() > MAX_DESCRIPTOR_ENTRIES {
            self.error(node, format!("descriptors nest deeper than {MAX_DESCRIPTOR_ENTRIES} entries, the most a pattern may have"));
            return Some(entry);
        }
        if let Some((limit_node, line)) = rate_limit
            && let Some(parts) = self.rate_limit(limit_node, line)
        {
            if shadow && parts.limit.blocks() {
                self.error_at(line, "`shadow_mode` on a limit of 0 has no ratekeeper equivalent: a blocked policy denies, a shadow one never does");
            }
            self.leaves.push(Leaf {
                domain: domain.to_owned(),
                path: here.clone(),
                limit: parts.limit,
                shadow,
                name: parts.name,
                replaces: parts.replaces,
                document: self.document,
                line,
            });
        }
        if let Some(list) = nested {
            self.descriptors(list, domain, &here);
        }
        Some(entry)
    }

    /// A `rate_limit` mapping; `at` is its key's line, where errors about it as a whole
    /// point.
    fn rate_limit(&mut self, node: &Node, at: usize) -> Option<RateLimitParts> {
        let fields = self.fields(
            node,
            "a rate limit: a mapping with `unit` and `requests_per_unit`, or `unlimited: true`",
        )?;
        let (mut unit, mut requests, mut unlimited, mut name) = (None, None, false, None);
        let mut replaces = Vec::new();
        for (field, line, v) in fields {
            match field {
                "unit" => unit = self.text(v, "unit").map(|u| (u, v)),
                "requests_per_unit" => requests = Some(v),
                "unlimited" => unlimited = self.flag(v, "unlimited"),
                "name" => name = self.text(v, "name"),
                "replaces" => replaces = self.replaces(v),
                other => self.error_at(line, format!("unknown field `{other}` of a rate limit")),
            }
        }
        let limit = self.limit(at, unit, requests, unlimited)?;
        Some(RateLimitParts {
            limit,
            name,
            replaces,
        })
    }

    /// `replaces: [{name: ...}, ...]`: the names, each with its line.
    fn replaces(&mut self, node: &Node) -> Vec<(String, usize)> {
        let items = match &node.value {
            Value::List(items) => items,
            _ if node.is_null() => return Vec::new(),
            _ => {
                self.error(node, "`replaces` must be a list of `- name: ...`");
                return Vec::new();
            }
        };
        let mut names = Vec::new();
        for item in items {
            let Some(fields) = self.fields(item, "a replaced limit: a mapping with `name`") else {
                continue;
            };
            let mut name = None;
            for (field, line, v) in fields {
                match field {
                    "name" => name = self.text(v, "name").map(|n| (n, v.line)),
                    other => {
                        self.error_at(line, format!("unknown field `{other}` of a replaced limit"));
                    }
                }
            }
            match name {
                Some(found) => names.push(found),
                None => self.error(item, "a replaced limit needs its `name`"),
            }
        }
        names
    }

    /// The limit of a rate limit's fields; `at` is the rate limit's line.
    fn limit(
        &mut self,
        at: usize,
        unit: Option<(String, &Node)>,
        requests: Option<&Node>,
        unlimited: bool,
    ) -> Option<Limit> {
        if unlimited {
            if unit.is_some() || requests.is_some() {
                self.error_at(
                    at,
                    "an unlimited rate limit takes no `unit` nor `requests_per_unit`",
                );
                return None;
            }
            return Some(Limit::Unlimited);
        }
        let Some((unit, unit_at)) = unit else {
            self.error_at(
                at,
                "`unit` is required (second, minute, hour, day, week, month or year)",
            );
            return None;
        };
        let Some(unit) = UNITS
            .iter()
            .find(|(u, _)| u.eq_ignore_ascii_case(&unit))
            .copied()
        else {
            self.error(
                unit_at,
                format!("unknown unit `{unit}`: second, minute, hour, day, week, month or year"),
            );
            return None;
        };
        let Some(requests_at) = requests else {
            self.error_at(at, "`requests_per_unit` is required");
            return None;
        };
        let requests = match requests_at.scalar().map(str::parse::<i64>) {
            // 0 denies every request: a blocked policy.
            Some(Ok(n)) if (0..=MAX_CAPACITY).contains(&n) => n,
            _ => {
                self.error(
                    requests_at,
                    format!("`requests_per_unit` must be a whole number from 1 to {MAX_CAPACITY}"),
                );
                return None;
            }
        };
        Some(Limit::Every { requests, unit })
    }
}
