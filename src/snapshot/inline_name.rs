//! A name (a policy's, a caller's) held where it is compared: in a map's own slot, or in
//! the entry a lookup reaches anyway, when it is short. A map keyed by a `String` or a
//! `Box<str>` keeps the name's bytes elsewhere on the heap, so each lookup among
//! thousands of names reads one more place in memory, one more cache miss, just to
//! compare; the acquire path makes two such lookups per decision (the snapshot's policy,
//! the worker's tally). Names of up to [`INLINE_BYTES`] bytes, most policy names and
//! application slugs, are compared in place; longer ones are boxed.
//!
//! Maps look an `InlineName` up by the name's bytes (`Borrow<[u8]>`), so a lookup builds
//! no key.

use std::borrow::Borrow;
use std::fmt;
use std::hash::{Hash, Hasher};

/// The longest name held in place: with its length, the 32 bytes of a boxed name's
/// pointer, length and tag rounded up.
pub const INLINE_BYTES: usize = 30;

#[derive(Clone)]
pub enum InlineName {
    Inline { len: u8, bytes: [u8; INLINE_BYTES] },
    Boxed(Box<str>),
}

impl InlineName {
    pub fn new(name: &str) -> Self {
        match u8::try_from(name.len()) {
            Ok(len) if name.len() <= INLINE_BYTES => {
                let mut bytes = [0; INLINE_BYTES];
                bytes[..name.len()].copy_from_slice(name.as_bytes());
                Self::Inline { len, bytes }
            }
            _ => Self::Boxed(name.into()),
        }
    }

    pub fn as_bytes(&self) -> &[u8] {
        match self {
            Self::Inline { len, bytes } => &bytes[..usize::from(*len)],
            Self::Boxed(name) => name.as_bytes(),
        }
    }

    /// The name as text (checked again: off the hot path, where names are listed).
    pub fn as_str(&self) -> &str {
        match self {
            Self::Inline { .. } => {
                std::str::from_utf8(self.as_bytes()).expect("an InlineName is made from a str")
            }
            Self::Boxed(name) => name,
        }
    }
}

impl Borrow<[u8]> for InlineName {
    fn borrow(&self) -> &[u8] {
        self.as_bytes()
    }
}

// Hash and Eq by the bytes alone, as `Borrow<[u8]>` requires.
impl Hash for InlineName {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_bytes().hash(state);
    }
}

impl PartialEq for InlineName {
    fn eq(&self, other: &Self) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl Eq for InlineName {}

impl fmt::Debug for InlineName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    #[test]
    fn short_names_are_held_in_place_and_long_ones_boxed() {
        let short = "a".repeat(INLINE_BYTES);
        let long = "a".repeat(INLINE_BYTES + 1);
        assert!(matches!(InlineName::new(&short), InlineName::Inline { .. }));
        assert!(matches!(InlineName::new(&long), InlineName::Boxed(_)));
        assert!(matches!(
            InlineName::new(""),
            InlineName::Inline { len: 0, .. }
        ));
        assert_eq!(InlineName::new(&short).as_str(), short);
        assert_eq!(InlineName::new(&long).as_str(), long);
        assert_eq!(InlineName::new("é/ü").as_str(), "é/ü");
        assert_eq!(std::mem::size_of::<InlineName>(), 32);
    }

    #[test]
    fn a_map_finds_a_name_by_its_bytes_whatever_its_length() {
        let names = ["", "p", "orders.create", &"x".repeat(30), &"y".repeat(128)];
        let map: HashMap<InlineName, usize> = names
            .iter()
            .enumerate()
            .map(|(i, n)| (InlineName::new(n), i))
            .collect();
        for (i, name) in names.iter().enumerate() {
            assert_eq!(map.get(name.as_bytes()), Some(&i), "{name}");
        }
        assert_eq!(map.get("orders.creat".as_bytes()), None);
        assert_eq!(
            map.get("orders.create\0".as_bytes()),
            None,
            "the zeros past a name are not part of it"
        );
        assert_ne!(InlineName::new("a"), InlineName::new("a\0"));
    }
}
