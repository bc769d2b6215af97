//! Shadow mode (README "Shadow mode"): a policy with `"mode": "shadow"` decides and counts
//! exactly as if enforced, but grants every request, marking the ones it would have denied
//! with `"shadow_denied": true`; its would-be denials are counted apart (top callers,
//! metrics, charts), so an owner sees what a new limit would do before enforcing it.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::helpers::*;
use crate::on_every_backend;

/// Clients firing at once, and acquires each makes of every policy.
const CLIENTS: usize = 32;
const ROUNDS: usize = 25;

/// The sum of the counts of one outcome in a policy's top callers over 5 minutes.
async fn top_sum(app: &TestApp, policy: &str, outcome: &str) -> u64 {
    let path = format!("/api/v1/policies/{policy}/top?minutes=5");
    let top = expect_status(app.get(&path, &app.admin_token).await, StatusCode::OK).await;
    top[outcome]
        .as_array()
        .unwrap_or_else(|| panic!("{top}"))
        .iter()
        .map(|c| c["count"].as_u64().unwrap())
        .sum()
}

/// An enforcing policy and its shadow twin (the same limits) under the same load: the
/// twin grants everything, and what it would have denied is what the enforcing one denies.
async fn a_shadow_twin_would_deny_what_enforcing_denies(db: Db) {
    let app = Arc::new(spawn_app(db).await);
    app.create_app("shop").await;
    let key = Arc::new(app.create_key("shop").await);
    for (name, mode) in [("twin.enforce", "enforce"), ("twin.shadow", "shadow")] {
        let made = app
            .create_policy(json!({"name": name, "owner_app": "shop", "rate": 2.0,
                                  "max_permits": 40, "mode": mode}))
            .await;
        assert_eq!(made["mode"], mode);
    }
    // Every client asks both policies in turn, so both see the same arrivals over time.
    let clients: Vec<_> = (0..CLIENTS)
        .map(|_| {
            let (app, key) = (app.clone(), key.clone());
            tokio::spawn(async move {
                let mut seen: HashMap<&'static str, u64> = HashMap::new();
                for _ in 0..ROUNDS {
                    for name in ["twin.enforce", "twin.shadow"] {
                        let reply = app.acquire(&key, name, 1).await;
                        let status = reply.status();
                        let body: Value = reply.json().await.unwrap();
                        let outcome = match (name, status.as_u16()) {
                            ("twin.enforce", 200) => "enforce granted",
                            ("twin.enforce", 429) => "enforce denied",
                            ("twin.shadow", 200) if body["shadow_denied"] == true => {
                                assert_eq!(body["allowed"], true, "{body}");
                                "shadow would deny"
                            }
                            ("twin.shadow", 200) => "shadow granted",
                            other => panic!("{other:?}: {body}"),
                        };
                        *seen.entry(outcome).or_default() += 1;
                    }
                }
                seen
            })
        })
        .collect();
    let mut seen: HashMap<&'static str, u64> = HashMap::new();
    for client in clients {
        for (outcome, n) in client.await.unwrap() {
            *seen.entry(outcome).or_default() += n;
        }
    }
    let total = (CLIENTS * ROUNDS) as u64;
    let enforce_denied = seen.get("enforce denied").copied().unwrap_or(0);
    let would_deny = seen.get("shadow would deny").copied().unwrap_or(0);
    assert_eq!(
        seen.get("enforce granted").copied().unwrap_or(0) + enforce_denied,
        total,
        "{seen:?}"
    );
    assert_eq!(
        seen.get("shadow granted").copied().unwrap_or(0) + would_deny,
        total,
        "every shadow acquire granted: {seen:?}"
    );
    assert!(
        enforce_denied > total / 2,
        "the load is over the limit: {seen:?}"
    );
    // Within 1% of the load: the two buckets refill over slightly different instants.
    let gap = enforce_denied.abs_diff(would_deny);
    assert!(gap * 100 <= total, "{gap} apart of {total}: {seen:?}");

    // The counts the console and /top show: the would-be denials apart from denials, the
    // same numbers as the replies (one caller, so exact), once the next flush is in.
    let counted = eventually(Duration::from_secs(15), || async {
        top_sum(&app, "twin.shadow", "shadow_denied").await == would_deny
            && top_sum(&app, "twin.enforce", "denied").await == enforce_denied
    })
    .await;
    assert!(
        counted,
        "shadow {} / {would_deny}, enforce {} / {enforce_denied}",
        top_sum(&app, "twin.shadow", "shadow_denied").await,
        top_sum(&app, "twin.enforce", "denied").await
    );
    assert_eq!(top_sum(&app, "twin.shadow", "denied").await, 0);
    assert_eq!(top_sum(&app, "twin.enforce", "shadow_denied").await, 0);
    assert_eq!(
        app.metric("ratekeeper_decisions_total{outcome=\"shadow_denied\",protocol=\"http\"}")
            .await,
        Some(would_deny as f64)
    );
}
on_every_backend!(
    a_shadow_twin_would_deny_what_enforcing_denies,
    a_shadow_twin_would_deny_what_enforcing_denies
);

