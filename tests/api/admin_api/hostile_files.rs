//! Policy files that would make the server work hard, or read them wrong (README "Policy
//! files", its caps): each refused with a 4xx naming the cap before the reading costs
//! much, refused unread for a user who may change no application's policies, and read
//! whole (every document, after a byte-order mark). Plans bind everything they plan.

use reqwest::StatusCode;
use serde_json::Value;

use super::apply::apply;
use super::minimal_policy;
use crate::helpers::*;
use crate::on_every_backend;

/// One application's document with `count` policies named `<prefix><n>`.
fn file_of(app: &str, prefix: &str, count: usize) -> String {
    let mut file = format!("app: {app}\npolicies:\n");
    for n in 0..count {
        file.push_str(&format!(
            "  - name: {prefix}{n}\n    rate: 10/s\n    max_permits: 20\n"
        ));
    }
    file
}

/// The problem's field errors as "field: message" lines.
fn errors_of(problem: &Value) -> Vec<String> {
    problem["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            format!(
                "{}: {}",
                e["field"].as_str().unwrap(),
                e["message"].as_str().unwrap()
            )
        })
        .collect()
}

/// Eight files of each hostile kind posted at once, while a client acquires: every file
/// is refused naming its cap, and the acquires are answered all along.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_files_are_refused_by_their_caps_while_acquires_go_on() {
    let app = spawn_app(Db::Sqlite).await;
    let key = app.shop_with_policy("orders.create", 1000.0, 1000).await;
    let deep = format!(
        "app: shop\npolicies: {}{}\n",
        "[".repeat(60_000),
        "]".repeat(60_000)
    );
    // Each anchor repeats the one before ten times: 10^7 values from 400 bytes.
    let mut bomb = String::from("app: shop\nx0: &a0 [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]\n");
    for level in 1..8 {
        let prev = format!("*a{}", level - 1);
        let items = [prev.as_str(); 10].join(", ");
        bomb.push_str(&format!("x{level}: &a{level} [{items}]\n"));
    }
    bomb.push_str("policies: []\n");
    let mut too_many = String::from("app: shop\npolicies:\n");
    too_many.push_str(&"  - {name: a, max_permits: 1}\n".repeat(100_001));
    let kinds = [
        (deep.as_str(), "nests deeper than 16 levels"),
        (bomb.as_str(), "holds more than 2000000 values"),
        (too_many.as_str(), "lists more than 100000 policies"),
    ];
    let mut posts = Vec::new();
    for (file, _) in kinds {
        for _ in 0..8 {
            posts.push(apply(&app, "?dry_run=true", &app.admin_token, file));
        }
    }
    let acquires = async {
        let mut answered = 0;
        for _ in 0..50 {
            expect_status(app.acquire(&key, "orders.create", 1).await, StatusCode::OK).await;
            answered += 1;
        }
        answered
    };
    let (answers, answered) = tokio::join!(futures_util::future::join_all(posts), acquires);
    assert_eq!(answered, 50);
    for (answer, (_, cap)) in answers.into_iter().zip(kinds.iter().flat_map(|k| [k; 8])) {
        let problem = expect_problem(answer, StatusCode::UNPROCESSABLE_ENTITY).await;
        let errors = errors_of(&problem);
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(errors[0].contains(cap), "{errors:?}");
        assert!(errors[0].starts_with("document 1, line "), "{errors:?}");
    }
    // Over the size cap: 413, naming it.
    let huge = "#".repeat(16 * 1024 * 1024 + 1);
    let problem = expect_problem(
        apply(&app, "?dry_run=true", &app.admin_token, &huge).await,
        StatusCode::PAYLOAD_TOO_LARGE,
    )
    .await;
    assert!(
        problem["detail"].as_str().unwrap().contains("over 16 MiB"),
        "{problem}"
    );
}

/// A user who may change no application's policies is refused before the file is read:
/// a broken file gets the same 403 as a good one.
#[tokio::test]
async fn a_file_from_someone_who_owns_nothing_is_not_read() {
    let app = spawn_app(Db::Sqlite).await;
    app.create_app("shop").await;
    let viewer = app.create_user("vic", Some(("shop", "viewer"))).await;
    let nobody = app.create_user("nora", None).await;
    for token in [&viewer, &nobody] {
        for file in [file_of("shop", "p", 1), "app: [unclosed\n".to_owned()] {
            let problem = expect_problem(
                apply(&app, "?dry_run=true", token, &file).await,
                StatusCode::FORBIDDEN,
            )
            .await;
            assert_eq!(
                problem["detail"], "you may not change the policies of any application",
                "{problem}"
            );
        }
    }
}

