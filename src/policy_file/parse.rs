//! A policy file made into validated `PolicySpec`s, with the same checks as the API
//! (`new_policy`), every error naming the document, the line and the field.

use crate::control::{OverrideInput, PolicyInput, new_policy};
use crate::domain::{DisplayUnits, PolicySpec};

use super::format::{AppDocument, Documents, FileOverride, FilePolicy};
use super::units::{parse_duration, parse_rate};

/// One thing wrong with a file, and where.
#[derive(Debug, Clone, PartialEq)]
pub struct FileError {
    /// 1-based: the YAML document (`---`) it is in; a JSON file is one document.
    pub document: usize,
    /// 1-based, when known.
    pub line: Option<usize>,
    /// The field's path in the document, such as `policies[0].rate`.
    pub field: String,
    pub message: String,
}

impl std::fmt::Display for FileError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "document {}", self.document)?;
        if let Some(line) = self.line {
            write!(f, ", line {line}")?;
        }
        write!(f, ": {}: {}", self.field, self.message)
    }
}

/// Every error found in a file.
#[derive(Debug, Clone, PartialEq)]
pub struct FileErrors(pub Vec<FileError>);

impl std::fmt::Display for FileErrors {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let lines: Vec<String> = self.0.iter().map(ToString::to_string).collect();
        f.write_str(&lines.join("\n"))
    }
}

impl std::error::Error for FileErrors {}

/// What a file describes: the applications its documents name (a document without
/// policies names its application too: with prune, it empties it) and their policies.
#[derive(Debug, Clone, PartialEq)]
pub struct PolicyFile {
    pub apps: Vec<String>,
    pub specs: Vec<PolicySpec>,
}

/// The policies a file describes: JSON when it starts with `{` or `[`, YAML otherwise.
pub fn parse(text: &str) -> Result<Vec<PolicySpec>, FileErrors> {
    parse_file(text).map(|file| file.specs)
}

/// [`parse`], with the applications the file names.
pub fn parse_file(text: &str) -> Result<PolicyFile, FileErrors> {
    let documents = if text.trim_start().starts_with(['{', '[']) {
        vec![read_json(text)?]
    } else {
        read_yaml(text)?
    };
    let mut errors = Vec::new();
    let mut specs: Vec<PolicySpec> = Vec::new();
    let mut named: Vec<String> = Vec::new();
    for (d, Documents(apps)) in documents.iter().enumerate() {
        for app in apps {
            if !named.contains(&app.app) {
                named.push(app.app.clone());
            }
            for (i, policy) in app.policies.iter().enumerate() {
                let line = line_of(text, "name", &policy.name);
                match checked(app, policy) {
                    Ok(spec) if specs.iter().any(|s| s.name == spec.name) => {
                        errors.push(FileError {
                            document: d + 1,
                            line,
                            field: format!("policies[{i}].name"),
                            message: "names a policy already in this file".into(),
                        })
                    }
                    Ok(spec) => specs.push(spec),
                    Err(found) => errors.extend(found.into_iter().map(|(field, message)| {
                        let key = field.split(['.', '[']).next().unwrap_or_default();
                        FileError {
                            document: d + 1,
                            line: line.map(|l| field_line(text, l, key).unwrap_or(l)),
                            field: if field == "app" {
                                field
                            } else {
                                format!("policies[{i}].{field}")
                            },
                            message,
                        }
                    })),
                }
            }
        }
    }
    if errors.is_empty() {
        Ok(PolicyFile { apps: named, specs })
    } else {
        Err(FileErrors(errors))
    }
}

fn read_json(text: &str) -> Result<Documents, FileErrors> {
    let mut de = serde_json::Deserializer::from_str(text);
    serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let line = e.inner().line();
        FileErrors(vec![FileError {
            document: 1,
            line: (line > 0).then_some(line),
            field: e.path().to_string(),
            message: strip_location(&e.inner().to_string()),
        }])
    })
}

fn read_yaml(text: &str) -> Result<Vec<Documents>, FileErrors> {
    let mut documents = Vec::new();
    for (d, document) in serde_norway::Deserializer::from_str(text).enumerate() {
        let read: Result<Documents, _> = serde_path_to_error::deserialize(document);
        match read {
            Ok(one) => documents.push(one),
            Err(e) => {
                return Err(FileErrors(vec![FileError {
                    document: d + 1,
                    line: e.inner().location().map(|l| l.line()),
                    field: e.path().to_string(),
                    message: strip_location(&e.inner().to_string()),
                }]));
            }
        }
    }
    Ok(documents)
}

