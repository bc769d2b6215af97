//! The `ratekeeper` binary's commands, run as a user would run them.

use std::io::Write;
use std::process::{Command, Output, Stdio};

use reqwest::StatusCode;
use serde_json::json;

use crate::helpers::*;

fn ratekeeper(db_url: &str, args: &[&str], stdin: &str) -> Output {
    ratekeeper_with(db_url, args, stdin, &[])
}

/// The binary with more environment variables (later ones win), never an inherited token.
fn ratekeeper_with(db_url: &str, args: &[&str], stdin: &str, env: &[(&str, &str)]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_ratekeeper"))
        .args(args)
        .env("RATEKEEPER_DATABASE_URL", db_url)
        .env("RATEKEEPER_REDIS_PREFIX", test_prefix("cli"))
        .env("RATEKEEPER_REDIS_URL", redis_url())
        .env_remove("RATEKEEPER_TOKEN")
        .envs(env.iter().copied())
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
    let app = spawn_app_with(settings(&db, &redis_url(), &test_prefix("app"))).await;
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
    // A read-only token of the same admin reads and changes nothing.
    let out = ratekeeper(
        &db,
        &[
            "token",
            "create",
            "root",
            "--label",
            "dash",
            "--read-only",
            "--expires-at",
            "2099-01-01T00:00:00Z",
        ],
        "",
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let reader = text(&out.stdout).trim().to_owned();
    expect_status(
        app.get("/api/v1/apps/cli-made", &reader).await,
        StatusCode::OK,
    )
    .await;
    let r = app
        .post(
            "/api/v1/apps",
            &reader,
            json!({"slug": "nope", "name": "No"}),
        )
        .await;
    expect_status(r, StatusCode::FORBIDDEN).await;
    // The CLI's own changes are audited too, with the operator as actor.
    let users = app.audit("?user=cli").await;
    assert!(
        users.iter().any(|e| e["entity_type"] == "user"
            && e["entity_id"] == "root"
            && e["source"] == "cli")
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

    // A user linked to the provider's subject; an unknown user, or a subject linked to
    // another user, refused saying so.
    let out = ratekeeper(&db, &["user", "link-oidc", "ann", "idp|ann-42"], "");
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("idp|ann-42"));
    let out = ratekeeper(&db, &["user", "link-oidc", "nobody", "idp|x"], "");
    assert!(!out.status.success());
    assert!(text(&out.stderr).contains("no user named \"nobody\""));
    ratekeeper(&db, &["user", "create", "bob"], "a good password\n");
    let out = ratekeeper(&db, &["user", "link-oidc", "bob", "idp|ann-42"], "");
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("signs in as ann already"),
        "{}",
        text(&out.stderr)
    );

    let out = ratekeeper(&db, &["token", "create", "nobody"], "");
    assert!(!out.status.success());
    assert!(text(&out.stderr).contains("no user named \"nobody\""));
    assert!(out.stdout.is_empty());

    let out = ratekeeper(
        &db,
        &["token", "create", "ann", "--expires-at", "tomorrow"],
        "",
    );
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("expires_at"),
        "{}",
        text(&out.stderr)
    );
    let out = ratekeeper(
        &db,
        &[
            "token",
            "create",
            "ann",
            "--expires-at",
            "2001-01-01T00:00:00Z",
        ],
        "",
    );
    assert!(!out.status.success());
    assert!(text(&out.stderr).contains("must be in the future"));
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
        .env("RATEKEEPER_DATABASE_URL", &db)
        .env("RATEKEEPER_REDIS_STATE", "keyed")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = text(&out.stderr);
    assert!(
        stderr.to_lowercase().contains("redis_state") && stderr.contains("`packed` or `hash`"),
        "{stderr}"
    );

    let out = Command::new(env!("CARGO_BIN_EXE_ratekeeper"))
        .arg("migrate")
        .env("RATEKEEPER_DATABASE_URL", &db)
        .env("RATEKEEPER_KEYED_EXPIRY", "never")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = text(&out.stderr);
    assert!(
        stderr.to_lowercase().contains("keyed_expiry") && stderr.contains("`held` or `exact`"),
        "{stderr}"
    );

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
    let s = settings(&db, &redis_url(), &test_prefix("app"));
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