/// The policies of every algorithm, and of both keyed scopes, with room for one permit.
fn one_permit_policies() -> Vec<Value> {
    let mut all = vec![
        json!({"name": "tb", "rate": 0.001}),
        json!({"algorithm": "fixed_window", "name": "fw", "window_ms": 3_600_000}),
        json!({"algorithm": "sliding_log", "name": "sl", "window_ms": 3_600_000}),
        json!({"algorithm": "sliding_window", "name": "sw", "window_ms": 3_600_000}),
        json!({"algorithm": "concurrency", "name": "cc", "lease_ttl_ms": 3_600_000}),
        json!({"algorithm": "gcra", "name": "gc", "rate": 0.001}),
        json!({"name": "per.app", "rate": 0.001, "scope": "per_app"}),
        json!({"name": "per.key", "rate": 0.001, "scope": "per_key"}),
        json!({"algorithm": "concurrency", "name": "per.key.cc", "lease_ttl_ms": 3_600_000,
               "scope": "per_key"}),
    ];
    for p in &mut all {
        let p = p.as_object_mut().unwrap();
        p.insert("owner_app".into(), json!("shop"));
        p.insert("max_permits".into(), json!(1));
        p.insert("mode".into(), json!("shadow"));
    }
    all
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_algorithm_and_scope_grants_what_it_would_deny() {
    let app = spawn_app(Db::Sqlite).await;
    app.create_app("shop").await;
    let key = app.create_key("shop").await;
    for policy in one_permit_policies() {
        let name = policy["name"].as_str().unwrap().to_owned();
        app.create_policy(policy).await;
        let mut body = json!({"resource": name, "permits": 1});
        if name.starts_with("per.key") {
            body["key"] = json!("user-1");
        }
        let first = app.post("/v1/acquire", &key, body.clone()).await;
        assert!(first.headers().contains_key("ratelimit"), "{name}");
        let first = expect_status(first, StatusCode::OK).await;
        assert_eq!(first.get("shadow_denied"), None, "{name}: {first}");
        // The second would be denied: granted, marked, and without the headers a client
        // would pace itself by (it would carry out the limit itself).
        for _ in 0..2 {
            let second = app.post("/v1/acquire", &key, body.clone()).await;
            assert_eq!(second.status(), StatusCode::OK, "{name}");
            for header in ["retry-after", "ratelimit", "ratelimit-policy"] {
                assert!(!second.headers().contains_key(header), "{name}: {header}");
            }
            let second: Value = second.json().await.unwrap();
            assert_eq!(second["allowed"], true, "{name}: {second}");
            assert_eq!(second["shadow_denied"], true, "{name}: {second}");
            assert_eq!(second["remaining"], 0, "{name}: {second}");
            assert!(
                second["retry_after_ms"].as_i64().unwrap() > 0,
                "what enforcing would say: {name}: {second}"
            );
            // No lease was taken, so there is none to give back.
            assert_eq!(second.get("lease_id"), None, "{name}: {second}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn switching_to_enforce_keeps_the_bucket_and_denies_at_once() {
    let app = spawn_app(Db::Sqlite).await;
    app.create_app("shop").await;
    let key = app.create_key("shop").await;
    app.create_policy(
        json!({"name": "checkout", "owner_app": "shop", "rate": 0.001,
                             "max_permits": 2, "mode": "shadow"}),
    )
    .await;
    assert_eq!(
        app.redis_field(&app.policy_key("checkout"), "mode").await,
        Some("shadow".into())
    );
    for _ in 0..2 {
        expect_status(app.acquire(&key, "checkout", 1).await, StatusCode::OK).await;
    }
    let over = expect_status(app.acquire(&key, "checkout", 1).await, StatusCode::OK).await;
    assert_eq!(over["shadow_denied"], true, "{over}");

    let path = "/api/v1/policies/checkout";
    let changed = app
        .send(
            "PATCH",
            path,
            &app.admin_token,
            Some(json!({"mode": "enforce"})),
        )
        .await;
    let changed = expect_status(changed, StatusCode::OK).await;
    assert_eq!(changed["mode"], "enforce");
    assert_eq!(
        app.redis_field(&app.policy_key("checkout"), "mode").await,
        None
    );
    // The bucket the shadow policy drew down is the one now enforced: empty, so denied,
    // by this very instance at once (no earlier shadow answer lingers).
    let denied = app.acquire(&key, "checkout", 1).await;
    assert_eq!(denied.status(), StatusCode::TOO_MANY_REQUESTS);
    // And back: granted again, marked.
    let back = app
        .send(
            "PATCH",
            path,
            &app.admin_token,
            Some(json!({"mode": "shadow"})),
        )
        .await;
    expect_status(back, StatusCode::OK).await;
    let marked = expect_status(app.acquire(&key, "checkout", 1).await, StatusCode::OK).await;
    assert_eq!(marked["shadow_denied"], true, "{marked}");
    // A mode that is neither is refused by name.
    let bad = app
        .send(
            "PATCH",
            path,
            &app.admin_token,
            Some(json!({"mode": "dry_run"})),
        )
        .await;
    let problem = expect_problem(bad, StatusCode::UNPROCESSABLE_ENTITY).await;
    assert!(problem.to_string().contains("mode"), "{problem}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_policy_page_and_the_file_show_the_mode_and_the_would_be_denials() {
    let app = spawn_app(Db::Sqlite).await;
    app.create_app("shop").await;
    let key = app.create_key("shop").await;
    app.create_policy(json!({"name": "search", "owner_app": "shop", "rate": 0.001,
                             "max_permits": 1, "mode": "shadow"}))
        .await;
    for _ in 0..4 {
        expect_status(app.acquire(&key, "search", 1).await, StatusCode::OK).await;
    }
    // The counts and the top callers reach Redis in the same flush, counts first.
    let flushed = eventually(Duration::from_secs(15), || async {
        top_sum(&app, "search", "shadow_denied").await == 3
    })
    .await;
    assert!(flushed);
    let mut browser = app.sign_in_as_admin().await;
    let page = browser.get("/policies/search").await;
    let body = &page.body;
    assert!(page.has(r#"data-total="shadow_denied">3<"#), "{body}");
    assert!(
        page.has(r#"data-fact="mode"><strong class="warn">shadow"#),
        "{body}"
    );
    assert!(page.has(r#"class="s""#), "a bar of its own: {body}");
    assert!(page.has("Would have been denied (shadow mode)"), "{body}");
    let table = browser.get("/apps/shop").await;
    assert!(
        table.has(r#"data-col="mode""#),
        "marked in its application's table"
    );

    // The policy file carries the mode, and planning it back changes nothing.
    let export = app.export_as_admin("?app=shop").await;
    assert!(export.contains("mode: shadow"), "{export}");
    let plan = app
        .client
        .post(app.url("/api/v1/apply?dry_run=true"))
        .bearer_auth(&app.admin_token)
        .header("content-type", "application/yaml")
        .body(export.replace("mode: shadow", "mode: enforce"))
        .send()
        .await
        .unwrap();
    let plan = expect_status(plan, StatusCode::OK).await;
    assert_eq!(plan["policies"][0]["action"], "update", "{plan}");
    assert!(plan.to_string().contains("\"mode\""), "{plan}");
}

/// Another instance whose SQL is cut off cannot reload the change: only the change notice
/// reaches it. Hearing it is enough to stop answering from the denials it remembers, and
/// to ask Redis, which already has the new mode.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_instance_stops_denying_from_memory_when_it_hears_of_a_switch_to_shadow() {
    let direct = fresh_database(Db::Postgres).await;
    let prefix = test_prefix("mode");
    let first = spawn_app_with(settings(&direct, &redis_url(), &prefix)).await;
    let (mut proxy, through_proxy) = TcpProxy::in_front_of_database(&direct).await;
    let second = spawn_app_with(settings(&through_proxy, &redis_url(), &prefix)).await;

    first.create_app("shop").await;
    let key = first.create_key("shop").await;
    first
        .create_policy(
            json!({"name": "switch.p", "owner_app": "shop", "rate": 0.001,
                              "max_permits": 1}),
        )
        .await;
    let learned = eventually(Duration::from_secs(10), || async {
        second.acquire(&key, "switch.p", 1).await.status() == StatusCode::OK
    })
    .await;
    assert!(learned, "the second instance learned of the key and policy");
    // Denied: the second instance remembers it for the next ~1,000 s (or its sync interval).
    for _ in 0..2 {
        assert_eq!(
            second.acquire(&key, "switch.p", 1).await.status(),
            StatusCode::TOO_MANY_REQUESTS
        );
    }

    proxy.cut().await;
    let changed = first
        .edit_policy("switch.p", json!({"mode": "shadow"}))
        .await;
    assert_eq!(changed["mode"], "shadow");
    let switched = eventually(Duration::from_secs(10), || async {
        let r = second.acquire(&key, "switch.p", 1).await;
        r.status() == StatusCode::OK
            && r.json::<Value>().await.unwrap()["shadow_denied"] == json!(true)
    })
    .await;
    assert!(
        switched,
        "the second instance answers by the new mode once it hears of the change"
    );
}
