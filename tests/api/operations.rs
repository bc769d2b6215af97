//! Operating ratekeeper: a Redis Cluster, graceful shutdown, a config file.

use std::process::Command;

use reqwest::StatusCode;
use serde_json::json;

use crate::helpers::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn works_on_a_redis_cluster() {
    let cluster = LocalCluster::start().await;
    let db = fresh_database(Db::Sqlite).await;
    let app = spawn_app_with(settings(&db, &cluster.url(), "cluster")).await;
    let key = app.shop_with_policy("orders.create", 0.001, 2).await;
    // More policies, so that their keys spread over the three masters' slots.
    for i in 0..10 {
        app.create_policy(json!({"name": format!("spread.{i}"), "owner_app": "shop", "rate": 0.001, "max_permits": 1})).await;
    }
    expect_status(app.acquire(&key, "orders.create", 2).await, StatusCode::OK).await;
    expect_status(
        app.acquire(&key, "orders.create", 1).await,
        StatusCode::TOO_MANY_REQUESTS,
    )
    .await;
    for i in 0..10 {
        expect_status(
            app.acquire(&key, &format!("spread.{i}"), 1).await,
            StatusCode::OK,
        )
        .await;
        expect_status(
            app.acquire(&key, &format!("spread.{i}"), 1).await,
            StatusCode::TOO_MANY_REQUESTS,
        )
        .await;
    }
    let state = expect_status(
        app.get("/api/v1/policies/spread.3/state", &app.admin_token)
            .await,
        StatusCode::OK,
    )
    .await;
    assert!(state["current_permits"].as_f64().unwrap() < 1.0);
    let r = app
        .send(
            "DELETE",
            "/api/v1/policies/spread.3",
            &app.admin_token,
            None,
        )
        .await;
    expect_status(r, StatusCode::NO_CONTENT).await;
    expect_problem(
        app.acquire(&key, "spread.3", 1).await,
        StatusCode::NOT_FOUND,
    )
    .await;
    let core = app.core().await;
    let report = core.sync.reconcile_once().await.unwrap();
    assert_eq!(
        (report.policies, report.rewritten, report.failed),
        (10, 0, 0)
    );
    // The console's live view reaches every master (a pipeline per policy's slot).
    let actor = ratekeeper::auth::Actor::operator();
    let policies = core
        .control
        .list_policies(&actor, Some("shop"))
        .await
        .unwrap();
    let live = core.control.live_state_of(&policies).await;
    assert_eq!(live.len(), 10);
    assert!(
        live.iter()
            .all(|l| l.state.is_some() && l.activity.len() == 10),
        "{live:?}"
    );
}

#[tokio::test]
async fn shutdown_finishes_and_stops_serving() {
    let db = fresh_database(Db::Sqlite).await;
    let s = settings(&db, &redis_url(), &test_prefix("app"));
    let app = ratekeeper::startup::Application::build(s).await.unwrap();
    let url = format!("http://127.0.0.1:{}/healthz", app.port());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(app.run_until(async {
        let _ = stopped.await;
    }));
    assert_eq!(reqwest::get(&url).await.unwrap().status(), StatusCode::OK);
    stop.send(()).unwrap();
    // run_until returns only after the server and the sync task have both stopped.
    running.await.unwrap().unwrap();
    assert!(reqwest::get(&url).await.is_err(), "no longer accepting");
}

#[tokio::test]
async fn a_config_file_is_read_and_the_environment_overrides_it() {
    let dir = fresh_dir("config");
    std::fs::create_dir_all(&dir).unwrap();
    let from_file = dir.join("from-file.db");
    let from_env = dir.join("from-env.db");
    let config = dir.join("ratekeeper.toml");
    std::fs::write(
        &config,
        format!(
            "database_url = \"sqlite://{}\"\nsync_interval_ms = 1000\n",
            from_file.display()
        ),
    )
    .unwrap();
    let run = |env_db: Option<&std::path::Path>| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_ratekeeper"));
        cmd.arg("migrate")
            .env("RATEKEEPER_CONFIG", &config)
            .env_remove("RATEKEEPER_DATABASE_URL");
        if let Some(db) = env_db {
            cmd.env(
                "RATEKEEPER_DATABASE_URL",
                format!("sqlite://{}", db.display()),
            );
        }
        cmd.output().unwrap()
    };
    assert!(run(None).status.success());
    assert!(from_file.exists(), "the file's database_url was used");
    assert!(run(Some(&from_env)).status.success());
    assert!(from_env.exists(), "the environment overrides the file");

    std::fs::write(&config, "no_such_setting = 1\n").unwrap();
    let out = run(None);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no_such_setting"));
}
