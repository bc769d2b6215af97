//! The JSON Schema of a policy file (draft 2020-12), served at
//! `/api/v1/policies/schema.json` for editors and CI checks. Written by hand to say what
//! a person may write (amounts with units); tests check exports against it.

use serde_json::{Value, json};

use crate::domain::{
    Algorithm, DESCRIPTOR_KEY_PATTERN, MAX_CAPACITY, MAX_DESCRIPTOR_ENTRIES, MAX_DESCRIPTORS,
    MAX_REPLACES,
};

pub fn schema() -> Value {
    let algorithms: Vec<&str> = Algorithm::ALL.iter().map(|a| a.as_str()).collect();
    let rate = json!({
        "description": "Permits per second, or per a unit: 100/min, 5/s, 1000/h, 20000/day",
        "oneOf": [
            {"type": "number", "exclusiveMinimum": 0},
            {"type": "string", "pattern": "^\\s*[0-9]+(\\.[0-9]+)?\\s*(/\\s*(s|sec|second|m|min|minute|h|hour|d|day))?\\s*$"}
        ]
    });
    let duration = json!({
        "description": "Milliseconds, or a duration with its unit: 500ms, 30s, 5m, 1h, 1d",
        "oneOf": [
            {"type": "integer", "minimum": 1},
            {"type": "string", "pattern": "^\\s*[0-9]+\\s*(ms|s|m|h|d)?\\s*$"}
        ]
    });
    let max_permits = json!({"type": "integer", "minimum": 1, "maximum": MAX_CAPACITY});
    let document = json!({
        "type": "object",
        "additionalProperties": false,
        "required": ["app"],
        "properties": {
            "app": {"type": "string", "description": "The owner application's slug"},
            "policies": {"type": "array", "items": {"$ref": "#/$defs/policy"}}
        }
    });
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "ratekeeper policy file",
        "description": "One application's policies, or a list of such documents (YAML files may also hold several documents separated by ---).",
        "oneOf": [
            {"$ref": "#/$defs/document"},
            {"type": "array", "items": {"$ref": "#/$defs/document"}}
        ],
        "$defs": {
            "document": document,
            "rate": rate,
            "duration": duration,
            "policy": {
                "type": "object",
                "additionalProperties": false,
                "required": ["name", "max_permits"],
                "properties": {
                    "name": {"type": "string"},
                    "algorithm": {"enum": algorithms, "default": "token_bucket"},
                    "rate": {"$ref": "#/$defs/rate"},
                    "max_permits": max_permits,
                    "window": {"$ref": "#/$defs/duration"},
                    "lease": {"$ref": "#/$defs/duration"},
                    "scope": {"enum": ["global", "per_app", "per_key"], "default": "global"},
                    "allowed_apps": {"type": "array", "minItems": 1, "items": {"type": "string"}},
                    "failure_mode": {"enum": ["closed", "open"], "default": "closed"},
                    "enabled": {"type": "boolean", "default": true},
                    "mode": {"enum": ["enforce", "shadow", "block"], "default": "enforce"},
                    "description": {"type": "string", "default": ""},
                    "overrides": {"type": "array", "items": {"$ref": "#/$defs/override"}},
                    "descriptors": {"type": "array", "maxItems": MAX_DESCRIPTORS, "items": {"$ref": "#/$defs/descriptor"}}
                }
            },
            "descriptor": {
                "type": "object",
                "description": "An Envoy-style descriptor pattern: `key=value` entries match that value, `key=val*ue` the values the wildcard matches (one bucket per value, per_key only; `shared key=val*ue`: one bucket for them all), a bare `key` any value (one bucket per value, per_key only)",
                "additionalProperties": false,
                "required": ["entries"],
                "properties": {
                    "domain": {"type": "string", "pattern": DESCRIPTOR_KEY_PATTERN},
                    "entries": {
                        "type": "array",
                        "minItems": 1,
                        "maxItems": MAX_DESCRIPTOR_ENTRIES,
                        "items": {"type": "string", "pattern": "^(shared )?[A-Za-z0-9_.:-]{1,64}(=.+)?$"}
                    },
                    "replaces": {
                        "type": "array",
                        "description": "Policies this pattern stands in for in a gateway's request (envoyproxy/ratelimit's `replaces`)",
                        "maxItems": MAX_REPLACES,
                        "items": {"type": "string", "pattern": "^[A-Za-z0-9][A-Za-z0-9._:/-]{0,127}$"}
                    }
                }
            },
            "override": {
                "type": "object",
                "additionalProperties": false,
                "required": ["match"],
                "properties": {
                    "match": {"type": "string"},
                    "max_permits": max_permits,
                    "rate": {"$ref": "#/$defs/rate"},
                    "window": {"$ref": "#/$defs/duration"},
                    "lease": {"$ref": "#/$defs/duration"}
                }
            }
        }
    })
}