/// Runs the binary to its end, or kills it after `limit`: a start that hangs is a failure
/// (`None`), not a wait. Returns the exit code and stderr.
fn run_bounded(cmd: &mut Command, limit: std::time::Duration) -> (Option<i32>, String) {
    let mut child = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary runs");
    let deadline = std::time::Instant::now() + limit;
    let code = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status.code();
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    (code, stderr)
}

#[tokio::test]
async fn a_database_that_cannot_be_reached_is_named_with_why_and_without_its_password() {
    let port = free_port();
    let limit = std::time::Duration::from_secs(20);
    let cases = [
        (
            format!("postgres://bob:s3cret-pw@127.0.0.1:{port}/rk"),
            format!("127.0.0.1:{port}"),
            "refused",
        ),
        (
            "postgres://nosuchrole@127.0.0.1:5432/postgres".to_owned(),
            "nosuchrole".to_owned(),
            "does not exist",
        ),
        (
            format!("sqlite:///no-such-dir-{}/rk.db", random_suffix()),
            "/rk.db".to_owned(),
            "unable to open",
        ),
    ];
    for (url, named, why) in cases {
        let (code, stderr) = run_bounded(
            Command::new(env!("CARGO_BIN_EXE_ratekeeper"))
                .arg("migrate")
                .env("RATEKEEPER_DATABASE_URL", &url),
            limit,
        );
        assert!(code.is_some_and(|c| c != 0), "{url}: {code:?} {stderr}");
        assert!(stderr.contains(&named), "{url}: {stderr}");
        assert_eq!(stderr.matches(why).count(), 1, "{url}: once, {stderr}");
        assert!(!stderr.contains("s3cret-pw"), "{stderr}");
    }
}

#[tokio::test]
async fn help_names_every_setting_and_the_config_file() {
    for args in [&["--help"][..], &["serve", "--help"]] {
        let out = Command::new(env!("CARGO_BIN_EXE_ratekeeper"))
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success());
        let help = text(&out.stdout);
        for name in [
            "RATEKEEPER_CONFIG",
            "RATEKEEPER_LISTEN",
            "RATEKEEPER_DATABASE_URL",
            "RATEKEEPER_DATABASE_TIMEOUT_MS",
            "RATEKEEPER_REDIS_URL",
            "RATEKEEPER_REDIS_PREFIX",
            "RATEKEEPER_REDIS_TIMEOUT_MS",
            "RATEKEEPER_REDIS_STATE",
            "RATEKEEPER_KEYED_EXPIRY",
            "RATEKEEPER_SYNC_INTERVAL_MS",
            "RATEKEEPER_WORKERS",
            "RATEKEEPER_LOG_JSON",
            "RATEKEEPER_PUBLIC_URL",
            "RATEKEEPER_WEBHOOK_ALLOW_PRIVATE",
            "RATEKEEPER_OIDC_ISSUER",
            "RATEKEEPER_OIDC_CLIENT_ID",
            "RATEKEEPER_OIDC_CLIENT_SECRET",
            "RATEKEEPER_OIDC_NAME",
            "RATEKEEPER_OIDC_ADMIN_GROUP",
            "RATEKEEPER_PASSWORD_SIGN_IN",
        ] {
            assert!(help.contains(name), "{args:?} lacks {name}");
        }
    }
}

