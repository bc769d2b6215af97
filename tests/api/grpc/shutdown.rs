//! Graceful shutdown drains gRPC too: on the one stop signal the server stops accepting
//! connections, and a call in flight is still answered.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_in_flight_is_answered_after_the_stop_signal() {
    let redis = RedisProcess::start().await;
    let db = fresh_database(Db::Sqlite).await;
    let mut s = grpc_settings(&db, &redis.url(), &test_prefix("grpc-drain"));
    // Long: the call in flight waits for the stalled Redis, never for a timeout.
    s.redis_timeout_ms = 120_000;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let (app, running) = spawn_app_until(s, async {
        let _ = stopped.await;
    })
    .await;
    app.create_app("shop").await;
    let key = app.create_key("shop").await;
    app.create_policy(json!({"name": "drain.p", "owner_app": "shop", "rate": 1,
                             "max_permits": 5}))
        .await;
    let named = || vec![descriptor(&[("generic_key", "drain.p")])];
    assert_eq!(overall(&ask(&app, &key, named()).await), Code::Ok);
    let acquire_calls = "ratekeeper_redis_calls_total{client=\"acquire\"}";
    let before = app.metric(acquire_calls).await.expect("counted");

    redis.stall();
    let mut in_flight_client = client(&app).await;
    let mut request = tonic::Request::new(RateLimitRequest {
        domain: "edge".into(),
        descriptors: named(),
        hits_addend: 1,
    });
    request
        .metadata_mut()
        .insert("authorization", format!("Bearer {key}").parse().unwrap());
    let in_flight = tokio::spawn(async move { in_flight_client.should_rate_limit(request).await });
    let sent = eventually(std::time::Duration::from_secs(30), || async {
        app.metric(acquire_calls).await.is_some_and(|n| n > before)
    })
    .await;
    assert!(sent, "the call reached Redis");

    stop.send(()).unwrap();
    let address = app.grpc_address.clone().unwrap();
    let refused = eventually(std::time::Duration::from_secs(30), || async {
        RateLimitServiceClient::connect(address.clone())
            .await
            .is_err()
    })
    .await;
    assert!(refused, "no new connections once stopping");
    assert!(!in_flight.is_finished(), "the call waits for Redis");
    assert!(
        !running.is_finished(),
        "the server waits for the call in flight before it stops"
    );

    redis.resume();
    let answered = in_flight
        .await
        .unwrap()
        .expect("the call in flight is answered")
        .into_inner();
    assert_eq!(overall(&answered), Code::Ok, "{answered:?}");
    assert_eq!(answered.statuses[0].limit_remaining, 3);
    running
        .await
        .unwrap()
        .expect("the server stopped gracefully");
}
