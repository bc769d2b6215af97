//! A policy file made into validated `PolicySpec`s, with the same checks as the API
//! (`new_policy`), every error naming the document, the line and the field.

use std::collections::HashSet;

use serde::Deserialize;

use crate::control::{Desired, ERRORS_SHOWN};
use crate::domain::{PolicySpec, in_plain_words, place_in_words};

use super::caps::{self, Caps, Refusal};
use super::checks::checked;
use super::format::Documents;
use super::lines::Lines;

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
        write!(f, ": {}: {}", place_in_words(&self.field), self.message)
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

impl PolicyFile {
    /// What the file wants, for the control layer to plan and apply.
    pub fn desired(self) -> Desired {
        Desired {
            apps: self.apps,
            specs: self.specs,
            written: super::plan::written_fields,
        }
    }
}

/// The policies a file describes (see [`parse_file`]).
pub fn parse(text: &str) -> Result<Vec<PolicySpec>, FileErrors> {
    parse_file(text).map(|file| file.specs)
}

/// [`parse_file_within`] the caps of a file given to the admin API or the CLI.
pub fn parse_file(text: &str) -> Result<PolicyFile, FileErrors> {
    parse_file_within(text, Caps::FILE)
}

/// The policies a file describes, with the applications it names: JSON when the whole
/// text is one JSON value, YAML otherwise (several documents, flow style included). A
/// byte-order mark at the start is skipped. A file over `caps` is refused before it is
/// read.
pub fn parse_file_within(text: &str, caps: Caps) -> Result<PolicyFile, FileErrors> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    if let Err(refusal) = caps::check(text, caps) {
        return Err(FileErrors(vec![refused(text, refusal)]));
    }
    let documents = match read_json(text) {
        Some(read) => vec![read?],
        None => read_yaml(text)?,
    };
    let lines = Lines::of(text);
    let mut errors = Vec::new();
    let mut specs: Vec<PolicySpec> = Vec::new();
    let mut names = HashSet::new();
    let mut named: Vec<String> = Vec::new();
    let mut apps = HashSet::new();
    for (d, Documents(documents)) in documents.iter().enumerate() {
        for app in documents {
            if apps.insert(app.app.as_str()) {
                named.push(app.app.clone());
            }
            for (i, policy) in app.policies.iter().enumerate() {
                let line = lines.of_name(&policy.name);
                match checked(app, policy) {
                    Ok(spec) if !names.insert(spec.name.clone()) => errors.push(FileError {
                        document: d + 1,
                        line,
                        field: format!("policies[{i}].name"),
                        message: "names a policy already in this file".into(),
                    }),
                    Ok(spec) => specs.push(spec),
                    Err(found) => errors.extend(found.into_iter().map(|(field, message)| {
                        let key = field.split(['.', '[']).next().unwrap_or_default();
                        FileError {
                            document: d + 1,
                            line: line.map(|l| lines.field(l, key).unwrap_or(l)),
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
        Err(FileErrors(capped(errors)))
    }
}

/// The first `ERRORS_SHOWN` errors, and one more that counts the others.
fn capped(mut errors: Vec<FileError>) -> Vec<FileError> {
    if errors.len() > ERRORS_SHOWN {
        let more = errors.len() - ERRORS_SHOWN;
        errors.truncate(ERRORS_SHOWN);
        let last = errors[ERRORS_SHOWN - 1].document;
        errors.push(FileError {
            document: last,
            line: None,
            field: "file".into(),
            message: format!("and {more} more errors (the first {ERRORS_SHOWN} are shown)"),
        });
    }
    errors
}

/// A file over its caps, or not YAML, as an error of the file.
fn refused(text: &str, refusal: Refusal) -> FileError {
    match refusal {
        Refusal::TooLarge { bytes, cap } => FileError {
            document: 1,
            line: None,
            field: "file".into(),
            message: format!(
                "is {bytes} bytes, over the {cap} bytes a policy file may have: split it by application"
            ),
        },
        Refusal::At {
            document,
            line,
            message,
        } => {
            // Text that looks like JSON is told what JSON's reader finds wrong with it.
            let json = json_syntax(text);
            FileError {
                document: if json.is_some() { 1 } else { document },
                line: json.as_ref().map_or(Some(line), |(l, _)| *l),
                field: "file".into(),
                message: json.map_or(message, |(_, m)| m),
            }
        }
    }
}

/// For text that starts like JSON and is not one JSON value: the line and JSON's message.
fn json_syntax(text: &str) -> Option<(Option<usize>, String)> {
    if !text.trim_start().starts_with(['{', '[']) {
        return None;
    }
    let mut de = serde_json::Deserializer::from_str(text);
    let read = serde::de::IgnoredAny::deserialize(&mut de).and_then(|_| de.end());
    let e = read.err()?;
    Some((
        (e.line() > 0).then_some(e.line()),
        strip_location(&e.to_string()),
    ))
}

/// The file read as one JSON value, or `None` when it is not JSON (then it is YAML: flow
/// style looks like JSON but may have more documents after it).
fn read_json(text: &str) -> Option<Result<Documents, FileErrors>> {
    if !text.trim_start().starts_with(['{', '[']) {
        return None;
    }
    let mut de = serde_json::Deserializer::from_str(text);
    match serde_path_to_error::deserialize(&mut de) {
        // More after the value (`---` and another document, say): YAML.
        Ok(documents) => de.end().ok().map(|()| Ok(documents)),
        Err(e) if e.inner().is_syntax() || e.inner().is_eof() => None,
        Err(e) => {
            let line = e.inner().line();
            Some(Err(FileErrors(vec![FileError {
                document: 1,
                line: (line > 0).then_some(line),
                field: field_path(e.path()),
                message: strip_location(&e.inner().to_string()),
            }])))
        }
    }
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
                    field: field_path(e.path()),
                    message: strip_location(&e.inner().to_string()),
                }]));
            }
        }
    }
    Ok(documents)
}