/// `ratekeeper serve` on a fresh SQLite database, with `env` beside its settings and
/// mimalloc's purge delay as the test's own environment has it (none, unless `env` sets
/// it): the child once it logs that it listens, and what it logged until then.
async fn serve_until_listening(env: &[(&str, &str)]) -> (std::process::Child, String) {
    let db = fresh_database(Db::Sqlite).await;
    let mut child = Command::new(env!("CARGO_BIN_EXE_ratekeeper"))
        .arg("serve")
        .env("RATEKEEPER_DATABASE_URL", &db)
        .env("RATEKEEPER_LISTEN", "127.0.0.1:0")
        .env("RATEKEEPER_REDIS_URL", redis_url())
        .env("RATEKEEPER_REDIS_PREFIX", test_prefix("cli"))
        .env("RUST_LOG", "info")
        .env_remove("MIMALLOC_PURGE_DELAY")
        .envs(env.iter().copied())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let listening = std::thread::spawn(move || {
        let mut seen = String::new();
        for line in std::io::BufRead::lines(std::io::BufReader::new(stderr)) {
            let line = line.unwrap();
            seen.push_str(&line);
            seen.push('\n');
            if line.contains("ratekeeper listening") {
                break;
            }
        }
        seen
    });
    let seen = tokio::task::spawn_blocking(move || listening.join().unwrap())
        .await
        .unwrap();
    (child, seen)
}

#[tokio::test]
async fn logs_written_to_a_pipe_carry_no_colour_codes() {
    let (mut child, seen) = serve_until_listening(&[]).await;
    let _ = child.kill();
    let _ = child.wait();
    assert!(seen.contains("ratekeeper listening"), "{seen}");
    assert!(
        !seen.contains('\u{1b}'),
        "colour codes in a log file: {seen:?}"
    );
}

/// The server gives memory it freed back to the system within a tenth of a second
/// (src/main.rs: it starts again with mimalloc's purge delay set), unless the operator set
/// the delay: read from the running server's environment.
#[cfg(target_os = "linux")]
#[tokio::test]
async fn the_server_runs_with_mimallocs_purge_delay_set_unless_the_operator_set_it() {
    for (env, expected) in [
        (&[][..], "MIMALLOC_PURGE_DELAY=100"),
        (
            &[("MIMALLOC_PURGE_DELAY", "700")][..],
            "MIMALLOC_PURGE_DELAY=700",
        ),
    ] {
        let (mut child, seen) = serve_until_listening(env).await;
        let environ = std::fs::read(format!("/proc/{}/environ", child.id()));
        let _ = child.kill();
        let _ = child.wait();
        assert!(seen.contains("ratekeeper listening"), "{seen}");
        let environ = environ.expect("the server's environment is readable");
        let purge: Vec<&[u8]> = environ
            .split(|b| *b == 0)
            .filter(|v| v.starts_with(b"MIMALLOC_PURGE_DELAY="))
            .collect();
        assert_eq!(purge, vec![expected.as_bytes()], "{env:?}");
    }
}

/// A server on a fresh SQLite database with applications shop and billing, and the
/// shop's policy `orders.create`.
async fn shop_and_billing() -> (String, TestApp) {
    let db = fresh_database(Db::Sqlite).await;
    let app = spawn_app_with(settings(&db, &redis_url(), &test_prefix("app"))).await;
    app.create_app("shop").await;
    app.create_app("billing").await;
    app.create_policy(
        json!({"name": "orders.create", "owner_app": "shop", "rate": 2.5, "max_permits": 10}),
    )
    .await;
    (db, app)
}

#[tokio::test]
async fn policies_export_prints_the_file_from_the_database() {
    let (db, app) = shop_and_billing().await;
    app.create_policy(
        json!({"name": "jobs.run", "owner_app": "billing", "algorithm": "concurrency",
        "lease_ttl_ms": 30000, "max_permits": 3}),
    )
    .await;
    let names = |out: &Output| -> Vec<String> {
        assert!(out.status.success(), "{}", text(&out.stderr));
        let mut names: Vec<String> = ratekeeper::policy_file::parse(&text(&out.stdout))
            .unwrap()
            .iter()
            .map(|s| s.name.to_string())
            .collect();
        names.sort();
        names
    };

    let all = ratekeeper(&db, &["policies", "export"], "");
    assert_eq!(names(&all), ["jobs.run", "orders.create"]);
    // What the API exports, byte for byte.
    let r = app.get("/api/v1/export", &app.admin_token).await;
    assert_eq!(text(&all.stdout), r.text().await.unwrap());

    let shop = ratekeeper(&db, &["policies", "export", "--app", "shop"], "");
    assert_eq!(names(&shop), ["orders.create"]);
    let json = ratekeeper(
        &db,
        &["policies", "export", "--app", "billing", "--json"],
        "",
    );
    assert!(text(&json.stdout).trim_start().starts_with('['));
    assert_eq!(names(&json), ["jobs.run"]);

    let unknown = ratekeeper(&db, &["policies", "export", "--app", "nowhere"], "");
    assert!(!unknown.status.success());
    assert!(text(&unknown.stderr).contains("no application \"nowhere\""));
    assert!(unknown.stdout.is_empty());
}

