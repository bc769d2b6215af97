//! `ratekeeper policies import-envoy`: every example config of envoyproxy/ratelimit's
//! README (tests/fixtures/envoy) converted, the policies checked, and the output applied
//! to a real server as a policy file; what has no ratekeeper equivalent (the `refused_`
//! fixtures) refused with its line.

use std::process::Command;

use ratekeeper::policy_file::{AppDocument, EnvoyErrors, FilePolicy, from_envoy};
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::helpers::*;

mod configs;
mod wildcards;

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/envoy");

fn fixture(name: &str) -> (String, String) {
    let path = format!("{FIXTURES}/{name}");
    let text = std::fs::read_to_string(&path).expect("the fixture exists");
    (name.to_owned(), text)
}

fn convert(names: &[&str]) -> Result<AppDocument, EnvoyErrors> {
    let files: Vec<(String, String)> = names.iter().map(|n| fixture(n)).collect();
    from_envoy(&files, "shop", &[])
}

/// A policy as the test compares it: name, scope, algorithm, max_permits, window,
/// enabled, mode, and its pattern as a line (`domain: entries`, then `; replaces names`).
fn summary(p: &FilePolicy) -> Value {
    let d = &p.descriptors[0];
    let replaces = if d.replaces.is_empty() {
        String::new()
    } else {
        format!("; replaces {}", d.replaces.join(", "))
    };
    json!([
        p.name,
        p.scope,
        p.algorithm,
        p.max_permits,
        serde_json::to_value(&p.window).unwrap(),
        p.enabled,
        p.mode,
        format!(
            "{}: {}{replaces}",
            d.domain.as_deref().unwrap(),
            d.entries.join(", ")
        ),
    ])
}

/// The convertible examples, and the policies each becomes.
fn expected() -> Vec<(&'static str, Value)> {
    let mut all = without_wildcards();
    all.extend(wildcards::expected());
    all
}

fn without_wildcards() -> Vec<(&'static str, Value)> {
    vec![
        (
            "example1_mongo_cps.yaml",
            json!([
                [
                    "mongo_cps/database:users",
                    "global",
                    "fixed_window",
                    500,
                    "1s",
                    true,
                    "enforce",
                    "mongo_cps: database=users"
                ],
                [
                    "mongo_cps/database:default",
                    "global",
                    "fixed_window",
                    500,
                    "1s",
                    true,
                    "enforce",
                    "mongo_cps: database=default"
                ]
            ]),
        ),
        (
            "example2_messaging.yaml",
            json!([
                [
                    "messaging/message_type:marketing/to_number",
                    "per_key",
                    "fixed_window",
                    5,
                    "1d",
                    true,
                    "enforce",
                    "messaging: message_type=marketing, to_number"
                ],
                [
                    "messaging/to_number",
                    "per_key",
                    "fixed_window",
                    100,
                    "1d",
                    true,
                    "enforce",
                    "messaging: to_number"
                ]
            ]),
        ),
        (
            "example3_edge_proxy_per_ip.yaml",
            json!([
                [
                    "edge_proxy_per_ip/remote_address",
                    "per_key",
                    "fixed_window",
                    10,
                    "1s",
                    true,
                    "enforce",
                    "edge_proxy_per_ip: remote_address"
                ],
                [
                    "edge_proxy_per_ip/remote_address:50.0.0.5",
                    "global",
                    "fixed_window",
                    1,
                    "1s",
                    true,
                    "block",
                    "edge_proxy_per_ip: remote_address=50.0.0.5"
                ]
            ]),
        ),
        (
            "example7_replaces.yaml",
            json!([
                [
                    "specific_limit",
                    "global",
                    "fixed_window",
                    5,
                    "1s",
                    true,
                    "enforce",
                    "example7: key_1=value_1, user=bkthomps"
                ],
                [
                    "example7/key_2:value_2/user:bkthomps",
                    "global",
                    "fixed_window",
                    10,
                    "1s",
                    true,
                    "enforce",
                    "example7: key_2=value_2, user=bkthomps; replaces specific_limit"
                ]
            ]),
        ),
        (
            "example4_not_matching.yaml",
            json!([[
                "example4/key:value",
                "global",
                "fixed_window",
                300,
                "1s",
                true,
                "enforce",
                "example4: key=value"
            ]]),
        ),
        (
            "example4_matching.yaml",
            json!([[
                "example4/key:value/subkey",
                "per_key",
                "fixed_window",
                300,
                "1s",
                true,
                "enforce",
                "example4: key=value, subkey"
            ]]),
        ),
        (
            "example5_internal.yaml",
            json!([
                [
                    "internal/ldap",
                    "per_key",
                    "fixed_window",
                    1,
                    "1s",
                    false,
                    "enforce",
                    "internal: ldap"
                ],
                [
                    "internal/azure",
                    "per_key",
                    "fixed_window",
                    100,
                    "1m",
                    true,
                    "enforce",
                    "internal: azure"
                ]
            ]),
        ),
        (
            "example6_shadow_mode.yaml",
            json!([
                [
                    "example6/service/user:user-a",
                    "per_key",
                    "fixed_window",
                    10,
                    "1s",
                    true,
                    "shadow",
                    "example6: service, user=user-a"
                ],
                [
                    "example6/service/user:user-b",
                    "per_key",
                    "fixed_window",
                    20,
                    "1s",
                    true,
                    "enforce",
                    "example6: service, user=user-b"
                ]
            ]),
        ),
        (
            "example8_detailed_metric.yaml",
            json!([
                [
                    "example8/key1",
                    "per_key",
                    "fixed_window",
                    10,
                    "1m",
                    true,
                    "enforce",
                    "example8: key1"
                ],
                [
                    "example8/key1:value1",
                    "global",
                    "fixed_window",
                    20,
                    "1m",
                    true,
                    "enforce",
                    "example8: key1=value1"
                ]
            ]),
        ),
        (
            "example10_value_to_metric.yaml",
            json!([[
                "example10/route/http_method/subject_id",
                "per_key",
                "fixed_window",
                60,
                "1m",
                true,
                "enforce",
                "example10: route, http_method, subject_id"
            ]]),
        ),
    ]
}