/// Where in a document an error is: `policies[0].rate`, or `file` for the whole of it.
fn field_path(path: &serde_path_to_error::Path) -> String {
    match path.to_string() {
        root if root == "." => "file".into(),
        path => path,
    }
}

/// A parser's message without its own "path: " and " at line L column C" (the error
/// says where itself), and in the file's words, not Rust's.
fn strip_location(message: &str) -> String {
    in_plain_words(&without_location(message))
}

fn without_location(message: &str) -> String {
    let message = match message.split_once(": ") {
        Some((path, rest)) if !path.contains(' ') => rest,
        _ => message,
    };
    match message.find(" at line ") {
        Some(at) => message[..at].to_owned(),
        None => message.to_owned(),
    }
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
                "document 2, line 12: policy 1, window: must be a whole number of ms or a duration such as 500ms, 30s, 5m, 1h or 1d"
            ]
        );
        let missing =
            "app: shop\npolicies:\n  - name: a\n    algorithm: fixed_window\n    max_permits: 1\n";
        assert_eq!(
            errors(missing),
            ["document 1, line 3: policy 1, window: is required for fixed_window"]
        );
        let typo = "app: shop\npolicies:\n  - name: a\n    max_permit: 1\n";
        let found = errors(typo);
        assert!(
            found[0].starts_with(
                "document 1, line 4: policy 1, max_permit: unknown field `max_permit`"
            ),
            "{found:?}"
        );
        let bad_type = "app: shop\npolicies:\n  - name: a\n    rate: 1/s\n    max_permits: many\n";
        let found = errors(bad_type);
        assert!(
            found[0].starts_with("document 1, line 5: policy 1, max_permits: invalid type"),
            "{found:?}"
        );
        let bad_override = "app: shop\npolicies:\n  - name: a\n    rate: 1/s\n    max_permits: 1\n    scope: per_key\n    overrides:\n      - match: vip\n        max_permits: 0\n";
        let found = errors(bad_override);
        assert!(
            found[0].starts_with("document 1, line 7: policy 1, override 1, max_permits:"),
            "{found:?}"
        );
        let twice = "app: shop\npolicies:\n  - name: a\n    rate: 1\n    max_permits: 1\n  - name: a\n    rate: 2\n    max_permits: 1\n";
        assert_eq!(
            errors(twice),
            ["document 1, line 6: policy 2, name: names a policy already in this file"]
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
            found[0].starts_with("document 1, line 4: policy 1, max_permits: invalid type"),
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

    #[test]
    fn nothing_after_the_first_document_is_dropped() {
        // Flow style (JSON-like) documents, one after the other: every one is read.
        let flow = "{app: shop, policies: [{name: a, rate: 1, max_permits: 1}]}\n---\n{app: web, policies: [{name: b, rate: 1, max_permits: 1}]}\n";
        assert_eq!(parse(flow).unwrap().len(), 2);
        let json = "{\"app\": \"shop\", \"policies\": [{\"name\": \"a\", \"rate\": 1, \"max_permits\": 1}]}\n---\n{\"app\": \"web\", \"policies\": [{\"name\": \"b\", \"rate\": 1, \"max_permits\": 1}]}\n";
        assert_eq!(parse(json).unwrap().len(), 2);
        // Two JSON values one after the other are neither JSON nor YAML.
        let two = "{\"app\": \"shop\", \"policies\": []}\n{\"app\": \"web\", \"policies\": []}\n";
        let found = errors(two);
        assert!(
            found[0].starts_with("document 1, line 2: file: trailing characters"),
            "{found:?}"
        );
    }

    #[test]
    fn a_byte_order_mark_is_skipped() {
        let file = "\u{feff}app: shop\npolicies:\n  - name: a\n    rate: 1\n    max_permits: 1\n";
        assert_eq!(parse(file).unwrap().len(), 1);
        let json = "\u{feff}{\"app\": \"shop\", \"policies\": [{\"name\": \"a\", \"rate\": 1, \"max_permits\": 1}]}";
        assert_eq!(parse(json).unwrap().len(), 1);
    }

    #[test]
    fn a_line_indented_wrongly_is_named() {
        let file = "app: shop\npolicies:\n  - name: a\n    rate: 1/s\n   max_permits: 5\n";
        let found = errors(file);
        assert!(
            found[0].starts_with("document 1, line 5: file: not YAML: "),
            "{found:?}"
        );
    }

    #[test]
    fn many_errors_are_counted_not_listed() {
        let mut file = String::from("app: shop\npolicies:\n");
        for i in 0..250 {
            file.push_str(&format!(
                "  - name: p{i}\n    rate: 1\n    max_permits: 0\n"
            ));
        }
        let found = errors(&file);
        assert_eq!(found.len(), ERRORS_SHOWN + 1);
        assert_eq!(
            found[ERRORS_SHOWN],
            "document 1: file: and 150 more errors (the first 100 are shown)"
        );
        assert!(
            found[99].starts_with("document 1, line 302: policy 100, max_permits"),
            "{:?}",
            found[99]
        );
    }

    #[test]
    fn messages_use_the_files_words() {
        let huge = "app: shop\npolicies:\n  - name: a\n    rate: 1\n    max_permits: 99999999999999999999999\n";
        assert_eq!(
            errors(huge),
            [
                "document 1, line 5: policy 1, max_permits: invalid type: integer `99999999999999999999999`, expected a whole number"
            ]
        );
        let one = "app: shop\npolicies:\n  - name: a\n    rate: 1\n    max_permits: 1\n    allowed_apps: shop\n";
        assert_eq!(
            errors(one),
            [
                "document 1, line 6: policy 1, allowed_apps: invalid type: string \"shop\", expected a list"
            ]
        );
        let policy = "app: shop\npolicies:\n  - 5\n";
        assert_eq!(
            errors(policy),
            [
                "document 1, line 3: policy 1: invalid type: integer `5`, expected a policy: a mapping with `name`, `max_permits` and the other fields of a policy"
            ]
        );
    }
}
