//! The conformance scenarios (`clients/conformance/scenarios/*.json`) played with this
//! library against the server of the fixture named by `RK_CONFORMANCE_FIXTURE`.
//!
//! libtest has no tests made at run time, so one test plays every scenario, each with
//! fresh clients, and prints a line per scenario (`conformance: <stem> ... ok` or
//! `... FAILED: <step and field>`; run with `--nocapture` to see them); it fails naming
//! every failed scenario. Without `RK_CONFORMANCE_FIXTURE` it passes with a note.
//! `RK_CONFORMANCE_SCENARIOS` names another scenarios directory; `RK_CONFORMANCE_ONLY`
//! (names separated by commas) plays only those.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;

use ratekeeper_client::{AcquireOptions, AllItem, CallOptions, Client, Decision, Error, Released};
use serde_json::{Map, Value, json};

struct Fixture {
    url: String,
    prefix: String,
    keys: HashMap<String, String>,
    unreachable_url: String,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conformance_scenarios() {
    let Ok(path) = std::env::var("RK_CONFORMANCE_FIXTURE") else {
        eprintln!("conformance: skipped (RK_CONFORMANCE_FIXTURE is unset)");
        return;
    };
    let fixture: Value =
        serde_json::from_str(&std::fs::read_to_string(&path).expect("the fixture"))
            .expect("the fixture is JSON");
    let fixture = Fixture {
        url: fixture["url"].as_str().expect("url").to_owned(),
        prefix: fixture["prefix"].as_str().expect("prefix").to_owned(),
        keys: serde_json::from_value(fixture["keys"].clone()).expect("keys"),
        unreachable_url: fixture["unreachable_url"]
            .as_str()
            .expect("unreachable_url")
            .to_owned(),
    };
    let dir = std::env::var("RK_CONFORMANCE_SCENARIOS")
        .map(PathBuf::from)
        .unwrap_or_else(|_| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../conformance/scenarios")
        });
    let only: Option<Vec<String>> = std::env::var("RK_CONFORMANCE_ONLY")
        .ok()
        .map(|names| names.split(',').map(|n| n.trim().to_owned()).collect());
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("the scenarios {}: {e}", dir.display()))
        .filter_map(|entry| Some(entry.ok()?.path()))
        .filter(|path| path.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    let mut failed = Vec::new();
    let mut passed = 0;
    for file in files {
        let stem = file.file_stem().unwrap().to_string_lossy().to_string();
        if only.as_ref().is_some_and(|names| !names.contains(&stem)) {
            continue;
        }
        let outcome = match std::fs::read_to_string(&file)
            .map_err(|e| e.to_string())
            .and_then(|text| serde_json::from_str::<Value>(&text).map_err(|e| e.to_string()))
        {
            Ok(scenario) => play(&fixture, &scenario).await,
            Err(e) => Err(format!("cannot read the scenario: {e}")),
        };
        match outcome {
            Ok(()) => {
                passed += 1;
                eprintln!("conformance: {stem} ... ok");
            }
            Err(why) => {
                eprintln!("conformance: {stem} ... FAILED: {why}");
                failed.push(stem);
            }
        }
    }
    eprintln!("conformance: {passed} passed, {} failed", failed.len());
    assert!(failed.is_empty(), "failed scenarios: {}", failed.join(", "));
}

/// The clients of one scenario: one per role and server, with the defaults.
struct Clients {
    by: HashMap<(String, bool), Client>,
}

impl Clients {
    fn new(fixture: &Fixture) -> Self {
        let mut by = HashMap::new();
        for role in ["caller", "stranger", "bad_key"] {
            let key = fixture
                .keys
                .get(role)
                .cloned()
                .unwrap_or_else(|| "rk_made_up_key_0000000000000000".to_owned());
            for unreachable in [false, true] {
                let url = if unreachable {
                    &fixture.unreachable_url
                } else {
                    &fixture.url
                };
                let client = Client::builder(url.as_str(), key.as_str())
                    .build()
                    .expect("a client");
                by.insert((role.to_owned(), unreachable), client);
            }
        }
        Self { by }
    }
}

