//! Envoy-style descriptor patterns a policy may declare, so that a gateway's descriptor
//! (a list of `key=value` entries) finds the policy: an exact entry `database=users`
//! matches that value only, a bare entry `user_id` matches any value and makes one bucket
//! per value. A value holding `*` is a wildcard (`path=/api/*/action`, each `*` any run of
//! characters, as envoyproxy/ratelimit reads it): one bucket per matching value, or one
//! bucket for them all when written `shared path=/api/*/action` (Envoy's
//! `share_threshold: true`). A pattern may name the Envoy `domain` it belongs to; without one it matches
//! in every domain.

use super::{FieldError, FieldErrors, PolicyName};

/// Most patterns one policy may declare.
pub const MAX_DESCRIPTORS: usize = 16;
/// Most entries one pattern may have.
pub const MAX_DESCRIPTOR_ENTRIES: usize = 8;
/// Longest entry key (and domain), in characters.
pub const MAX_DESCRIPTOR_KEY_CHARS: usize = 64;
/// Longest exact value, in bytes of UTF-8.
pub const MAX_DESCRIPTOR_VALUE_BYTES: usize = 256;
/// Most policies one pattern may replace.
pub const MAX_REPLACES: usize = 8;

/// What separates a pattern's entries from the policies it replaces, in the console's
/// one-line form: `edge: user=bkthomps; replaces specific_limit`.
pub const REPLACES_SEPARATOR: &str = "; replaces ";

/// The characters of an entry's key and of a domain, as the OpenAPI pattern says them.
pub const DESCRIPTOR_KEY_PATTERN: &str = "^[A-Za-z0-9_.:-]{1,64}$";

/// The prefix that makes a wildcard entry's matching values share one bucket. Keys hold no
/// space, so the prefix cannot be read as part of one, and values stay free of markers.
pub const SHARED_PREFIX: &str = "shared ";

/// One entry of a pattern: `key=value` (exact), `key=val*ue` (wildcard), `shared
/// key=val*ue` (wildcard whose values share a bucket) or `key` (bare: one bucket per value).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct DescriptorEntry {
    pub key: String,
    /// `None` for a bare entry.
    pub value: Option<String>,
    /// Every value the wildcard matches counts in one bucket (only on a wildcard entry).
    pub shared: bool,
}

impl DescriptorEntry {
    /// `key=value` or `key`, split at the first `=`, after an optional `shared ` prefix.
    pub fn parse_field(field: &str, text: &str) -> Result<Self, FieldError> {
        let (shared, text) = match text.strip_prefix(SHARED_PREFIX) {
            Some(rest) => (true, rest),
            None => (false, text),
        };
        let (key, value) = match text.split_once('=') {
            Some((key, value)) => (key, Some(value)),
            None => (text, None),
        };
        check_key(field, key, "key")?;
        if let Some(value) = value {
            if value.is_empty() || value.len() > MAX_DESCRIPTOR_VALUE_BYTES {
                return Err(FieldError::new(
                    field,
                    format!(
                        "value must be 1 to {MAX_DESCRIPTOR_VALUE_BYTES} bytes of UTF-8 (write `key` alone for one bucket per value)"
                    ),
                ));
            }
            if value.chars().any(char::is_control) {
                return Err(FieldError::new(
                    field,
                    "value must not contain control characters",
                ));
            }
        }
        if shared && !value.is_some_and(|v| v.contains('*')) {
            return Err(FieldError::new(
                field,
                "`shared` applies to a wildcard value only (`shared key=files/*`)",
            ));
        }
        Ok(Self {
            key: key.to_owned(),
            value: value.map(str::to_owned),
            shared,
        })
    }

    pub fn is_bare(&self) -> bool {
        self.value.is_none()
    }

    /// A value holding `*`: it matches many values.
    pub fn is_wildcard(&self) -> bool {
        self.value.as_deref().is_some_and(|v| v.contains('*'))
    }

    /// The request's value at this entry is part of the bucket key: a bare entry, or a
    /// wildcard one whose values do not share.
    pub fn keys_bucket(&self) -> bool {
        self.is_bare() || (self.is_wildcard() && !self.shared)
    }
}

impl std::fmt::Display for DescriptorEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.shared {
            f.write_str(SHARED_PREFIX)?;
        }
        match &self.value {
            Some(value) => write!(f, "{}={value}", self.key),
            None => f.write_str(&self.key),
        }
    }
}

/// A whole pattern: its domain (any when `None`), 1 to 8 entries, and the policies it
/// replaces (envoyproxy/ratelimit's `replaces`): when a descriptor of a gateway's request
/// matches this pattern, the descriptors of the same request that reach one of those
/// policies are not limited by it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct DescriptorPattern {
    pub domain: Option<String>,
    pub entries: Vec<DescriptorEntry>,
    pub replaces: Vec<PolicyName>,
}

