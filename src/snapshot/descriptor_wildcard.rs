//! The wildcard children of one position of the descriptor tree (`path=/api/*/action`):
//! grouped by their literal prefix (the text before the first `*`), so that a value finds
//! its candidates by looking up its own prefixes, longest first, whatever the number of
//! wildcards declared. Within a group the wildcard with more literal characters is tried
//! first; the first that matches is the one taken, as envoyproxy/ratelimit takes its first.

use std::collections::HashMap;

/// One wildcard value, split at its `*`s once at build time, and the subtree below it.
#[derive(Debug, Clone)]
pub(super) struct Wildcard<N> {
    /// The literal runs between the `*`s: `/api/*/action` is [`/api/`, `/action`].
    parts: Vec<String>,
    /// Its matching values share one bucket (their value is not part of the key).
    pub(super) shared: bool,
    pub(super) node: N,
}

/// The wildcards under one key at one position.
#[derive(Debug, Clone)]
pub(super) struct Wildcards<N> {
    by_prefix: HashMap<String, Vec<Wildcard<N>>>,
    longest_prefix: usize,
}

impl<N> Default for Wildcards<N> {
    fn default() -> Self {
        Self {
            by_prefix: HashMap::new(),
            longest_prefix: 0,
        }
    }
}

impl<N: Default> Wildcards<N> {
    /// The subtree of the wildcard `value` (one holding `*`), made on first use.
    pub(super) fn child(&mut self, value: &str, shared: bool) -> &mut N {
        let parts: Vec<String> = value.split('*').map(str::to_owned).collect();
        let prefix = parts[0].clone();
        self.longest_prefix = self.longest_prefix.max(prefix.len());
        let group = self.by_prefix.entry(prefix).or_default();
        let at = match group
            .iter()
            .position(|w| w.parts == parts && w.shared == shared)
        {
            Some(at) => at,
            None => {
                let literal = literal_len(&parts);
                let at = group
                    .iter()
                    .position(|w| {
                        (literal_len(&w.parts), &w.parts, w.shared) < (literal, &parts, shared)
                    })
                    .unwrap_or(group.len());
                group.insert(
                    at,
                    Wildcard {
                        parts,
                        shared,
                        node: N::default(),
                    },
                );
                at
            }
        };
        &mut group[at].node
    }
}

impl<N> Wildcards<N> {
    /// The first wildcard matching `value`: the longest literal prefix first, then the
    /// most literal characters. No allocation.
    pub(super) fn find(&self, value: &str) -> Option<&Wildcard<N>> {
        let longest = self.longest_prefix.min(value.len());
        (0..=longest)
            .rev()
            .filter(|&end| value.is_char_boundary(end))
            .filter_map(|end| self.by_prefix.get(&value[..end]))
            .find_map(|group| group.iter().find(|w| matches(&w.parts, value)))
    }
}

fn literal_len(parts: &[String]) -> usize {
    parts.iter().map(String::len).sum()
}

/// `value` starts with the first part, ends with the last, and holds the middle ones in
/// order between them, each `*` standing for any run of characters (empty too).
fn matches(parts: &[String], value: &str) -> bool {
    let (Some(first), Some(last)) = (parts.first(), parts.last()) else {
        return false;
    };
    if parts.len() == 1 {
        return value == first;
    }
    if value.len() < literal_len(parts) {
        return false;
    }
    let Some(rest) = value
        .strip_prefix(first.as_str())
        .and_then(|rest| rest.strip_suffix(last.as_str()))
    else {
        return false;
    };
    let mut rest = rest;
    for part in &parts[1..parts.len() - 1] {
        match rest.find(part.as_str()) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(pattern: &str) -> Vec<String> {
        pattern.split('*').map(str::to_owned).collect()
    }

    #[test]
    fn each_star_matches_any_run_anywhere() {
        let cases = [
            ("value*", "value", true),
            ("value*", "valueXYZ", true),
            ("value*", "valu", false),
            ("/api/*/action", "/api/123/action", true),
            ("/api/*/action", "/api/123/other", false),
            (
                "/api/*/resource/*/action",
                "/api/v1/resource/9/action",
                true,
            ),
            (
                "/api/*/resource/*/action",
                "/api/v1/resourc/9/action",
                false,
            ),
            ("a*a", "a", false),
            ("a*a", "aa", true),
            ("*", "", true),
            ("*x*", "yxy", true),
        ];
        for (pattern, value, expected) in cases {
            assert_eq!(
                matches(&split(pattern), value),
                expected,
                "{pattern} {value}"
            );
        }
    }

    #[test]
    fn the_longest_prefix_then_the_most_literal_wins() {
        let mut wildcards: Wildcards<u8> = Wildcards::default();
        *wildcards.child("*", false) = 1;
        *wildcards.child("/api/*", false) = 2;
        *wildcards.child("/api/*/action", true) = 3;
        *wildcards.child("/a*", false) = 4;
        let found = |v: &str| wildcards.find(v).map(|w| (w.node, w.shared));
        assert_eq!(found("/api/1/action"), Some((3, true)));
        assert_eq!(found("/api/1/other"), Some((2, false)));
        assert_eq!(found("/apple"), Some((4, false)));
        assert_eq!(
            found("/é"),
            Some((1, false)),
            "prefixes cut at char boundaries"
        );
        assert_eq!(
            wildcards.child("/api/*", false),
            &mut 2,
            "one child per value"
        );
    }
}