/// Every document of a file is read, whatever style the first is in; two JSON values one
/// after the other are an error, not the first alone; a byte-order mark is skipped.
#[tokio::test]
async fn a_file_is_read_whole() {
    let app = spawn_app(Db::Sqlite).await;
    app.create_app("shop").await;
    app.create_app("billing").await;
    let plan_of = |file: String| {
        let app = &app;
        async move {
            let plan = apply(app, "?dry_run=true", &app.admin_token, &file).await;
            let plan = expect_status(plan, StatusCode::OK).await;
            let names: Vec<String> = plan["policies"]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| p["name"].as_str().unwrap().to_owned())
                .collect();
            names
        }
    };
    let flow = "{app: shop, policies: [{name: a, rate: 1, max_permits: 1}]}\n---\n{app: billing, policies: [{name: b, rate: 1, max_permits: 1}]}\n";
    assert_eq!(plan_of(flow.into()).await, ["a", "b"]);
    let json = r#"{"app": "shop", "policies": [{"name": "a", "rate": 1, "max_permits": 1}]}
---
app: billing
policies:
  - name: b
    rate: 1
    max_permits: 1
"#;
    assert_eq!(plan_of(json.into()).await, ["a", "b"]);
    let bom = format!("\u{feff}{}", file_of("shop", "p", 2));
    assert_eq!(plan_of(bom).await, ["p0", "p1"]);
    let two = "{\"app\": \"shop\", \"policies\": []}\n{\"app\": \"billing\", \"policies\": []}\n";
    let problem = expect_problem(
        apply(&app, "?dry_run=true", &app.admin_token, two).await,
        StatusCode::UNPROCESSABLE_ENTITY,
    )
    .await;
    assert_eq!(
        errors_of(&problem),
        ["document 1, line 2: file: trailing characters"]
    );
}

/// Where a file is wrong is said exactly, and a file with thousands of errors gets the
/// first hundred and a count, not all of them.
#[tokio::test]
async fn errors_are_placed_and_capped() {
    let app = spawn_app(Db::Sqlite).await;
    app.create_app("shop").await;
    let misindented = "app: shop\npolicies:\n  - name: a\n    rate: 1/s\n   max_permits: 5\n";
    let problem = expect_problem(
        apply(&app, "?dry_run=true", &app.admin_token, misindented).await,
        StatusCode::UNPROCESSABLE_ENTITY,
    )
    .await;
    let errors = errors_of(&problem);
    assert!(
        errors[0].starts_with("document 1, line 5: file: not YAML"),
        "{errors:?}"
    );
    let empty = "# nothing here yet\n";
    let problem = expect_problem(
        apply(&app, "?dry_run=true", &app.admin_token, empty).await,
        StatusCode::UNPROCESSABLE_ENTITY,
    )
    .await;
    assert!(
        errors_of(&problem)[0].contains("file: is empty: a document names an application"),
        "{problem}"
    );
    let mut many = String::from("app: shop\npolicies:\n");
    for n in 0..3000 {
        many.push_str(&format!(
            "  - name: p{n}\n    rate: 1\n    max_permits: 0\n"
        ));
    }
    let answer = apply(&app, "?dry_run=true", &app.admin_token, &many).await;
    let problem = expect_problem(answer, StatusCode::UNPROCESSABLE_ENTITY).await;
    let errors = errors_of(&problem);
    assert_eq!(errors.len(), 101);
    assert_eq!(
        errors[100],
        "document 1: file: and 2900 more errors (the first 100 are shown)"
    );
    assert!(
        problem.to_string().len() < 40_000,
        "{}",
        problem.to_string().len()
    );
}

/// What only the database knows is capped the same way: 150 policies allowing an
/// application that does not exist.
#[tokio::test]
async fn database_errors_are_capped_too() {
    let app = spawn_app(Db::Sqlite).await;
    app.create_app("shop").await;
    let mut file = String::from("app: shop\npolicies:\n");
    for n in 0..150 {
        file.push_str(&format!(
            "  - name: p{n}\n    rate: 1\n    max_permits: 1\n    allowed_apps: [nowhere]\n"
        ));
    }
    let answer = apply(&app, "?dry_run=true", &app.admin_token, &file).await;
    let problem = expect_problem(answer, StatusCode::UNPROCESSABLE_ENTITY).await;
    let errors = errors_of(&problem);
    assert_eq!(errors.len(), 101);
    assert_eq!(errors[0], "p0.allowed_apps: no such application: nowhere");
    assert_eq!(
        errors[100],
        "file: and 50 more errors (the first 100 are shown)"
    );
}

