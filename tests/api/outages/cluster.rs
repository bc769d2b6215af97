//! A Redis Cluster that is not there when the server starts: the server starts anyway,
//! answers by failure mode, says it is not ready, and connects when the cluster comes.

use std::time::Duration;

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_starts_before_its_cluster_and_connects_when_it_comes() {
    let ports = LocalCluster::free_ports();
    let (app, shop, _) = shop_and_other(&LocalCluster::url_of(&ports), 500).await;

    let (status, body) = acquire(&app, &shop, "closed.p").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    let (status, body) = acquire(&app, &shop, "open.p").await;
    assert_eq!((status, &body["degraded"]), (StatusCode::OK, &json!(true)));
    let (status, body) = readyz(&app).await;
    assert_eq!(
        (status, &body["redis"]),
        (StatusCode::SERVICE_UNAVAILABLE, &json!("unreachable"))
    );

    let _cluster = LocalCluster::start_on(ports).await;
    let ready = eventually(Duration::from_secs(30), || async {
        readyz(&app).await.0 == StatusCode::OK
    })
    .await;
    assert!(ready, "ready once the cluster is there");
    // The policies never reached the cluster (it was down when they were made): the
    // first acquire puts each back and is decided.
    for name in ["closed.p", "open.p"] {
        let (status, body) = acquire(&app, &shop, name).await;
        assert_eq!(
            (status, &body["remaining"]),
            (StatusCode::OK, &json!(999)),
            "{body}"
        );
    }
}
