//! The `ratekeeper` binary's commands, run as a user would run them.

use std::io::Write;
use std::process::{Command, Output, Stdio};

use reqwest::StatusCode;
use serde_json::json;

use crate::helpers::*;

fn ratekeeper(db_url: &str, args: &[&str], stdin: &str) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_ratekeeper"))
        .args(args)
        .env("RATEKEEPER_DATABASE_URL", db_url)
        .env(
            "RATEKEEPER_REDIS_PREFIX",
            format!("rktest-cli-{}", random_suffix()),
        )
        .env("RATEKEEPER_REDIS_URL", redis_url())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary runs");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[tokio::test]
async fn migrate_then_create_an_admin_and_a_token_that_works() {
    let db = fresh_database(Db::Postgres).await;
    let out = ratekeeper(&db, &["migrate"], "");
    assert!(out.status.success(), "{}", text(&out.stderr));
    // Twice is fine: nothing left to apply.
    assert!(ratekeeper(&db, &["migrate"], "").status.success());

    let out = ratekeeper(
        &db,
        &["user", "create", "root", "--admin"],
        "a good password\n",
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        out.stdout.is_empty(),
        "nothing on stdout but what scripts capture"
    );

    let out = ratekeeper(&db, &["token", "create", "root"], "");
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 1, "the token alone on its line: {stdout:?}");
    let token = lines[0];
    assert!(token.starts_with("rk_pat_"));

    // The token opens the admin API of a server on the same database, as an admin.
    let app = spawn_app_with(settings(
        &db,
        &redis_url(),
        &format!("rktest-{}", random_suffix()),
    ))
    .await;
    let r = app
        .post(
            "/api/v1/apps",
            token,
            json!({"slug": "cli-made", "name": "CLI"}),
        )
        .await;
    expect_status(r, StatusCode::CREATED).await;
    let events = app.audit("?app=cli-made").await;
    assert_eq!(events[0]["actor"], "root");
    // The CLI's own changes are audited too, with the operator as actor.
    let users = app.audit("?user=cli").await;
    assert!(
        users
            .iter()
            .any(|e| e["entity_type"] == "user" && e["entity_id"] == "root")
    );
}

#[tokio::test]
async fn user_create_refuses_bad_input_clearly() {
    let db = fresh_database(Db::Sqlite).await;
    let out = ratekeeper(&db, &["user", "create", "ann"], "");
    assert!(!out.status.success());
    assert!(text(&out.stderr).contains("no password on stdin"));

    let out = ratekeeper(&db, &["user", "create", "ann"], "short\n");
    assert!(!out.status.success());
    assert!(text(&out.stderr).contains("password"));

    let out = ratekeeper(&db, &["user", "create", "Not Valid"], "a good password\n");
    assert!(!out.status.success());
    assert!(text(&out.stderr).contains("username"));

    assert!(
        ratekeeper(&db, &["user", "create", "ann"], "a good password\n")
            .status
            .success()
    );
    let out = ratekeeper(&db, &["user", "create", "ann"], "a good password\n");
    assert!(!out.status.success());
    assert!(text(&out.stderr).contains("already exists"));

    let out = ratekeeper(&db, &["token", "create", "nobody"], "");
    assert!(!out.status.success());
    assert!(text(&out.stderr).contains("user not found"));
    assert!(out.stdout.is_empty());
}

#[tokio::test]
async fn bad_configuration_is_refused_with_the_setting_named() {
    let db = fresh_database(Db::Sqlite).await;
    let out = Command::new(env!("CARGO_BIN_EXE_ratekeeper"))
        .arg("migrate")
        .env("RATEKEEPER_DATABASE_URL", &db)
        .env("RATEKEEPER_SYNC_INTERVAL_MS", "soon")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = text(&out.stderr).to_lowercase();
    assert!(stderr.contains("sync_interval_ms"), "{stderr}");

    let out = Command::new(env!("CARGO_BIN_EXE_ratekeeper"))
        .arg("migrate")
        .env("RATEKEEPER_DATABASE_URL", "oracle://x")
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("database_url"),
        "{}",
        text(&out.stderr)
    );
}

#[tokio::test]
async fn serve_makes_a_one_time_admin_on_first_start_only() {
    // Application::build (what `serve` runs) bootstraps `admin` on an empty database.
    let db = fresh_database(Db::Sqlite).await;
    let s = settings(&db, &redis_url(), &format!("rktest-{}", random_suffix()));
    let users = |core: ratekeeper::startup::Core| async move {
        let mut tx = core.store.begin().await.unwrap();
        let n = tx.count_users().await.unwrap();
        let admin = tx.user_by_name("admin").await.unwrap();
        (n, admin.is_some_and(|u| u.is_admin()))
    };
    let first = ratekeeper::startup::Application::build(s.clone())
        .await
        .unwrap();
    assert_eq!(
        users(ratekeeper::startup::Core::build(&s).await.unwrap()).await,
        (1, true)
    );
    drop(first);
    // A second start finds a user and makes none.
    let _second = ratekeeper::startup::Application::build(s.clone())
        .await
        .unwrap();
    assert_eq!(
        users(ratekeeper::startup::Core::build(&s).await.unwrap()).await,
        (1, true)
    );
}