/// A parser's message without its own "path: " and " at line L column C" (the error
/// says where itself).
fn strip_location(message: &str) -> String {
    let message = match message.split_once(": ") {
        Some((path, rest)) if !path.contains(' ') => rest,
        _ => message,
    };
    match message.find(" at line ") {
        Some(at) => message[..at].to_owned(),
        None => message.to_owned(),
    }
}

/// The policy as a spec, or its errors as (field in the file, message).
fn checked(app: &AppDocument, policy: &FilePolicy) -> Result<PolicySpec, Vec<(String, String)>> {
    let mut errors = Vec::new();
    let mut units = DisplayUnits::default();
    let mut rate = None;
    if let Some(amount) = &policy.rate {
        match parse_rate(amount) {
            Ok((r, unit)) => (rate, units.rate) = (Some(r), unit),
            Err(m) => errors.push(("rate".to_owned(), m)),
        }
    }
    let mut duration = |field: &str, amount: &Option<_>, unit: &mut Option<_>| {
        let (ms, u) = match amount.as_ref().map(parse_duration)? {
            Ok(read) => read,
            Err(m) => {
                errors.push((field.to_owned(), m));
                return None;
            }
        };
        *unit = u;
        Some(ms)
    };
    let window_ms = duration("window", &policy.window, &mut units.window);
    let lease_ttl_ms = duration("lease", &policy.lease, &mut units.lease_ttl);
    let overrides = policy
        .overrides
        .iter()
        .enumerate()
        .map(|(i, o)| override_input(i, o, &mut errors))
        .collect();
    if !errors.is_empty() {
        return Err(errors);
    }
    let input = PolicyInput {
        name: Some(policy.name.clone()),
        owner_app: Some(app.app.clone()),
        algorithm: policy.algorithm.clone(),
        rate,
        max_permits: Some(policy.max_permits),
        window_ms,
        lease_ttl_ms,
        allowed_apps: policy.allowed_apps.clone(),
        failure_mode: policy.failure_mode.clone(),
        enabled: policy.enabled,
        mode: policy.mode.clone(),
        description: policy.description.clone(),
        scope: policy.scope.clone(),
        overrides: Some(overrides),
        version: None,
        units: Some(units),
    };
    new_policy(&input).map_err(|found| {
        found
            .0
            .into_iter()
            .map(|e| (file_field(&e.field), e.message))
            .collect()
    })
}

fn override_input(i: usize, o: &FileOverride, errors: &mut Vec<(String, String)>) -> OverrideInput {
    let field = |name: &str| format!("overrides[{i}].{name}");
    let rate = read(errors, field("rate"), o.rate.as_ref().map(parse_rate));
    let window_ms = read(
        errors,
        field("window"),
        o.window.as_ref().map(parse_duration),
    );
    let lease_ttl_ms = read(errors, field("lease"), o.lease.as_ref().map(parse_duration));
    OverrideInput {
        matches: Some(o.matches.clone()),
        max_permits: o.max_permits,
        rate: rate.map(|(r, _)| r),
        window_ms: window_ms.map(|(ms, _)| ms),
        lease_ttl_ms: lease_ttl_ms.map(|(ms, _)| ms),
    }
}

/// An amount read, if given; its error recorded under `field`.
fn read<T>(
    errors: &mut Vec<(String, String)>,
    field: String,
    amount: Option<Result<T, String>>,
) -> Option<T> {
    match amount? {
        Ok(value) => Some(value),
        Err(message) => {
            errors.push((field, message));
            None
        }
    }
}

/// The API's name of a field as the file names it.
fn file_field(api_field: &str) -> String {
    let field = api_field
        .replace("window_ms", "window")
        .replace("lease_ttl_ms", "lease");
    if field == "owner_app" {
        "app".into()
    } else {
        field
    }
}

/// The 1-based line on which `key` is set to `value` (YAML or JSON), if any.
fn line_of(text: &str, key: &str, value: &str) -> Option<usize> {
    text.lines()
        .position(|line| key_of(line) == Some(key) && value_of(line) == Some(value))
        .map(|i| i + 1)
}

/// The line at or after `from` (1-based) that sets `key`, before the next policy's name.
fn field_line(text: &str, from: usize, key: &str) -> Option<usize> {
    text.lines()
        .enumerate()
        .skip(from - 1)
        .take_while(|(i, line)| *i + 1 == from || key_of(line) != Some("name"))
        .find(|(_, line)| key_of(line) == Some(key))
        .map(|(i, _)| i + 1)
}