impl DescriptorPattern {
    /// The pattern of `descriptors[i]` (`field`), every invalid part named
    /// (`descriptors[1].entries[0]`).
    pub fn parse_field(
        field: &str,
        domain: Option<&str>,
        entries: &[String],
        replaces: &[String],
    ) -> Result<Self, FieldErrors> {
        let mut errors = FieldErrors::default();
        let domain = domain
            .and_then(|d| errors.check(check_key(&format!("{field}.domain"), d, "domain")))
            .map(str::to_owned);
        if entries.is_empty() || entries.len() > MAX_DESCRIPTOR_ENTRIES {
            errors.push(
                format!("{field}.entries"),
                format!("must list 1 to {MAX_DESCRIPTOR_ENTRIES} entries"),
            );
        }
        let parsed: Vec<DescriptorEntry> = entries
            .iter()
            .enumerate()
            .filter_map(|(j, text)| {
                errors.check(DescriptorEntry::parse_field(
                    &format!("{field}.entries[{j}]"),
                    text,
                ))
            })
            .collect();
        if replaces.len() > MAX_REPLACES {
            errors.push(
                format!("{field}.replaces"),
                format!("must list at most {MAX_REPLACES} policies"),
            );
        }
        let mut replaced: Vec<PolicyName> = Vec::with_capacity(replaces.len());
        for (j, name) in replaces.iter().enumerate() {
            let at = format!("{field}.replaces[{j}]");
            if let Some(name) = errors.check(PolicyName::parse_field(&at, name)) {
                if replaced.contains(&name) {
                    errors.push(at, format!("repeats {:?}", name.as_str()));
                } else {
                    replaced.push(name);
                }
            }
        }
        errors.into_result()?;
        Ok(Self {
            domain,
            entries: parsed,
            replaces: replaced,
        })
    }

    /// One line as the console writes it: `edge: database=users, user_id`, or without
    /// the `domain:` part. The first `:` followed by a space (or ending the text before
    /// the entries) separates the domain, since keys may hold a `:` themselves.
    pub fn parse_line(field: &str, line: &str) -> Result<Self, FieldErrors> {
        let (line, replaces) = split_replaces(line);
        let replaces: Vec<String> = replaces.into_iter().map(str::to_owned).collect();
        let (domain, entries) = split_line(line);
        let entries: Vec<String> = entries.into_iter().map(str::to_owned).collect();
        Self::parse_field(field, domain, &entries, &replaces)
    }

    /// Some entry puts the request's value in the bucket key (a bare or per-value
    /// wildcard entry), so the policy must be `per_key`.
    pub fn has_bare(&self) -> bool {
        self.entries.iter().any(DescriptorEntry::keys_bucket)
    }

    /// The entries as the JSON API lists them (`key=value` or `key`).
    pub fn entry_texts(&self) -> Vec<String> {
        self.entries.iter().map(ToString::to_string).collect()
    }
}

/// `edge: database=users, user_id` (without `edge: ` when the pattern has no domain).
impl std::fmt::Display for DescriptorPattern {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if let Some(domain) = &self.domain {
            write!(f, "{domain}: ")?;
        }
        for (i, entry) in self.entries.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{entry}")?;
        }
        for (i, name) in self.replaces.iter().enumerate() {
            f.write_str(if i == 0 { REPLACES_SEPARATOR } else { ", " })?;
            f.write_str(name.as_str())?;
        }
        Ok(())
    }
}

/// A line as the console writes a pattern, split into the pattern and the names of the
/// policies it replaces, unchecked: the last `;` starts them when the word `replaces`
/// follows it (`user=bkthomps; replaces a, b`), so a value may still hold a `;`.
pub fn split_replaces(line: &str) -> (&str, Vec<&str>) {
    let replacing = line.rsplit_once(';').and_then(|(pattern, tail)| {
        let names = tail.trim_start().strip_prefix("replaces")?;
        names
            .starts_with(char::is_whitespace)
            .then_some((pattern, names))
    });
    match replacing {
        Some((pattern, names)) => (pattern, names.split(',').map(str::trim).collect()),
        None => (line, Vec::new()),
    }
}

/// A line as the console writes a pattern, split into its domain (if any) and its
/// entries, unchecked: `edge: database=users, user_id` is (`edge`, [`database=users`,
/// `user_id`]). The first `: ` separates the domain unless an `=` or `,` comes before it
/// (keys may hold a `:`, values anything).
pub fn split_line(line: &str) -> (Option<&str>, Vec<&str>) {
    let line = line.trim();
    let (domain, rest) = match line.split_once(": ") {
        Some((domain, rest)) if !domain.contains(['=', ',']) => (Some(domain.trim()), rest),
        _ => (None, line),
    };
    (domain, rest.split(',').map(str::trim).collect())
}