async fn play(fixture: &Fixture, scenario: &Value) -> Result<(), String> {
    let clients = Clients::new(fixture);
    let prefixed = |name: &str| format!("{}.{name}", fixture.prefix);
    let mut lease_ids: Vec<Option<String>> = Vec::new();
    let steps = scenario["steps"].as_array().ok_or("no steps")?;
    for (index, step) in steps.iter().enumerate() {
        let op = step["op"].as_str().unwrap_or("");
        let role = step["as"].as_str().unwrap_or("caller");
        let unreachable = step["server"].as_str() == Some("unreachable");
        let client = clients
            .by
            .get(&(role.to_owned(), unreachable))
            .ok_or_else(|| format!("step {index}: no client for {role}"))?;
        let resource = prefixed(step["resource"].as_str().unwrap_or(""));
        let key = step["key"].as_str().map(str::to_owned);
        let fail_open = step["fail_open"].as_bool();
        let timeout = step["timeout_ms"].as_u64().map(Duration::from_millis);
        let options = AcquireOptions {
            permits: step["permits"].as_i64().unwrap_or(1),
            key: key.clone(),
            fail_open,
            timeout,
            wait: step["wait_ms"].as_u64().map(Duration::from_millis),
        };
        let result: Result<Value, Error> = match op {
            "acquire" => client
                .acquire(&resource, options)
                .await
                .map(|d| decision(&d)),
            "check" => client.check(&resource, options).await.map(|d| decision(&d)),
            "refund" => client
                .refund(
                    &resource,
                    step["permits"].as_i64().unwrap_or(1),
                    key.as_deref(),
                )
                .await
                .map(|d| decision(&d)),
            "release" => {
                let from = step["lease_id_from"]
                    .as_u64()
                    .ok_or_else(|| format!("step {index}: no lease_id_from"))?;
                let id = lease_ids
                    .get(from as usize)
                    .cloned()
                    .flatten()
                    .ok_or_else(|| format!("step {index}: step {from} has no lease_id"))?;
                client
                    .release(&resource, &id, key.as_deref())
                    .await
                    .map(|r| released(&r))
            }
            "lease" => match client.lease(&resource, options).await {
                Ok(lease) => {
                    let granted = lease.decision().clone();
                    match lease.release().await {
                        Ok(_) => Ok(decision(&granted)),
                        Err(e) => Err(e),
                    }
                }
                Err(Error::Denied(denial)) => Ok(decision(&denial)),
                Err(e) => Err(e),
            },
            "acquire_all" => {
                let items: Vec<AllItem> = step["items"]
                    .as_array()
                    .ok_or_else(|| format!("step {index}: no items"))?
                    .iter()
                    .map(|item| AllItem {
                        resource: prefixed(item["resource"].as_str().unwrap_or("")),
                        key: item["key"].as_str().map(str::to_owned),
                        permits: item["permits"].as_i64(),
                    })
                    .collect();
                client
                    .acquire_all(&items, CallOptions { fail_open, timeout })
                    .await
                    .map(|all| {
                        let mut value = json!({
                            "allowed": all.allowed,
                            "results": all.results.iter().map(decision).collect::<Vec<_>>(),
                        });
                        value["headers"] = headers(all.headers.iter());
                        value
                    })
            }
            other => return Err(format!("step {index}: unknown op {other:?}")),
        };
        let expect = step["expect"].as_object().cloned().unwrap_or_default();
        lease_ids.push(
            result
                .as_ref()
                .ok()
                .and_then(|v| v["lease_id"].as_str())
                .map(str::to_owned),
        );
        check(&expect, &result).map_err(|why| format!("step {index} ({op}): {why}"))?;
    }
    Ok(())
}

fn headers<'a>(pairs: impl Iterator<Item = (&'static str, &'a str)>) -> Value {
    Value::Object(
        pairs
            .map(|(name, value)| (name.to_ascii_lowercase(), Value::from(value)))
            .collect(),
    )
}

fn decision(d: &Decision) -> Value {
    json!({
        "allowed": d.allowed,
        "remaining": d.remaining,
        "limit": d.limit,
        "retry_after_ms": d.retry_after_ms,
        "reset_after_ms": d.reset_after_ms,
        "degraded": d.degraded,
        "cached": d.cached,
        "enforced": d.enforced,
        "shadow_denied": d.shadow_denied,
        "policy_version": d.policy_version,
        "lease_id": d.lease_id,
        "has_lease_id": d.lease_id.as_deref().is_some_and(|id| !id.is_empty()),
        "headers": headers(d.headers.iter()),
    })
}

fn released(r: &Released) -> Value {
    json!({"released": r.released, "permits": r.permits, "remaining": r.remaining})
}

fn check(expect: &Map<String, Value>, result: &Result<Value, Error>) -> Result<(), String> {
    let actual = match (result, expect.get("error")) {
        (Err(error), Some(wanted)) => {
            if error.kind_name() != wanted.as_str().unwrap_or("") {
                return Err(format!(
                    "error: expected {wanted}, got {}: {error}",
                    error.kind_name()
                ));
            }
            if let Some(field) = expect.get("error_field") {
                let got = error.problem().and_then(|p| p.field());
                if got != field.as_str() {
                    return Err(format!("error_field: expected {field}, got {got:?}"));
                }
            }
            return Ok(());
        }
        (Err(error), None) => return Err(format!("raised {}: {error}", error.kind_name())),
        (Ok(value), Some(wanted)) => {
            return Err(format!("expected the error {wanted}, got {value}"));
        }
        (Ok(value), None) => value,
    };
    check_fields(expect, actual)
}

fn check_fields(expect: &Map<String, Value>, actual: &Value) -> Result<(), String> {
    for (field, wanted) in expect {
        let got = &actual[field.as_str()];
        match field.as_str() {
            "results" => {
                let wanted = wanted.as_array().ok_or("results: not a list")?;
                let got = got.as_array().ok_or("results: none")?;
                if wanted.len() != got.len() {
                    return Err(format!(
                        "results: expected {} got {}",
                        wanted.len(),
                        got.len()
                    ));
                }
                for (i, (w, g)) in wanted.iter().zip(got).enumerate() {
                    let w = w.as_object().cloned().unwrap_or_default();
                    check_fields(&w, g).map_err(|why| format!("results[{i}].{why}"))?;
                }
            }
            "headers" => {
                let wanted = wanted.as_object().ok_or("headers: not an object")?;
                for (name, value) in wanted {
                    let got = &got[name.to_ascii_lowercase()];
                    let ok = match value.as_str() {
                        Some("present") => got.is_string(),
                        Some(exact) => got.as_str() == Some(exact),
                        None => false,
                    };
                    if !ok {
                        return Err(format!("headers.{name}: expected {value}, got {got}"));
                    }
                }
            }
            _ => {
                let ok = match wanted {
                    Value::Object(range) => got.as_f64().is_some_and(|n| {
                        range
                            .get("min")
                            .and_then(Value::as_f64)
                            .is_none_or(|min| n >= min)
                            && range
                                .get("max")
                                .and_then(Value::as_f64)
                                .is_none_or(|max| n <= max)
                    }),
                    Value::Number(n) => got.as_f64() == n.as_f64(),
                    other => got == other,
                };
                if !ok {
                    return Err(format!("{field}: expected {wanted}, got {got}"));
                }
            }
        }
    }
    Ok(())
}