/// The key a YAML or JSON line sets: `  - name: x`, `"name": "x",`.
fn key_of(line: &str) -> Option<&str> {
    let line = line
        .trim_start()
        .trim_start_matches("- ")
        .trim_start_matches('{');
    let (key, _) = line.split_once(':')?;
    Some(key.trim().trim_matches('"').trim_matches('\''))
}

fn value_of(line: &str) -> Option<&str> {
    let (_, value) = line.split_once(':')?;
    let value = value
        .trim()
        .trim_end_matches(',')
        .trim_end_matches('}')
        .trim();
    Some(value.trim_matches('"').trim_matches('\''))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn errors(text: &str) -> Vec<String> {
        parse(text)
            .unwrap_err()
            .0
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn a_small_file_takes_the_defaults() {
        let specs = parse("app: shop\npolicies:\n  - name: orders.create\n    rate: 120/min\n    max_permits: 10\n").unwrap();
        assert_eq!(specs.len(), 1);
        assert_eq!(specs[0].rate.unwrap().get(), 2.0);
        assert_eq!(specs[0].allowed_apps[0].as_str(), "shop");
        assert!(specs[0].enabled);
    }

    #[test]
    fn errors_name_the_document_the_line_and_the_field() {
        let file = "app: shop\npolicies:\n  - name: a\n    rate: 1/s\n    max_permits: 1\n---\napp: billing\npolicies:\n  - name: b\n    max_permits: 5\n    algorithm: fixed_window\n    window: 5 weeks\n";
        assert_eq!(
            errors(file),
            [
                "document 2, line 12: policies[0].window: must be a whole number of ms or a duration such as 500ms, 30s, 5m, 1h or 1d"
            ]
        );
        let missing =
            "app: shop\npolicies:\n  - name: a\n    algorithm: fixed_window\n    max_permits: 1\n";
        assert_eq!(
            errors(missing),
            ["document 1, line 3: policies[0].window: is required for fixed_window"]
        );
        let typo = "app: shop\npolicies:\n  - name: a\n    max_permit: 1\n";
        let found = errors(typo);
        assert!(
            found[0].starts_with(
                "document 1, line 4: policies[0].max_permit: unknown field `max_permit`"
            ),
            "{found:?}"
        );
        let bad_type = "app: shop\npolicies:\n  - name: a\n    rate: 1/s\n    max_permits: many\n";
        let found = errors(bad_type);
        assert!(
            found[0].starts_with("document 1, line 5: policies[0].max_permits: invalid type"),
            "{found:?}"
        );
        let bad_override = "app: shop\npolicies:\n  - name: a\n    rate: 1/s\n    max_permits: 1\n    scope: per_key\n    overrides:\n      - match: vip\n        max_permits: 0\n";
        let found = errors(bad_override);
        assert!(
            found[0].starts_with("document 1, line 7: policies[0].overrides[0].max_permits:"),
            "{found:?}"
        );
        let twice = "app: shop\npolicies:\n  - name: a\n    rate: 1\n    max_permits: 1\n  - name: a\n    rate: 2\n    max_permits: 1\n";
        assert_eq!(
            errors(twice),
            ["document 1, line 3: policies[1].name: names a policy already in this file"]
        );
    }

    #[test]
    fn json_is_read_too_and_names_its_lines() {
        let specs = parse(
            r#"[{"app": "shop", "policies": [{"name": "a", "rate": "60/min", "max_permits": 3}]}]"#,
        )
        .unwrap();
        assert_eq!(specs[0].rate.unwrap().get(), 1.0);
        let found = errors(
            "{\n  \"app\": \"shop\",\n  \"policies\": [\n    {\"name\": \"a\", \"max_permits\": \"x\"}\n  ]\n}\n",
        );
        assert!(
            found[0].starts_with("document 1, line 4: policies[0].max_permits: invalid type"),
            "{found:?}"
        );
        let bad_app = errors(
            "{\"app\": \"Not A Slug\", \"policies\": [{\"name\": \"a\", \"rate\": 1, \"max_permits\": 1}]}",
        );
        assert!(bad_app[0].contains(": app: "), "{bad_app:?}");
    }

    #[test]
    fn the_readme_example_reads() {
        let readme = include_str!("../../README.md");
        let section = &readme[readme.find("## Policy files").unwrap()..];
        let start = section.find("```yaml\n").unwrap() + "```yaml\n".len();
        let example = &section[start..start + section[start..].find("```").unwrap()];
        let specs = parse(example).unwrap();
        assert_eq!(specs.len(), 4);
        assert_eq!(specs[0].overrides[0].rate.unwrap().get(), 5.0);
        assert_eq!(specs[3].owner_app.as_str(), "billing");
    }
}
