//! A policy's descriptor patterns as the form's text area holds them: one per line, the
//! Envoy domain (optional) before `: `, then the entries separated by commas:
//!
//! ```text
//! edge: database=users, user_id
//! generic_key=login
//! example7: key_2=value_2, user=bkthomps; replaces specific_limit
//! ```
//!
//! Lines are only split here; `control` checks each part and names it
//! (`descriptors[1].entries[0]`), and the form shows that error by its line.

use crate::control::{DescriptorInput, DescriptorView};
use crate::domain::{FieldError, FieldErrors, split_line, split_replaces};

/// The patterns written in `text`, each with the number of its line (blank lines are
/// skipped).
pub fn parse(text: &str) -> Vec<(usize, DescriptorInput)> {
    text.lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .map(|(i, line)| {
            let (line, replaces) = split_replaces(line);
            let (domain, entries) = split_line(line);
            let input = DescriptorInput {
                domain: domain.map(str::to_owned),
                entries: Some(entries.into_iter().map(str::to_owned).collect()),
                replaces: (!replaces.is_empty())
                    .then(|| replaces.into_iter().map(str::to_owned).collect()),
            };
            (i + 1, input)
        })
        .collect()
}

/// The patterns as the text area shows them, one per line.
pub fn render(descriptors: &[DescriptorView]) -> String {
    descriptors
        .iter()
        .map(render_line)
        .collect::<Vec<_>>()
        .join("\n")
}

/// One pattern as a line: `edge: database=users, user_id` (and `; replaces a, b`).
pub fn render_line(d: &DescriptorView) -> String {
    let entries = d.entries.join(", ");
    let pattern = match &d.domain {
        Some(domain) => format!("{domain}: {entries}"),
        None => entries,
    };
    if d.replaces.is_empty() {
        pattern
    } else {
        format!("{pattern}; replaces {}", d.replaces.join(", "))
    }
}

/// `control`'s errors with each pattern's named by its line in `text` (`descriptors[1].
/// entries[0]` is "line 3: entries[0] ..."), all next to the text area.
pub fn locate_errors(text: &str, errors: FieldErrors) -> FieldErrors {
    let lines: Vec<usize> = parse(text).into_iter().map(|(line, _)| line).collect();
    FieldErrors(
        errors
            .0
            .into_iter()
            .map(|e| match pattern_index(&e.field) {
                Some((i, part)) => {
                    let line = lines.get(i).map_or(i + 1, |l| *l);
                    let what = part.map_or(String::new(), |p| format!("{p} "));
                    FieldError::new("descriptors", format!("line {line}: {what}{}", e.message))
                }
                None => e,
            })
            .collect(),
    )
}

/// `descriptors[3].entries[0]` as (3, Some("entries[0]")), `descriptors[3]` as (3, None).
fn pattern_index(field: &str) -> Option<(usize, Option<&str>)> {
    let rest = field.strip_prefix("descriptors[")?;
    let (index, part) = rest.split_once(']')?;
    let index = index.parse().ok()?;
    Some((index, part.strip_prefix('.')))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_round_trip() {
        let text = "edge: database=users, user_id\n\n  generic_key=login  \nu=b; replaces p, q";
        let parsed = parse(text);
        assert_eq!(
            parsed.iter().map(|(l, _)| *l).collect::<Vec<_>>(),
            [1, 3, 4]
        );
        let views: Vec<DescriptorView> = parsed
            .into_iter()
            .map(|(_, d)| DescriptorView {
                domain: d.domain,
                entries: d.entries.unwrap(),
                replaces: d.replaces.unwrap_or_default(),
            })
            .collect();
        assert_eq!(
            render(&views),
            "edge: database=users, user_id\ngeneric_key=login\nu=b; replaces p, q"
        );
    }

    #[test]
    fn errors_are_named_by_their_line() {
        let text = "a=b\n\nedge: bad key\n";
        let found = locate_errors(
            text,
            FieldErrors(vec![
                FieldError::new("descriptors[1].entries[0]", "key must be ..."),
                FieldError::new("rate", "is required"),
            ]),
        );
        assert_eq!(found.0[0].field, "descriptors");
        assert_eq!(found.0[0].message, "line 3: entries[0] key must be ...");
        assert_eq!(found.0[1].field, "rate");
    }
}
