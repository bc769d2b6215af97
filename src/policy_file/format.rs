//! The serde shape of a policy file: a document names one application and lists its
//! policies; a file holds one such document, several (YAML `---`), or a list of them.
//! Every field but `name` and `max_permits` may be left out and takes the API's default.

use serde::{Deserialize, Deserializer, Serialize};

use super::units::Amount;

/// One application's policies.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "an application's document: a mapping with `app` and `policies`"
)]
pub struct AppDocument {
    /// The owner application's slug.
    pub app: String,
    #[serde(default)]
    pub policies: Vec<FilePolicy>,
}

/// One policy, in the units a person writes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a policy: a mapping with `name`, `max_permits` and the other fields of a policy"
)]
pub struct FilePolicy {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub algorithm: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<Amount>,
    pub max_permits: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window: Option<Amount>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease: Option<Amount>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowed_apps: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_mode: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub overrides: Vec<FileOverride>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub descriptors: Vec<FileDescriptor>,
}

/// An Envoy-style descriptor pattern: its domain (any when left out) and its entries,
/// `key=value` or a bare `key`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a descriptor pattern: a mapping with `entries` and an optional `domain`"
)]
pub struct FileDescriptor {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub domain: Option<String>,
    pub entries: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub replaces: Vec<String>,
}

/// Other limits for one caller of a keyed policy.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "an override: a mapping with `match` and the limits it changes"
)]
pub struct FileOverride {
    #[serde(rename = "match")]
    pub matches: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_permits: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<Amount>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window: Option<Amount>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease: Option<Amount>,
}

/// What one YAML document (or a JSON file) holds: one application's document or a list.
#[derive(Debug, Clone, PartialEq)]
pub struct Documents(pub Vec<AppDocument>);

impl<'de> Deserialize<'de> for Documents {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(DocumentsVisitor)
    }
}

struct DocumentsVisitor;

/// A document with nothing in it (or only comments).
const EMPTY: &str = "is empty: a document names an application (`app`) and lists its policies";

impl<'de> serde::de::Visitor<'de> for DocumentsVisitor {
    type Value = Documents;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a document with `app` and `policies`, or a list of them")
    }
    fn visit_none<E: serde::de::Error>(self) -> Result<Documents, E> {
        Err(E::custom(EMPTY))
    }
    fn visit_unit<E: serde::de::Error>(self) -> Result<Documents, E> {
        Err(E::custom(EMPTY))
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<Documents, A::Error> {
        let one = AppDocument::deserialize(serde::de::value::MapAccessDeserializer::new(map))?;
        Ok(Documents(vec![one]))
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, seq: A) -> Result<Documents, A::Error> {
        Vec::<AppDocument>::deserialize(serde::de::value::SeqAccessDeserializer::new(seq))
            .map(Documents)
    }
}