fn check_key<'a>(field: &str, key: &'a str, what: &str) -> Result<&'a str, FieldError> {
    let valid = (1..=MAX_DESCRIPTOR_KEY_CHARS).contains(&key.len())
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_.:-".contains(c));
    if valid {
        Ok(key)
    } else {
        Err(FieldError::new(
            field,
            format!(
                "{what} must be 1-{MAX_DESCRIPTOR_KEY_CHARS} characters of A-Z, a-z, 0-9 and _ . : -"
            ),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn entries_split_at_the_first_equals_sign() {
        let e = DescriptorEntry::parse_field("e", "header_match=a=b").unwrap();
        assert_eq!(
            (e.key.as_str(), e.value.as_deref()),
            ("header_match", Some("a=b"))
        );
        assert!(
            DescriptorEntry::parse_field("e", "user_id")
                .unwrap()
                .is_bare()
        );
        assert!(DescriptorEntry::parse_field("e", "=x").is_err());
        assert!(DescriptorEntry::parse_field("e", "k=").is_err());
        assert!(DescriptorEntry::parse_field("e", "a b=x").is_err());
        assert!(DescriptorEntry::parse_field("e", "k=a\tb").is_err());
        assert!(DescriptorEntry::parse_field("e", &format!("k={}", "é".repeat(128))).is_ok());
        assert!(DescriptorEntry::parse_field("e", &format!("k={}", "é".repeat(129))).is_err());
        assert!(DescriptorEntry::parse_field("e", &"k".repeat(65)).is_err());
    }

    #[test]
    fn a_wildcard_keys_the_bucket_unless_shared() {
        let per_value = DescriptorEntry::parse_field("e", "path=/api/*/action").unwrap();
        assert!(per_value.is_wildcard() && per_value.keys_bucket());
        let shared = DescriptorEntry::parse_field("e", "shared files=files/*").unwrap();
        assert!(shared.shared && !shared.keys_bucket());
        assert_eq!(shared.to_string(), "shared files=files/*");
        let exact = DescriptorEntry::parse_field("e", "k=v shared").unwrap();
        assert_eq!(
            exact.value.as_deref(),
            Some("v shared"),
            "no marker in values"
        );
        for ambiguous in ["shared k=v", "shared k", "shared  k=a*"] {
            let error = DescriptorEntry::parse_field("e[0]", ambiguous).unwrap_err();
            assert_eq!(error.field, "e[0]", "{ambiguous}");
        }
    }

    #[test]
    fn every_invalid_part_is_named() {
        let errors = DescriptorPattern::parse_field(
            "descriptors[1]",
            Some("bad domain"),
            &entries(&["ok", "no spaces=x", "k="]),
            &entries(&["fine", "not a name", "fine"]),
        )
        .unwrap_err();
        let fields: Vec<&str> = errors.0.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(
            fields,
            [
                "descriptors[1].domain",
                "descriptors[1].entries[1]",
                "descriptors[1].entries[2]",
                "descriptors[1].replaces[1]",
                "descriptors[1].replaces[2]"
            ]
        );
        let none = DescriptorPattern::parse_field("d", None, &[], &[]).unwrap_err();
        assert_eq!(none.0[0].field, "d.entries");
        assert!(DescriptorPattern::parse_field("d", None, &entries(&["k"; 9]), &[]).is_err());
        let many = DescriptorPattern::parse_field("d", None, &entries(&["k"]), &entries(&["p"; 9]));
        assert_eq!(many.unwrap_err().0[0].field, "d.replaces");
    }

    #[test]
    fn a_line_reads_back_as_it_is_written() {
        for line in [
            "edge: database=users, user_id",
            "user_id",
            "a:b=c:d, e",
            "x: k=v: w",
            "example11: shared files=files/*, files_no_share=files_no_share/*",
            "example7: key_2=value_2, user=bkthomps; replaces specific_limit",
            "user; replaces a.b, c/d",
        ] {
            let pattern = DescriptorPattern::parse_line("d", line).unwrap();
            assert_eq!(pattern.to_string(), line);
        }
        let p = DescriptorPattern::parse_line("d", "  edge:  generic_key=x ,user ").unwrap();
        assert_eq!(p.domain.as_deref(), Some("edge"));
        assert_eq!(p.entry_texts(), ["generic_key=x", "user"]);
        let replacing = DescriptorPattern::parse_line("d", "k=v;replaces  p ,q").unwrap();
        assert_eq!(replacing.entry_texts(), ["k=v"]);
        assert_eq!(replacing.replaces.len(), 2);
        let keyed = DescriptorPattern::parse_line("d", "a:b=c:d, e").unwrap();
        assert_eq!(keyed.domain, None, "a key may hold a colon");
        assert!(keyed.has_bare());
    }
}