/// The binary run off the test's runtime, so that the server it talks to keeps serving.
async fn ratekeeper_async(
    db_url: &str,
    args: &[&str],
    stdin: &str,
    env: &[(&str, &str)],
) -> Output {
    let owned = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let (db_url, args, stdin) = (db_url.to_owned(), owned(args), stdin.to_owned());
    let env: Vec<(String, String)> = env
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        ratekeeper_with(&db_url, &args, &stdin, &env)
    })
    .await
    .unwrap()
}

/// The shop's file: `orders.create` kept, `search` made slower, `pings` new.
const SHOP_FILE: &str = "\
app: shop
policies:
  - name: orders.create
    rate: 2.5
    max_permits: 10
  - name: search
    rate: 2/s
    max_permits: 5
  - name: pings
    algorithm: fixed_window
    window: 1m
    max_permits: 60
";

#[tokio::test]
async fn policies_plan_and_apply_against_a_server_with_an_owners_token() {
    let (db, app) = shop_and_billing().await;
    app.create_policy(
        json!({"name": "search", "owner_app": "shop", "rate": 10.0, "max_permits": 5}),
    )
    .await;
    let token = app.create_user("olga", Some(("shop", "owner"))).await;
    let dir = fresh_dir("cli");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("shop.yaml");
    std::fs::write(&file, SHOP_FILE).unwrap();
    let file = file.to_str().unwrap();
    let with_token = [("RATEKEEPER_TOKEN", token.as_str())];
    let run = |command: &'static str, file: String, env: Vec<(&'static str, String)>| {
        let (db, server) = (db.clone(), app.address.clone());
        async move {
            let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
            ratekeeper_async(
                &db,
                &["policies", command, &file, "--server", &server],
                "",
                &env,
            )
            .await
        }
    };
    let env = |pairs: &[(&'static str, &str)]| -> Vec<(&'static str, String)> {
        pairs.iter().map(|(k, v)| (*k, v.to_string())).collect()
    };

    let plan = run("plan", file.into(), env(&with_token)).await;
    assert!(plan.status.success(), "{}", text(&plan.stderr));
    let shown = text(&plan.stdout);
    assert!(shown.contains("= unchanged orders.create\n"), "{shown}");
    assert!(
        shown.contains("~ update search: rate 10/s -> 2/s\n"),
        "{shown}"
    );
    assert!(shown.contains("+ create pings (shop)\n"), "{shown}");
    assert!(
        shown.contains("Plan: 1 to create, 1 to update, 0 to delete, 1 unchanged."),
        "{shown}"
    );
    // A plan changes nothing.
    expect_problem(
        app.get("/api/v1/policies/pings", &app.admin_token).await,
        StatusCode::NOT_FOUND,
    )
    .await;

    let applied = run("apply", file.into(), env(&with_token)).await;
    assert!(applied.status.success(), "{}", text(&applied.stderr));
    assert!(text(&applied.stdout).contains("Applied: 1 to create, 1 to update"));
    let pings = expect_status(
        app.get("/api/v1/policies/pings", &app.admin_token).await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(pings["window_ms"], 60000);
    let search = expect_status(
        app.get("/api/v1/policies/search", &app.admin_token).await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(search["rate"], 2.0);
    let events = app.audit("?app=shop").await;
    assert!(
        events
            .iter()
            .any(|e| e["actor"] == "olga" && e["source"] == "api" && e["change_set"].is_string()),
        "audited as the token's user, through the API, as one change set: {events:?}"
    );

    let again = run("plan", file.into(), env(&with_token)).await;
    assert!(again.status.success(), "{}", text(&again.stderr));
    let shown = text(&again.stdout);
    assert!(
        shown.contains("Plan: 0 to create, 0 to update, 0 to delete, 3 unchanged."),
        "{shown}"
    );

    // No token: refused before anything is sent, the variable named.
    let changed = SHOP_FILE.replace("max_permits: 60", "max_permits: 61");
    std::fs::write(dir.join("changed.yaml"), &changed).unwrap();
    let changed_path = dir.join("changed.yaml").to_str().unwrap().to_owned();
    let missing = run("apply", changed_path.clone(), Vec::new()).await;
    assert!(!missing.status.success());
    assert!(
        text(&missing.stderr).contains("RATEKEEPER_TOKEN"),
        "{}",
        text(&missing.stderr)
    );
    assert!(missing.stdout.is_empty());

    // Another application's policy: the server's 403, shown plainly, nothing changed.
    let billing = dir.join("billing.yaml");
    std::fs::write(&billing, format!("{changed}---\napp: billing\npolicies:\n  - name: mails\n    rate: 1\n    max_permits: 1\n")).unwrap();
    let forbidden = run("apply", billing.to_str().unwrap().into(), env(&with_token)).await;
    assert!(!forbidden.status.success());
    let stderr = text(&forbidden.stderr);
    assert!(
        stderr.contains("403") && stderr.contains("billing"),
        "{stderr}"
    );
    let pings = expect_status(
        app.get("/api/v1/policies/pings", &app.admin_token).await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(pings["max_permits"], 60, "nothing applied");
    expect_problem(
        app.get("/api/v1/policies/mails", &app.admin_token).await,
        StatusCode::NOT_FOUND,
    )
    .await;
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test]
async fn policies_apply_without_a_server_writes_the_database_and_pushes_to_redis() {
    let db = fresh_database(Db::Postgres).await;
    let prefix = test_prefix("app");
    let app = spawn_app_with(settings(&db, &redis_url(), &prefix)).await;
    app.create_app("shop").await;
    app.create_policy(
        json!({"name": "orders.create", "owner_app": "shop", "rate": 2.5, "max_permits": 10}),
    )
    .await;
    let env = [("RATEKEEPER_REDIS_PREFIX", prefix.as_str())];

    let plan = ratekeeper_async(
        &db,
        &["policies", "plan", "-", "--prune"],
        "app: shop\npolicies: []\n",
        &env,
    )
    .await;
    assert!(plan.status.success(), "{}", text(&plan.stderr));
    assert!(
        text(&plan.stdout).contains("- delete orders.create\n"),
        "{}",
        text(&plan.stdout)
    );

    let applied = ratekeeper_async(&db, &["policies", "apply", "-"], SHOP_FILE, &env).await;
    assert!(applied.status.success(), "{}", text(&applied.stderr));
    assert!(
        text(&applied.stdout)
            .contains("Applied: 2 to create, 0 to update, 0 to delete, 1 unchanged.")
    );
    expect_status(
        app.get("/api/v1/policies/search", &app.admin_token).await,
        StatusCode::OK,
    )
    .await;
    assert!(
        app.redis_exists(&app.policy_key("search")).await,
        "pushed to Redis as the server does"
    );

    let bad = ratekeeper_async(
        &db,
        &["policies", "apply", "-"],
        "app: shop\npolicies:\n  - name: x\n",
        &env,
    )
    .await;
    assert!(!bad.status.success());
    assert!(
        text(&bad.stderr).contains("max_permits"),
        "{}",
        text(&bad.stderr)
    );
}

/// A directory of the test's own for files the binary reads.
fn scratch_dir() -> std::path::PathBuf {
    let dir = fresh_dir("cli");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// `path` written with `text`, as a string for the command line.
fn write_file(path: std::path::PathBuf, text: &str) -> String {
    std::fs::write(&path, text).unwrap();
    path.to_str().unwrap().to_owned()
}

#[tokio::test]
async fn policies_over_https_verify_the_server_against_the_ca_file() {
    let (db, app) = shop_and_billing().await;
    let token = app.create_user("olga", Some(("shop", "owner"))).await;
    let ca = TestCa::new();
    let target = app.address.trim_start_matches("http://").parse().unwrap();
    let proxy = TlsProxy::start(target, &ca).await;
    let dir = scratch_dir();
    let file = write_file(dir.join("shop.yaml"), SHOP_FILE);
    let ca_file = write_file(dir.join("ca.pem"), &ca.pem);
    let other_ca = write_file(dir.join("other-ca.pem"), &TestCa::new().pem);
    let with_token = ("RATEKEEPER_TOKEN", token.as_str());
    let apply = |extra: &'static [&'static str], env: Vec<(&'static str, String)>| {
        let (db, file, server) = (db.clone(), file.clone(), proxy.url.clone());
        async move {
            let mut args = vec!["policies", "apply", &file, "--server", &server];
            args.extend(extra);
            let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
            ratekeeper_async(&db, &args, "", &env).await
        }
    };
    let token_only = || vec![(with_token.0, with_token.1.to_owned())];

    // The system's roots do not know the private CA, nor does another CA: the handshake
    // fails, the certificate named, and nothing is sent.
    let unverified = apply(&[], token_only()).await;
    let mut with_other_ca = token_only();
    with_other_ca.push(("RATEKEEPER_CA_FILE", other_ca.clone()));
    let wrong_ca = apply(&[], with_other_ca).await;
    for refused in [unverified, wrong_ca] {
        assert!(!refused.status.success());
        let stderr = text(&refused.stderr);
        assert!(
            stderr.contains(&proxy.url) && stderr.contains("certificate is not trusted"),
            "{stderr}"
        );
        assert!(stderr.contains("--ca-file"), "says what to do: {stderr}");
        assert!(refused.stdout.is_empty());
    }
    expect_problem(
        app.get("/api/v1/policies/pings", &app.admin_token).await,
        StatusCode::NOT_FOUND,
    )
    .await;

    // Its CA's certificate given: by the flag for the plan, by RATEKEEPER_CA_FILE (not
    // taken for an unknown setting) for the apply.
    let plan = ratekeeper_async(
        &db,
        &[
            "policies",
            "plan",
            &file,
            "--server",
            &proxy.url,
            "--ca-file",
            &ca_file,
        ],
        "",
        &[with_token],
    )
    .await;
    assert!(plan.status.success(), "{}", text(&plan.stderr));
    assert!(text(&plan.stdout).contains("+ create pings (shop)\n"));
    let mut with_ca = token_only();
    with_ca.push(("RATEKEEPER_CA_FILE", ca_file.clone()));
    let applied = apply(&[], with_ca).await;
    assert!(applied.status.success(), "{}", text(&applied.stderr));
    assert!(
        text(&applied.stdout)
            .contains("Applied: 2 to create, 0 to update, 0 to delete, 1 unchanged."),
        "{}",
        text(&applied.stdout)
    );
    let pings = expect_status(
        app.get("/api/v1/policies/pings", &app.admin_token).await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(pings["window_ms"], 60000);
    assert_eq!(app.audit("?user=olga").await.len(), 2, "applied as olga");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test]
async fn a_server_or_ca_file_that_cannot_be_used_is_named_with_why() {
    let db = fresh_database(Db::Sqlite).await;
    let dir = scratch_dir();
    let file = write_file(dir.join("shop.yaml"), SHOP_FILE);
    let not_pem = write_file(dir.join("ca.txt"), "not a certificate\n");
    let no_such = dir.join("missing.pem").to_str().unwrap().to_owned();
    let closed = format!("https://127.0.0.1:{}", free_port());
    let token = [("RATEKEEPER_TOKEN", "rk_pat_unused")];
    let cases: Vec<(Vec<&str>, Vec<&str>)> = vec![
        // https is spoken (no longer refused): a closed port is a connection error.
        (
            vec!["--server", &closed],
            vec!["cannot reach", &closed, "Connection refused"],
        ),
        (
            vec!["--server", &closed, "--ca-file", &not_pem],
            vec![&not_pem, "no PEM certificate"],
        ),
        (
            vec!["--server", &closed, "--ca-file", &no_such],
            vec!["cannot read --ca-file", &no_such],
        ),
        (
            vec!["--server", "ftp://127.0.0.1:21"],
            vec!["ftp://", "use http:// or https://"],
        ),
        // A CA file means TLS was expected: plain http is refused, not silently used.
        (
            vec!["--server", "http://127.0.0.1:8080", "--ca-file", &not_pem],
            vec![&not_pem, "not https://"],
        ),
        (
            vec!["--ca-file", &not_pem],
            vec![&not_pem, "is for --server"],
        ),
    ];
    for (extra, named) in cases {
        let mut args = vec!["policies", "plan", &file];
        args.extend(&extra);
        let out = ratekeeper_async(&db, &args, "", &token).await;
        let stderr = text(&out.stderr);
        assert!(!out.status.success(), "{extra:?}: {stderr}");
        for part in named {
            assert!(stderr.contains(part), "{extra:?} lacks {part:?}: {stderr}");
        }
        assert!(out.stdout.is_empty());
    }
    // RATEKEEPER_SERVER stands for --server (a CI's secret), not taken for a setting.
    let env = [token[0], ("RATEKEEPER_SERVER", closed.as_str())];
    let out = ratekeeper_async(&db, &["policies", "plan", &file], "", &env).await;
    let stderr = text(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains(&closed) && stderr.contains("Connection refused"),
        "{stderr}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test]
async fn policies_apply_refuses_a_plan_changed_after_its_dry_run() {
    let (db, app) = shop_and_billing().await;
    app.create_policy(
        json!({"name": "search", "owner_app": "shop", "rate": 10.0, "max_permits": 5}),
    )
    .await;
    // The CLI's apply asks for the plan, then applies it by its plan_id: the proxy holds
    // that second request while someone edits `search`.
    let mut proxy = PausingProxy::start(&app.address, "plan_id=");
    let dir = scratch_dir();
    let file = write_file(dir.join("shop.yaml"), SHOP_FILE);
    let cli = tokio::spawn({
        let (db, server, token) = (db.clone(), proxy.url.clone(), app.admin_token.clone());
        async move {
            let args = ["policies", "apply", &file, "--server", &server];
            ratekeeper_async(&db, &args, "", &[("RATEKEEPER_TOKEN", &token)]).await
        }
    });
    let resume = proxy.held().await;
    app.edit_policy("search", json!({"max_permits": 7})).await;
    let audited = app.audit("").await.len();
    resume.send(()).unwrap();
    let out = cli.await.unwrap();

    assert!(!out.status.success());
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("409") && stderr.contains("search"),
        "{stderr}"
    );
    assert!(
        !stderr.contains("orders.create") && !stderr.contains("pings"),
        "only the changed policy is named: {stderr}"
    );
    assert!(out.stdout.is_empty(), "{}", text(&out.stdout));
    // Nothing applied: the edit stands, `pings` was not made, nothing more audited.
    let search = expect_status(
        app.get("/api/v1/policies/search", &app.admin_token).await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(
        (search["rate"].as_f64(), search["max_permits"].as_i64()),
        (Some(10.0), Some(7))
    );
    expect_problem(
        app.get("/api/v1/policies/pings", &app.admin_token).await,
        StatusCode::NOT_FOUND,
    )
    .await;
    assert_eq!(app.audit("").await.len(), audited);
    std::fs::remove_dir_all(&dir).unwrap();
}
