//! Names that end up in URLs, Redis keys and audit rows, checked once at the edge.

use serde::Serialize;

use super::FieldError;

fn check_chars(
    field: &str,
    value: &str,
    max_len: usize,
    min_len: usize,
    first_ok: impl Fn(char) -> bool,
    rest_ok: impl Fn(char) -> bool,
    rule: &str,
) -> Result<(), FieldError> {
    let len = value.chars().count();
    let mut chars = value.chars();
    let valid = len >= min_len
        && len <= max_len
        && chars.next().is_some_and(&first_ok)
        && chars.all(&rest_ok);
    if valid {
        Ok(())
    } else {
        Err(FieldError::new(field, rule))
    }
}

macro_rules! name_type {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
        #[serde(transparent)]
        pub struct $name(String);

        impl $name {
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(&self.0)
            }
        }
    };
}

name_type!(
    /// An application's slug: `[a-z0-9][a-z0-9-]{1,62}`. Never contains a comma, which
    /// the Redis `apps` field uses as its delimiter.
    AppSlug
);
name_type!(
    /// A policy (resource) name: `[A-Za-z0-9][A-Za-z0-9._:/-]{0,127}`. Never contains a
    /// brace, so it is safe inside a Redis Cluster hash tag.
    PolicyName
);
name_type!(
    /// A user's login name: `[a-z0-9][a-z0-9._-]{0,63}`.
    Username
);

impl AppSlug {
    pub fn parse_field(field: &str, value: &str) -> Result<Self, FieldError> {
        let lower_alnum = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
        check_chars(
            field,
            value,
            63,
            2,
            lower_alnum,
            |c| lower_alnum(c) || c == '-',
            "must be 2-63 characters of a-z, 0-9 and '-', starting with a letter or digit",
        )?;
        Ok(Self(value.to_owned()))
    }

    pub fn parse(value: &str) -> Result<Self, FieldError> {
        Self::parse_field("slug", value)
    }
}

impl PolicyName {
    pub fn parse_field(field: &str, value: &str) -> Result<Self, FieldError> {
        check_chars(
            field,
            value,
            128,
            1,
            |c| c.is_ascii_alphanumeric(),
            |c| c.is_ascii_alphanumeric() || "._:/-".contains(c),
            "must be 1-128 characters of A-Z, a-z, 0-9 and . _ : / -, starting with a letter or digit",
        )?;
        Ok(Self(value.to_owned()))
    }

    pub fn parse(value: &str) -> Result<Self, FieldError> {
        Self::parse_field("name", value)
    }
}

impl Username {
    pub fn parse_field(field: &str, value: &str) -> Result<Self, FieldError> {
        let lower_alnum = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
        check_chars(
            field,
            value,
            64,
            1,
            lower_alnum,
            |c| lower_alnum(c) || "._-".contains(c),
            "must be 1-64 characters of a-z, 0-9 and . _ -, starting with a letter or digit",
        )?;
        Ok(Self(value.to_owned()))
    }

    pub fn parse(value: &str) -> Result<Self, FieldError> {
        Self::parse_field("username", value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slugs() {
        assert!(AppSlug::parse("my-app").is_ok());
        assert!(AppSlug::parse("a1").is_ok());
        assert!(AppSlug::parse("a").is_err());
        assert!(AppSlug::parse("-ab").is_err());
        assert!(AppSlug::parse("My").is_err());
        assert!(AppSlug::parse("a,b").is_err());
        assert!(AppSlug::parse(&"a".repeat(63)).is_ok());
        assert!(AppSlug::parse(&"a".repeat(64)).is_err());
    }

    #[test]
    fn policy_names() {
        assert!(PolicyName::parse("orders.create").is_ok());
        assert!(PolicyName::parse("a").is_ok());
        assert!(PolicyName::parse("api/v1:GET-x_y").is_ok());
        assert!(PolicyName::parse("").is_err());
        assert!(PolicyName::parse(".x").is_err());
        assert!(PolicyName::parse("a{b}").is_err());
        assert!(PolicyName::parse("a b").is_err());
        assert!(PolicyName::parse(&"a".repeat(128)).is_ok());
        assert!(PolicyName::parse(&"a".repeat(129)).is_err());
    }

    #[test]
    fn usernames() {
        assert!(Username::parse("alice").is_ok());
        assert!(Username::parse("a.b-c_d").is_ok());
        assert!(Username::parse("Alice").is_err());
        assert!(Username::parse("").is_err());
    }
}
