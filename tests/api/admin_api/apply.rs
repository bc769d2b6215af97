//! Plan and apply a policy file (README "Policy files"): `POST /api/v1/apply?dry_run=true`
//! lists exactly the differences; without `dry_run` it makes them all or none, audited as
//! the token's user, in the history and in Redis; permission and plan conflicts change
//! nothing (read back as the admin, with no audit event written).

use reqwest::{Response, StatusCode};
use secrecy::ExposeSecret;
use serde_json::{Value, json};

use super::{admin_reads, minimal_policy};
use crate::helpers::*;
use crate::on_every_backend;
use crate::on_row_locking_backends;

pub(super) async fn apply(app: &TestApp, query: &str, token: &str, file: &str) -> Response {
    app.client
        .post(app.url(&format!("/api/v1/apply{query}")))
        .bearer_auth(token)
        .header("content-type", "application/yaml")
        .body(file.to_owned())
        .send()
        .await
        .expect("request sent")
}

/// Everything a change could touch: the policies as the admin reads them, and how many
/// audit events there are.
async fn state_of(app: &TestApp) -> (Value, usize) {
    let policies = admin_reads(app, "/api/v1/policies").await;
    (policies, app.audit("").await.len())
}

/// The plan's (name, action) pairs.
fn actions(plan: &Value) -> Vec<(String, String)> {
    plan["policies"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["name"].as_str().unwrap().to_owned(),
                p["action"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

/// shop with `orders.create` (10/s, max 20) and `search` (10/s, max 20), billing with
/// `invoices.list`.
async fn shop_and_billing(app: &TestApp) {
    app.create_app("shop").await;
    app.create_app("billing").await;
    for (name, owner) in [
        ("orders.create", "shop"),
        ("search", "shop"),
        ("invoices.list", "billing"),
    ] {
        app.create_policy(minimal_policy(name, owner)).await;
    }
}

/// shop's file: orders.create unchanged, search at 2/min, a new `pings`; no `search`
/// is deleted, `orders.create`... (see each test).
const SHOP_FILE: &str = "app: shop
policies:
  - name: orders.create
    rate: 10
    max_permits: 20
  - name: search
    rate: 120/min
    max_permits: 20
  - name: pings
    rate: 1/min
    max_permits: 1
";

async fn export_then_apply_changes_nothing(db: Db) {
    let app = spawn_app(db).await;
    shop_and_billing(&app).await;
    let exported = app.export_as_admin("").await;
    let before = state_of(&app).await;
    let plan = expect_status(
        apply(
            &app,
            "?dry_run=true&prune=true",
            &app.admin_token,
            &exported,
        )
        .await,
        StatusCode::OK,
    )
    .await;
    assert!(
        actions(&plan).iter().all(|(_, a)| a == "unchanged"),
        "{plan}"
    );
    assert_eq!(actions(&plan).len(), 3);
    let applied = expect_status(
        apply(&app, "?prune=true", &app.admin_token, &exported).await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(applied["applied"], true);
    assert_eq!(applied["plan_id"], plan["plan_id"]);
    assert_eq!(
        state_of(&app).await,
        before,
        "nothing changed, nothing audited"
    );
}
on_every_backend!(apply_export_is_a_no_op, export_then_apply_changes_nothing);

async fn a_plan_lists_exactly_the_differences(db: Db) {
    let app = spawn_app(db).await;
    shop_and_billing(&app).await;
    app.create_policy(minimal_policy("old", "shop")).await;
    let before = state_of(&app).await;
    let plan = expect_status(
        apply(&app, "?dry_run=true", &app.admin_token, SHOP_FILE).await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(plan["applied"], false);
    let pairs = |v: &[(&str, &str)]| -> Vec<(String, String)> {
        v.iter()
            .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
            .collect()
    };
    assert_eq!(
        actions(&plan),
        pairs(&[
            ("orders.create", "unchanged"),
            ("search", "update"),
            ("pings", "create")
        ])
    );
    // The update's diff: only the rate, in the file's units.
    assert_eq!(
        plan["policies"][1]["changes"],
        json!([{"field": "rate", "before": "600/min", "after": "120/min"}])
    );
    assert_eq!(plan["policies"][1]["version"], 1);
    // With prune, shop's policy the file does not list is deleted; billing's is not.
    let pruned = expect_status(
        apply(
            &app,
            "?dry_run=true&prune=true",
            &app.admin_token,
            SHOP_FILE,
        )
        .await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(
        actions(&pruned),
        pairs(&[
            ("orders.create", "unchanged"),
            ("search", "update"),
            ("pings", "create"),
            ("old", "delete")
        ])
    );
    assert_ne!(pruned["plan_id"], plan["plan_id"]);
    assert_eq!(state_of(&app).await, before, "a dry run changes nothing");
}
on_every_backend!(apply_plan_differences, a_plan_lists_exactly_the_differences);

async fn apply_is_all_or_nothing(db: Db) {
    let app = spawn_app(db).await;
    shop_and_billing(&app).await;
    let before = state_of(&app).await;
    // The parser's errors: one bad policy among good ones.
    let bad = format!("{SHOP_FILE}  - name: broken\n    rate: 5/week\n    max_permits: 1\n");
    let problem = expect_problem(
        apply(&app, "", &app.admin_token, &bad).await,
        StatusCode::UNPROCESSABLE_ENTITY,
    )
    .await;
    assert_eq!(
        problem["field"], "document 1, line 13: policies[3].rate",
        "{problem}"
    );
    // What only the database knows: an allowed application that does not exist.
    let unknown = format!(
        "{SHOP_FILE}  - name: broken\n    rate: 5\n    max_permits: 1\n    allowed_apps: [shop, nowhere]\n"
    );
    let problem = expect_problem(
        apply(&app, "", &app.admin_token, &unknown).await,
        StatusCode::UNPROCESSABLE_ENTITY,
    )
    .await;
    assert_eq!(problem["field"], "broken.allowed_apps", "{problem}");
    assert!(problem["detail"].as_str().unwrap().contains("nowhere"));
    // A body that is no text is a 400 (one over the caps: admin_api/hostile_files.rs).
    let r = app
        .client
        .post(app.url("/api/v1/apply"))
        .bearer_auth(&app.admin_token)
        .body(vec![0xff, 0xfe, b'a'])
        .send()
        .await
        .unwrap();
    expect_problem(r, StatusCode::BAD_REQUEST).await;
    assert_eq!(state_of(&app).await, before);
}
on_every_backend!(apply_atomic, apply_is_all_or_nothing);

async fn an_owner_applies_only_to_their_applications(db: Db) {
    let app = spawn_app(db).await;
    shop_and_billing(&app).await;
    let owner = app.create_user("olga", Some(("shop", "owner"))).await;
    let before = state_of(&app).await;
    let both = format!(
        "{SHOP_FILE}---\napp: billing\npolicies:\n  - name: invoices.list\n    rate: 1\n    max_permits: 1\n"
    );
    for query in ["", "?dry_run=true"] {
        let problem = expect_problem(
            apply(&app, query, &owner, &both).await,
            StatusCode::FORBIDDEN,
        )
        .await;
        let detail = problem["detail"].as_str().unwrap();
        assert!(
            detail.contains("billing") && !detail.contains("shop"),
            "{detail}"
        );
    }
    // Naming a policy billing owns under shop touches billing too.
    let stolen = "app: shop\npolicies:\n  - name: invoices.list\n    rate: 1\n    max_permits: 1\n";
    let problem =
        expect_problem(apply(&app, "", &owner, stolen).await, StatusCode::FORBIDDEN).await;
    assert!(problem["detail"].as_str().unwrap().contains("billing"));
    assert_eq!(state_of(&app).await, before);
    // Their own application's file applies.
    expect_status(apply(&app, "", &owner, SHOP_FILE).await, StatusCode::OK).await;
}
on_every_backend!(
    apply_permissions,
    an_owner_applies_only_to_their_applications
);

async fn a_stale_plan_applies_nothing(db: Db) {
    let app = spawn_app(db).await;
    shop_and_billing(&app).await;
    let plan = expect_status(
        apply(&app, "?dry_run=true", &app.admin_token, SHOP_FILE).await,
        StatusCode::OK,
    )
    .await;
    // Someone edits `search` in between.
    app.edit_policy("search", json!({"max_permits": 7})).await;
    let before = state_of(&app).await;
    let query = format!("?plan_id={}", plan["plan_id"].as_str().unwrap());
    let problem = expect_problem(
        apply(&app, &query, &app.admin_token, SHOP_FILE).await,
        StatusCode::CONFLICT,
    )
    .await;
    let detail = problem["detail"].as_str().unwrap();
    assert!(detail.contains("search"), "{detail}");
    assert!(
        !detail.contains("orders.create") && !detail.contains("pings"),
        "{detail}"
    );
    assert_eq!(state_of(&app).await, before);
    // The plan made again applies.
    let again = expect_status(
        apply(&app, "?dry_run=true", &app.admin_token, SHOP_FILE).await,
        StatusCode::OK,
    )
    .await;
    let query = format!("?plan_id={}", again["plan_id"].as_str().unwrap());
    expect_status(
        apply(&app, &query, &app.admin_token, SHOP_FILE).await,
        StatusCode::OK,
    )
    .await;
}
on_every_backend!(apply_stale_plan, a_stale_plan_applies_nothing);

async fn applied_changes_are_stored_audited_versioned_and_enforced(db: Db) {
    let app = spawn_app(db).await;
    shop_and_billing(&app).await;
    app.create_policy(minimal_policy("old", "shop")).await;
    let key = app.create_key("shop").await;
    // Redis knows `old` before.
    expect_status(app.acquire(&key, "old", 1).await, StatusCode::OK).await;
    let owner = app.create_user("olga", Some(("shop", "owner"))).await;
    let plan = expect_status(
        apply(&app, "?prune=true", &owner, SHOP_FILE).await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(plan["applied"], true);

    // In SQL.
    let search = admin_reads(&app, "/api/v1/policies/search").await;
    assert_eq!(search["rate"].as_f64(), Some(2.0));
    assert_eq!(search["version"], 2);
    let pings = admin_reads(&app, "/api/v1/policies/pings").await;
    assert_eq!(pings["max_permits"], 1);
    expect_problem(
        app.get("/api/v1/policies/old", &app.admin_token).await,
        StatusCode::NOT_FOUND,
    )
    .await;
    // Audited as the token's user, one event per change.
    let events = app.audit("?user=olga").await;
    let mut done: Vec<(String, String, String)> = events
        .iter()
        .map(|e| {
            (
                e["actor"].as_str().unwrap().to_owned(),
                e["action"].as_str().unwrap().to_owned(),
                e["entity_id"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    done.sort();
    let olga = |action: &str, name: &str| ("olga".to_owned(), action.to_owned(), name.to_owned());
    assert_eq!(
        done,
        [
            olga("create", "pings"),
            olga("delete", "old"),
            olga("update", "search")
        ]
    );
    // In the history.
    let versions = admin_reads(&app, "/api/v1/policies/search/versions").await;
    assert_eq!(versions[0]["version"], 2);
    assert_eq!(versions[0]["author"], "olga");
    let versions = admin_reads(&app, "/api/v1/policies/pings/versions").await;
    assert_eq!(versions[0]["action"], "create");
    // Enforced: pings allows one permit, then denies; `old` is gone.
    expect_status(app.acquire(&key, "pings", 1).await, StatusCode::OK).await;
    let denied = app.acquire(&key, "pings", 1).await;
    assert_eq!(denied.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(
        app.acquire(&key, "old", 1).await.status(),
        StatusCode::NOT_FOUND
    );
}
on_every_backend!(
    apply_takes_effect,
    applied_changes_are_stored_audited_versioned_and_enforced
);

/// shop's file setting each of `names` (in that order) to `max_permits`.
fn policies_at(names: &[String], max_permits: i64) -> String {
    let mut file = "app: shop\npolicies:\n".to_owned();
    for name in names {
        file.push_str(&format!(
            "  - name: {name}\n    rate: 10\n    max_permits: {max_permits}\n"
        ));
    }
    file
}

/// Two applies at once by two owners, both updating the same ten policies, listed in
/// opposite orders (so that row locks taken in file order could deadlock): each answers
/// 200 or 409, never a 5xx, at least one applies, and the policies end as one file left
/// them, never a mix. By plan_id (as the CLI applies: both planned on the same state, so
/// one plan is stale once the other applied) and without (both apply, one after the
/// other).
async fn overlapping_applies_end_as_one_file(db: Db) {
    let app = spawn_app(db).await;
    app.create_app("shop").await;
    let names: Vec<String> = (0..10).map(|n| format!("p{n}")).collect();
    for name in &names {
        app.create_policy(minimal_policy(name, "shop")).await;
    }
    let reversed: Vec<String> = names.iter().rev().cloned().collect();
    let tokens = [
        app.create_user("olga", Some(("shop", "owner"))).await,
        app.create_user("oscar", Some(("shop", "owner"))).await,
    ];
    for round in 0..12 {
        let by_plan = round % 2 == 0;
        let maxes = [100 + 2 * round, 101 + 2 * round];
        let files = [
            policies_at(&names, maxes[0]),
            policies_at(&reversed, maxes[1]),
        ];
        let mut queries = [String::new(), String::new()];
        if by_plan {
            for (query, file) in queries.iter_mut().zip(&files) {
                let plan = apply(&app, "?dry_run=true", &tokens[0], file).await;
                let plan = expect_status(plan, StatusCode::OK).await;
                *query = format!("?plan_id={}", plan["plan_id"].as_str().unwrap());
            }
        }
        let (first, second) = tokio::join!(
            apply(&app, &queries[0], &tokens[0], &files[0]),
            apply(&app, &queries[1], &tokens[1], &files[1])
        );
        let mut applied = Vec::new();
        for (response, max) in [(first, maxes[0]), (second, maxes[1])] {
            let status = response.status();
            let body = response.text().await.unwrap();
            assert!(
                status == StatusCode::OK || status == StatusCode::CONFLICT,
                "round {round}: {status} {body}"
            );
            if status == StatusCode::OK {
                applied.push(max);
            }
        }
        assert!(!applied.is_empty(), "round {round}: neither applied");
        if by_plan {
            assert_eq!(applied.len(), 1, "round {round}: one plan is stale");
        }
        let policies = admin_reads(&app, "/api/v1/policies?app=shop").await;
        let ends: Vec<i64> = policies
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["max_permits"].as_i64().unwrap())
            .collect();
        assert_eq!(ends.len(), names.len());
        assert!(
            ends.iter().all(|m| *m == ends[0]) && applied.contains(&ends[0]),
            "round {round}: {ends:?}, applied {applied:?}"
        );
    }
}
on_every_backend!(apply_overlapping, overlapping_applies_end_as_one_file);

/// An apply that the database aborts (a deadlock, a serialization failure: SQLSTATE
/// 40001) is made again from the start, once: the caller sees 200 and the file's state,
/// not the abort, and the change lands exactly once. The abort is forced, so that the
/// retry runs every time: a trigger raises SQLSTATE 40001 at the first audit event
/// written, and lets every later one through; it counts its calls outside the
/// transaction it aborts (a PostgreSQL sequence, a MariaDB MyISAM table: neither is rolled
/// back). A real deadlock is classified as such an abort in `store::transactions`. Not on
/// SQLite, whose one writer cannot deadlock and which has no SQLSTATE to raise.
async fn an_apply_aborted_by_the_database_is_made_again(db: Db) {
    let app = spawn_app(db).await;
    app.create_app("shop").await;
    app.create_policy(minimal_policy("x", "shop")).await;
    let owner = app.create_user("olga", Some(("shop", "owner"))).await;
    let mut sql = abort_the_first_audit_event(&app, db).await;

    let file = "app: shop\npolicies:\n  - name: x\n    rate: 10\n    max_permits: 3\n";
    let plan = expect_status(apply(&app, "", &owner, file).await, StatusCode::OK).await;
    assert_eq!(plan["applied"], true);
    assert_eq!(actions(&plan), [("x".to_owned(), "update".to_owned())]);

    // The trigger ran twice: it aborted the first attempt, and let the retry's event in.
    assert_eq!(audit_trigger_calls(&mut sql, db).await, 2);
    // The change landed once: one new version, one audit event, one history entry.
    let x = admin_reads(&app, "/api/v1/policies/x").await;
    assert_eq!(
        (x["max_permits"].as_i64(), x["version"].as_i64()),
        (Some(3), Some(2))
    );
    let events = app.audit("?user=olga").await;
    let done: Vec<_> = events
        .iter()
        .map(|e| {
            (
                e["action"].as_str().unwrap(),
                e["entity_id"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(done, [("update", "x")]);
    let versions = admin_reads(&app, "/api/v1/policies/x/versions").await;
    assert_eq!(versions.as_array().unwrap().len(), 2, "{versions}");
}

/// Installs, on the app's database, a trigger that aborts the first insert into
/// `audit_events` with SQLSTATE 40001 (serialization failure) and lets every later one
/// through; returns the connection, to read how often it ran (`audit_trigger_calls`).
async fn abort_the_first_audit_event(app: &TestApp, db: Db) -> sqlx::AnyConnection {
    use sqlx::Connection;
    let url = app.settings.database_url.expose_secret();
    let mut sql = sqlx::AnyConnection::connect(url).await.unwrap();
    let statements: &[&str] = match db {
        // nextval() is never rolled back: the count survives the abort.
        Db::Postgres => &[
            "CREATE SEQUENCE audit_trigger_calls",
            "CREATE FUNCTION abort_first_audit() RETURNS trigger LANGUAGE plpgsql AS $$ \
             BEGIN \
                 IF nextval('audit_trigger_calls') = 1 THEN \
                     RAISE EXCEPTION 'test: the first audit event aborts' \
                         USING ERRCODE = 'serialization_failure'; \
                 END IF; \
                 RETURN NEW; \
             END $$",
            "CREATE TRIGGER abort_first_audit BEFORE INSERT ON audit_events \
             FOR EACH ROW EXECUTE FUNCTION abort_first_audit()",
        ],
        // MyISAM is not transactional: the row the trigger writes stays after the abort.
        Db::MySql => &[
            "CREATE TABLE audit_trigger_calls (n INT) ENGINE = MyISAM",
            "CREATE TRIGGER abort_first_audit BEFORE INSERT ON audit_events FOR EACH ROW \
             BEGIN \
                 INSERT INTO audit_trigger_calls VALUES (1); \
                 IF (SELECT COUNT(*) FROM audit_trigger_calls) = 1 THEN \
                     SIGNAL SQLSTATE '40001' \
                         SET MESSAGE_TEXT = 'test: the first audit event aborts'; \
                 END IF; \
             END",
        ],
        Db::Sqlite => unreachable!("SQLite raises no SQLSTATE"),
    };
    for statement in statements {
        sqlx::raw_sql(sqlx::AssertSqlSafe(*statement))
            .execute(&mut sql)
            .await
            .expect("the trigger is installed");
    }
    sql
}

/// How often the trigger of `abort_the_first_audit_event` ran.
async fn audit_trigger_calls(sql: &mut sqlx::AnyConnection, db: Db) -> i64 {
    let query = match db {
        Db::Postgres => "SELECT last_value FROM audit_trigger_calls",
        Db::MySql => "SELECT COUNT(*) FROM audit_trigger_calls",
        Db::Sqlite => unreachable!("SQLite raises no SQLSTATE"),
    };
    sqlx::query_scalar(sqlx::AssertSqlSafe(query))
        .fetch_one(sql)
        .await
        .unwrap()
}

on_row_locking_backends!(
    apply_after_an_abort,
    an_apply_aborted_by_the_database_is_made_again
);