/// A plan's id binds the settings of the policies it creates, and one that is not this
/// file's plan says so rather than that something changed.
#[tokio::test]
async fn a_plan_id_binds_what_it_creates() {
    let app = spawn_app(Db::Sqlite).await;
    app.create_app("shop").await;
    app.create_policy(minimal_policy("kept", "shop")).await;
    let planned = "app: shop\npolicies:\n  - name: kept\n    rate: 10\n    max_permits: 20\n  - name: z\n    rate: 1\n    max_permits: 1\n";
    let plan = apply(&app, "?dry_run=true", &app.admin_token, planned).await;
    let plan = expect_status(plan, StatusCode::OK).await;
    let query = format!("?plan_id={}", plan["plan_id"].as_str().unwrap());
    let other = "app: shop\npolicies:\n  - name: kept\n    rate: 10\n    max_permits: 20\n  - name: z\n    rate: 1000\n    max_permits: 1\n    failure_mode: open\n";
    let problem = expect_problem(
        apply(&app, &query, &app.admin_token, other).await,
        StatusCode::CONFLICT,
    )
    .await;
    let detail = problem["detail"].as_str().unwrap();
    assert!(detail.contains("the plan of another file"), "{detail}");
    assert!(!detail.contains("changed since"), "{detail}");
    expect_problem(
        app.get("/api/v1/policies/z", &app.admin_token).await,
        StatusCode::NOT_FOUND,
    )
    .await;
    // The planned file applies by its plan, and the same plan made again has the same id.
    let again = apply(&app, "?dry_run=true", &app.admin_token, planned).await;
    assert_eq!(
        expect_status(again, StatusCode::OK).await["plan_id"],
        plan["plan_id"]
    );
    let applied = apply(&app, &query, &app.admin_token, planned).await;
    expect_status(applied, StatusCode::OK).await;
    let z = expect_status(
        app.get("/api/v1/policies/z", &app.admin_token).await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(
        (z["rate"].as_f64(), z["failure_mode"].as_str()),
        (Some(1.0), Some("closed"))
    );
}

/// A file far over the old 256 KiB body limit, as the README's GitOps recipe joins them:
/// planned and applied over the API.
#[tokio::test]
async fn a_large_file_plans_and_applies() {
    let app = spawn_app(Db::Sqlite).await;
    app.create_app("shop").await;
    let file = file_of("shop", "bulk.", 10_000);
    assert!(file.len() > 512 * 1024);
    let plan = apply(&app, "?dry_run=true", &app.admin_token, &file).await;
    let plan = expect_status(plan, StatusCode::OK).await;
    assert_eq!(plan["policies"].as_array().unwrap().len(), 10_000);
    let query = format!("?plan_id={}", plan["plan_id"].as_str().unwrap());
    let applied = apply(&app, &query, &app.admin_token, &file).await;
    assert_eq!(
        expect_status(applied, StatusCode::OK).await["applied"],
        true
    );
    let listed = app.get("/api/v1/policies?app=shop", &app.admin_token).await;
    let listed = expect_status(listed, StatusCode::OK).await;
    assert_eq!(listed.as_array().unwrap().len(), 10_000);
}

/// Two applies at once that create the same new policies, without a plan_id: both
/// answer 200 (the later one is made again, and finds them there), never a 409.
async fn simultaneous_creates_both_apply(db: Db) {
    let app = spawn_app(db).await;
    app.create_app("shop").await;
    for round in 0..6 {
        let file = file_of("shop", &format!("r{round}."), 10);
        let (first, second) = tokio::join!(
            apply(&app, "", &app.admin_token, &file),
            apply(&app, "", &app.admin_token, &file)
        );
        for answer in [first, second] {
            let plan = expect_status(answer, StatusCode::OK).await;
            assert_eq!(plan["applied"], true, "round {round}");
        }
    }
}
on_every_backend!(apply_simultaneous_creates, simultaneous_creates_both_apply);