/// The configs refused, and a line of theirs the error names with words it says.
const REFUSED: [(&str, &str, &str); 2] = [
    (
        "refused_shadow_of_zero.yaml",
        "rate_limit:",
        "`shadow_mode` on a limit of 0 has no ratekeeper equivalent",
    ),
    (
        "refused_unknown_replaces.yaml",
        "- name: no_such_limit",
        "`replaces` names `no_such_limit`, which no rate limit of domain example7 is called",
    ),
];

/// The 1-based line of `text` holding `needle`.
fn line_of(text: &str, needle: &str) -> usize {
    text.lines()
        .position(|l| l.contains(needle))
        .expect("the needle")
        + 1
}

#[test]
fn every_readme_example_converts_or_is_refused_by_its_line() {
    for (name, policies) in expected() {
        let document = convert(&[name]).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(document.app, "shop");
        let got: Vec<Value> = document.policies.iter().map(summary).collect();
        assert_eq!(Value::from(got), policies, "{name}");
        for p in &document.policies {
            assert_eq!(p.allowed_apps, Some(vec!["shop".to_owned()]), "{name}");
            assert!(
                p.description
                    .as_ref()
                    .unwrap()
                    .starts_with("Imported from envoyproxy/ratelimit")
            );
        }
    }
    for (name, needle, words) in REFUSED {
        let errors = convert(&[name]).expect_err(name);
        let text = fixture(name).1;
        let (file, first) = &errors.0[0];
        assert_eq!(file, name);
        assert_eq!(
            (first.document, first.line),
            (1, line_of(&text, needle)),
            "{name}: {errors}"
        );
        assert!(first.message.contains(words), "{name}: {errors}");
    }
}

#[tokio::test]
async fn what_converts_applies_to_a_server_and_the_binary_prints_it() {
    let app = spawn_app(Db::Sqlite).await;
    app.create_app("shop").await;
    for (name, _) in expected() {
        let yaml = serde_norway::to_string(&convert(&[name]).unwrap()).unwrap();
        let plan = expect_status(apply(&app, "", &yaml).await, StatusCode::OK).await;
        assert_eq!(plan["applied"], true, "{name}: {plan}");
        let created = plan["policies"].as_array().unwrap();
        assert!(
            created.iter().all(|p| p["action"] == "create"),
            "{name}: {plan}"
        );
        // Applied again: nothing to change.
        let again = expect_status(apply(&app, "?dry_run=true", &yaml).await, StatusCode::OK).await;
        assert!(
            again["policies"]
                .as_array()
                .unwrap()
                .iter()
                .all(|p| p["action"] == "unchanged"),
            "{name}: {again}"
        );
    }
    let stored = stored_policy(&app, "messaging/message_type:marketing/to_number").await;
    assert_eq!(stored["scope"], "per_key");
    assert_eq!(stored["window_ms"], 86_400_000);
    assert_eq!(
        stored["descriptors"],
        json!([{"domain": "messaging", "entries": ["message_type=marketing", "to_number"]}])
    );
    let ldap = stored_policy(&app, "internal/ldap").await;
    assert_eq!(ldap["enabled"], false);
    let blocked = stored_policy(&app, "edge_proxy_per_ip/remote_address:50.0.0.5").await;
    assert_eq!(blocked["mode"], "block");
    let replacing = stored_policy(&app, "example7/key_2:value_2/user:bkthomps").await;
    assert_eq!(
        replacing["descriptors"][0]["replaces"],
        json!(["specific_limit"])
    );

    // The binary prints the same file, and refuses a bad one naming file and line.
    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_ratekeeper"))
            .args(["policies", "import-envoy"])
            .args(args)
            .current_dir(FIXTURES)
            .env_remove("RATEKEEPER_TOKEN")
            .output()
            .expect("the binary runs")
    };
    let out = run(&[
        "example1_mongo_cps.yaml",
        "example2_messaging.yaml",
        "--app",
        "shop",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let both = convert(&["example1_mongo_cps.yaml", "example2_messaging.yaml"]).unwrap();
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        serde_norway::to_string(&both).unwrap()
    );
    let out = run(&["refused_shadow_of_zero.yaml", "--app", "shop"]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("refused_shadow_of_zero.yaml: document 1, line 8:"),
        "{stderr}"
    );
    let out = run(&["example1_mongo_cps.yaml"]);
    assert!(!out.status.success(), "--app is required");
}

/// A policy as the admin API answers it (its name's slashes escaped in the path).
async fn stored_policy(app: &TestApp, name: &str) -> Value {
    let path = format!("/api/v1/policies/{}", name.replace('/', "%2F"));
    expect_status(app.get(&path, &app.admin_token).await, StatusCode::OK).await
}

async fn apply(app: &TestApp, query: &str, file: &str) -> reqwest::Response {
    app.client
        .post(app.url(&format!("/api/v1/apply{query}")))
        .bearer_auth(&app.admin_token)
        .header("content-type", "application/yaml")
        .body(file.to_owned())
        .send()
        .await
        .expect("request sent")
}
