//! The wildcard examples (9 to 11) of envoyproxy/ratelimit's README, and the policies each
//! becomes: a per-value wildcard makes a per_key policy, `share_threshold: true` a
//! `shared` entry whose values count in one bucket.

use serde_json::{Value, json};

pub(super) fn expected() -> Vec<(&'static str, Value)> {
    vec![
        (
            "example9_trailing_wildcard.yaml",
            json!([[
                "example9/key1:value-",
                "per_key",
                "fixed_window",
                20,
                "1m",
                true,
                "enforce",
                "example9: key1=value*"
            ]]),
        ),
        (
            "example9_middle_wildcard.yaml",
            json!([[
                "example9/path:/api/-/action",
                "per_key",
                "fixed_window",
                20,
                "1m",
                true,
                "enforce",
                "example9: path=/api/*/action"
            ]]),
        ),
        (
            "example9_multiple_wildcards.yaml",
            json!([[
                "example9/route:/api/-/resource/-/action",
                "per_key",
                "fixed_window",
                20,
                "1m",
                true,
                "enforce",
                "example9: route=/api/*/resource/*/action"
            ]]),
        ),
        (
            "example10_wildcard.yaml",
            json!([[
                "example10_wildcard/user/action:read-/resource",
                "per_key",
                "fixed_window",
                100,
                "1m",
                true,
                "enforce",
                "example10_wildcard: user, action=read*, resource"
            ]]),
        ),
        (
            "example11_share_threshold.yaml",
            json!([
                [
                    "example11/shared-files:files/-",
                    "global",
                    "fixed_window",
                    10,
                    "1h",
                    true,
                    "enforce",
                    "example11: shared files=files/*"
                ],
                [
                    "example11/files_no_share:files_no_share/-",
                    "per_key",
                    "fixed_window",
                    10,
                    "1h",
                    true,
                    "enforce",
                    "example11: files_no_share=files_no_share/*"
                ]
            ]),
        ),
        (
            "example11_metrics.yaml",
            json!([[
                "example11_metrics/shared-route:api/-/method",
                "per_key",
                "fixed_window",
                60,
                "1m",
                true,
                "enforce",
                "example11_metrics: shared route=api/*, method"
            ]]),
        ),
    ]
}
