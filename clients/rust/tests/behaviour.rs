//! The client's behaviour against servers made in the test: a scripted HTTP/1.1 server,
//! one that accepts and never answers, one that hangs up, and a closed port.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use ratekeeper_client::{AcquireOptions, AllItem, CallOptions, Client, Error, RateLimitLayer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tower_service::Service;

/// One request the scripted server received.
#[derive(Clone, Debug)]
struct Seen {
    path: String,
    headers: String,
    body: serde_json::Value,
}

type Script = dyn Fn(&Seen) -> (u16, Vec<(&'static str, String)>, String) + Send + Sync;

/// A server answering each request by `script`, and what it received.
struct Scripted {
    url: String,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl Scripted {
    async fn start(
        script: impl Fn(&Seen) -> (u16, Vec<(&'static str, String)>, String) + Send + Sync + 'static,
    ) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let seen = Arc::new(Mutex::new(Vec::new()));
        let script: Arc<Script> = Arc::new(script);
        let log = seen.clone();
        tokio::spawn(async move {
            loop {
                let Ok((mut socket, _)) = listener.accept().await else {
                    return;
                };
                let (script, log) = (script.clone(), log.clone());
                tokio::spawn(async move {
                    while let Some(request) = read_request(&mut socket).await {
                        log.lock().unwrap().push(request.clone());
                        let (status, headers, body) = script(&request);
                        let mut reply = format!(
                            "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\n",
                            body.len()
                        );
                        for (name, value) in headers {
                            reply.push_str(&format!("{name}: {value}\r\n"));
                        }
                        reply.push_str("\r\n");
                        reply.push_str(&body);
                        if socket.write_all(reply.as_bytes()).await.is_err() {
                            return;
                        }
                    }
                });
            }
        });
        Self { url, seen }
    }

    fn requests(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

async fn read_request(socket: &mut tokio::net::TcpStream) -> Option<Seen> {
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        if let Some(at) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
        let n = socket.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buffer.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buffer[..head_end]).to_string();
    let length: usize = head
        .lines()
        .find_map(|l| {
            let (name, value) = l.split_once(':')?;
            name.eq_ignore_ascii_case("content-length")
                .then(|| value.trim().parse().ok())?
        })
        .unwrap_or(0);
    while buffer.len() < head_end + length {
        let n = socket.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buffer.extend_from_slice(&chunk[..n]);
    }
    let path = head.split_whitespace().nth(1).unwrap_or("").to_owned();
    let body = serde_json::from_slice(&buffer[head_end..head_end + length]).unwrap_or_default();
    Some(Seen {
        path,
        headers: head.to_ascii_lowercase(),
        body,
    })
}

fn granted(remaining: i64) -> (u16, Vec<(&'static str, String)>, String) {
    (
        200,
        vec![
            ("ratelimit-policy", "\"p\";q=5".to_owned()),
            ("ratelimit", format!("\"p\";r={remaining};t=1")),
        ],
        format!(
            r#"{{"allowed":true,"remaining":{remaining},"limit":5,"retry_after_ms":0,"reset_after_ms":1000,"policy_version":2}}"#
        ),
    )
}

fn denied(retry_after_ms: i64) -> (u16, Vec<(&'static str, String)>, String) {
    (
        429,
        vec![
            ("ratelimit-policy", "\"p\";q=5".to_owned()),
            ("ratelimit", "\"p\";r=0;t=60".to_owned()),
            (
                "retry-after",
                (retry_after_ms as u64).div_ceil(1000).to_string(),
            ),
        ],
        format!(
            r#"{{"allowed":false,"remaining":0,"limit":5,"retry_after_ms":{retry_after_ms},"reset_after_ms":60000,"policy_version":2}}"#
        ),
    )
}

fn client(url: &str) -> Client {
    Client::builder(url, "rk_test_key").build().unwrap()
}

/// A port nothing listens on.
async fn closed_port() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    drop(listener);
    url
}

#[tokio::test]
async fn a_grant_and_a_denial_are_decisions_with_their_headers() {
    let server = Scripted::start(|seen| {
        if seen.body["permits"] == 2 {
            denied(1500)
        } else {
            granted(4)
        }
    })
    .await;
    let client = Client::builder(&server.url, "rk_test_key")
        .denial_cache_size(0)
        .build()
        .unwrap();
    let grant = client
        .acquire("orders", AcquireOptions::new().key("u1"))
        .await
        .unwrap();
    assert!(grant.allowed && !grant.degraded && !grant.cached && grant.enforced);
    assert_eq!(
        (grant.remaining, grant.limit, grant.policy_version),
        (Some(4), Some(5), Some(2))
    );
    assert_eq!(grant.headers.get("RateLimit"), Some("\"p\";r=4;t=1"));
    assert_eq!(grant.headers.get("ratelimit-policy"), Some("\"p\";q=5"));
    let denial = client
        .acquire("orders", AcquireOptions::new().permits(2))
        .await
        .unwrap();
    assert!(!denial.allowed && !denial.degraded);
    assert_eq!(denial.retry_after_ms, Some(1500));
    assert_eq!(denial.headers.get("Retry-After"), Some("2"));

    let seen = server.requests();
    assert_eq!(seen[0].path, "/v1/acquire");
    assert_eq!(
        seen[0].body,
        serde_json::json!({"resource": "orders", "permits": 1, "key": "u1"})
    );
    assert_eq!(
        seen[1].body,
        serde_json::json!({"resource": "orders", "permits": 2})
    );
    assert!(
        seen[0]
            .headers
            .contains("authorization: bearer rk_test_key")
    );
    assert!(seen[0].headers.contains(&format!(
        "user-agent: ratekeeper-rust/{}",
        env!("CARGO_PKG_VERSION")
    )));
}

#[tokio::test]
async fn problems_map_to_their_error_variants() {
    let server = Scripted::start(|seen| {
        let (status, kind, title) = match seen.body["resource"].as_str().unwrap_or("") {
            "missing" => (404, "not-found", "Not found"),
            "theirs" => (403, "forbidden", "Forbidden"),
            "down" => (503, "unavailable", "Service unavailable"),
            _ => (422, "validation", "Invalid input"),
        };
        (
            status,
            vec![("content-type", "application/problem+json".to_owned())],
            format!(r#"{{"type":"urn:ratekeeper:problem:{kind}","title":"{title}","status":{status},"detail":"d","errors":[{{"field":"permits","message":"too many"}}]}}"#),
        )
    })
    .await;
    let client = client(&server.url);
    for (resource, name) in [
        ("missing", "NotFound"),
        ("theirs", "Forbidden"),
        ("down", "Unavailable"),
        ("big", "Invalid"),
    ] {
        let error = client
            .acquire(resource, AcquireOptions::new())
            .await
            .unwrap_err();
        assert_eq!(error.kind_name(), name);
        let problem = error.problem().unwrap();
        assert_eq!(problem.detail.as_deref(), Some("d"));
        assert_eq!(problem.field(), Some("permits"));
        assert!(problem.type_uri.starts_with("urn:ratekeeper:problem:"));
    }
    let error = client.refund("missing", 1, None).await.unwrap_err();
    assert!(matches!(error, Error::NotFound(_)), "{error:?}");
    let error = client.release("missing", "lease", None).await.unwrap_err();
    assert!(matches!(error, Error::NotFound(_)), "{error:?}");
}

#[tokio::test]
async fn a_denial_is_remembered_until_its_retry_time_and_a_refund_forgets_it() {
    let server = Scripted::start(|seen| match seen.path.as_str() {
        "/v1/refund" => granted(1),
        _ => denied(60_000),
    })
    .await;
    let client = client(&server.url);
    let first = client
        .acquire("r", AcquireOptions::new().key("k"))
        .await
        .unwrap();
    assert!(!first.cached);
    for _ in 0..5 {
        let again = client
            .acquire("r", AcquireOptions::new().key("k"))
            .await
            .unwrap();
        assert!(again.cached && !again.allowed && !again.degraded);
        assert_eq!((again.remaining, again.limit), (Some(0), Some(5)));
        let left = again.retry_after_ms.unwrap();
        assert!(left > 0 && left <= 60_000, "{left}");
    }
    let checked = client
        .check("r", AcquireOptions::new().key("k"))
        .await
        .unwrap();
    assert!(checked.cached);
    assert_eq!(server.requests().len(), 1, "answered without a request");
    // Another key is another caller.
    client
        .acquire("r", AcquireOptions::new().key("j"))
        .await
        .unwrap();
    assert_eq!(server.requests().len(), 2);
    // A refund of (r, k) forgets its denial.
    client.refund("r", 1, Some("k")).await.unwrap();
    let after = client
        .acquire("r", AcquireOptions::new().key("k"))
        .await
        .unwrap();
    assert!(!after.cached);
    assert_eq!(server.requests().len(), 4);

    let off = Client::builder(&server.url, "rk_test_key")
        .denial_cache_size(0)
        .build()
        .unwrap();
    let before = server.requests().len();
    off.acquire("r", AcquireOptions::new()).await.unwrap();
    off.acquire("r", AcquireOptions::new()).await.unwrap();
    assert_eq!(server.requests().len(), before + 2, "size 0: no cache");
}

#[tokio::test]
async fn acquire_all_is_always_sent_and_its_denials_are_remembered() {
    let server = Scripted::start(|seen| {
        if seen.body.get("all").is_some() {
            (
                429,
                vec![("retry-after", "30".to_owned())],
                r#"{"allowed":false,"results":[{"allowed":true,"remaining":3,"limit":5,"retry_after_ms":0,"reset_after_ms":0,"policy_version":1},{"allowed":false,"remaining":0,"limit":2,"retry_after_ms":30000,"reset_after_ms":30000,"policy_version":1}]}"#.to_owned(),
            )
        } else {
            granted(1)
        }
    })
    .await;
    let client = client(&server.url);
    let items = [
        AllItem::new("burst").key("u"),
        AllItem::new("daily").key("u").permits(2),
    ];
    for _ in 0..2 {
        let all = client
            .acquire_all(&items, CallOptions::default())
            .await
            .unwrap();
        assert!(!all.allowed && !all.degraded);
        assert_eq!(all.results.len(), 2);
        assert!(all.results[0].allowed && !all.results[1].allowed);
        assert_eq!(all.headers.get("Retry-After"), Some("30"));
    }
    assert_eq!(server.requests().len(), 2, "never answered locally");
    assert_eq!(
        server.requests()[0].body,
        serde_json::json!({"all": [{"resource": "burst", "key": "u"}, {"resource": "daily", "key": "u", "permits": 2}]})
    );
    let cached = client
        .acquire("daily", AcquireOptions::new().key("u").permits(2))
        .await
        .unwrap();
    assert!(cached.cached);
    let sent = client
        .acquire("burst", AcquireOptions::new().key("u"))
        .await
        .unwrap();
    assert!(!sent.cached && sent.allowed);
    assert_eq!(server.requests().len(), 3);
}

#[tokio::test]
async fn a_server_that_never_answers_gives_a_degraded_decision_when_the_timeout_runs_out() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let held = Arc::new(Mutex::new(Vec::new()));
    let keep = held.clone();
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            keep.lock().unwrap().push(socket);
        }
    });
    let client = Client::builder(&url, "k")
        .timeout(Duration::from_millis(200))
        .build()
        .unwrap();
    let closed = client.acquire("r", AcquireOptions::new()).await.unwrap();
    assert!(closed.degraded && !closed.allowed && !closed.cached);
    assert_eq!(closed.remaining, None);
    let open = client
        .acquire(
            "r",
            AcquireOptions::new()
                .fail_open(true)
                .timeout(Duration::from_millis(100)),
        )
        .await
        .unwrap();
    assert!(open.degraded && open.allowed);
    let all = client
        .acquire_all(
            &[AllItem::new("a"), AllItem::new("b")],
            CallOptions {
                fail_open: Some(true),
                timeout: None,
            },
        )
        .await
        .unwrap();
    assert!(all.allowed && all.degraded && all.results.iter().all(|d| d.degraded && d.allowed));
    match client.refund("r", 1, None).await {
        Err(Error::Transport(e)) => assert!(e.is_timeout(), "{e:?}"),
        other => panic!("{other:?}"),
    }
    match client.release("r", "lease", None).await {
        Err(Error::Transport(_)) => {}
        other => panic!("{other:?}"),
    }
    let defaults_open = Client::builder(&url, "k")
        .timeout(Duration::from_millis(100))
        .fail_open(true)
        .build()
        .unwrap();
    let check = defaults_open
        .check("r", AcquireOptions::new())
        .await
        .unwrap();
    assert!(check.degraded && check.allowed);
}

#[tokio::test]
async fn only_a_refused_connection_is_tried_again() {
    // Refused: degraded, and a refund says why.
    let url = closed_port().await;
    let client = Client::builder(&url, "k")
        .timeout(Duration::from_secs(2))
        .build()
        .unwrap();
    let decision = client.acquire("r", AcquireOptions::new()).await.unwrap();
    assert!(decision.degraded && !decision.allowed);
    match client.refund("r", 1, None).await {
        Err(Error::Transport(e)) => assert!(e.is_connection_refused(), "{e:?}"),
        other => panic!("{other:?}"),
    }

    // Accepted then hung up on: the request may have arrived, so it is not sent again.
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let accepted = Arc::new(Mutex::new(0));
    let count = accepted.clone();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            *count.lock().unwrap() += 1;
            let mut buffer = [0u8; 1024];
            let _ = socket.read(&mut buffer).await;
            drop(socket);
        }
    });
    let client = Client::builder(&url, "k")
        .timeout(Duration::from_secs(2))
        .build()
        .unwrap();
    let decision = client.acquire("r", AcquireOptions::new()).await.unwrap();
    assert!(decision.degraded);
    assert_eq!(*accepted.lock().unwrap(), 1, "sent once");
}

#[tokio::test]
async fn a_refused_connection_is_retried_until_the_server_is_there() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    drop(listener);
    let client = Client::builder(format!("http://{address}"), "k")
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    // The server comes up while the client backs off (the first pause is 25-75 ms).
    let start = tokio::spawn(async move {
        let listener = TcpListener::bind(address).await.unwrap();
        let (mut socket, _) = listener.accept().await.unwrap();
        read_request(&mut socket).await.unwrap();
        let (_, _, body) = granted(3);
        let reply = format!(
            "HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        );
        socket.write_all(reply.as_bytes()).await.unwrap();
    });
    let decision = client.acquire("r", AcquireOptions::new()).await.unwrap();
    start.await.unwrap();
    assert!(decision.allowed && !decision.degraded, "{decision:?}");
}

#[tokio::test]
async fn a_wait_sleeps_through_a_denial_that_ends_in_time_and_not_one_that_does_not() {
    let calls = Arc::new(Mutex::new(0));
    let count = calls.clone();
    let server = Scripted::start(move |_| {
        let mut n = count.lock().unwrap();
        *n += 1;
        if *n == 1 { denied(40) } else { granted(0) }
    })
    .await;
    let client = client(&server.url);
    let decision = client
        .acquire("r", AcquireOptions::new().wait(Duration::from_secs(5)))
        .await
        .unwrap();
    assert!(decision.allowed);
    assert_eq!(
        server.requests().len(),
        2,
        "asked again once, after the retry time"
    );

    let server = Scripted::start(|_| denied(60_000)).await;
    let client = self::client(&server.url);
    let decision = client
        .acquire("r", AcquireOptions::new().wait(Duration::from_millis(500)))
        .await
        .unwrap();
    assert!(!decision.allowed && decision.retry_after_ms == Some(60_000));
    assert_eq!(
        server.requests().len(),
        1,
        "no waiting for what cannot come in time"
    );
}

#[tokio::test]
async fn a_lease_is_released_by_release_or_by_drop() {
    let server = Scripted::start(|seen| match seen.path.as_str() {
        "/v1/release" => (200, vec![], r#"{"released":true,"permits":1,"remaining":2}"#.to_owned()),
        _ if seen.body["resource"] == "busy" => denied(1000),
        _ => (
            200,
            vec![],
            r#"{"allowed":true,"remaining":1,"limit":2,"retry_after_ms":0,"reset_after_ms":0,"policy_version":1,"lease_id":"L1"}"#.to_owned(),
        ),
    })
    .await;
    let client = client(&server.url);
    let lease = client
        .lease("jobs", AcquireOptions::new().key("k"))
        .await
        .unwrap();
    assert_eq!(lease.id(), Some("L1"));
    let released = lease.release().await.unwrap().unwrap();
    assert_eq!((released.permits, released.remaining), (1, 2));
    let seen = server.requests();
    assert_eq!(seen[1].path, "/v1/release");
    assert_eq!(
        seen[1].body,
        serde_json::json!({"resource": "jobs", "lease_id": "L1", "key": "k"})
    );

    {
        let _lease = client.lease("jobs", AcquireOptions::new()).await.unwrap();
    }
    for _ in 0..100 {
        if server.requests().len() == 4 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(server.requests()[3].path, "/v1/release", "released on drop");

    match client.lease("busy", AcquireOptions::new()).await {
        Err(Error::Denied(decision)) => assert_eq!(decision.retry_after_ms, Some(1000)),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn the_layer_answers_429_with_the_headers_or_passes_the_request_on() {
    let server = Scripted::start(|seen| {
        if seen.body["key"] == "flooder" {
            denied(2500)
        } else {
            granted(4)
        }
    })
    .await;
    let layer =
        RateLimitLayer::new(client(&server.url), "api").key_fn(|req: &http::Request<String>| {
            req.headers()
                .get("x-user")
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        });
    let called = Arc::new(Mutex::new(0));
    let count = called.clone();
    let inner = tower_service_fn(move |_req: http::Request<String>| {
        *count.lock().unwrap() += 1;
        http::Response::new("hello".to_owned())
    });
    let mut service = tower_layer::Layer::layer(&layer, inner);
    let request = |user: &str| {
        http::Request::builder()
            .header("x-user", user)
            .body(String::new())
            .unwrap()
    };
    let ok = service.call(request("alice")).await.unwrap();
    assert_eq!(ok.status(), 200);
    assert_eq!(ok.body(), "hello");
    assert_eq!(ok.headers()["ratelimit"], "\"p\";r=4;t=1");
    assert_eq!(ok.headers()["ratelimit-policy"], "\"p\";q=5");
    let denied = service.call(request("flooder")).await.unwrap();
    assert_eq!(denied.status(), 429);
    assert_eq!(denied.headers()["retry-after"], "3");
    assert_eq!(denied.headers()["ratelimit-policy"], "\"p\";q=5");
    assert_eq!(
        *called.lock().unwrap(),
        1,
        "the denied request never reached the service"
    );
    assert_eq!(server.requests()[0].body["resource"], "api");
}

/// A cloneable tower service from a function (tower's `service_fn` without tower).
fn tower_service_fn<F>(f: F) -> FnService<F> {
    FnService(Arc::new(f))
}

struct FnService<F>(Arc<F>);

impl<F> Clone for FnService<F> {
    fn clone(&self) -> Self {
        Self(self.0.clone())
    }
}

impl<F> Service<http::Request<String>> for FnService<F>
where
    F: Fn(http::Request<String>) -> http::Response<String>,
{
    type Response = http::Response<String>;
    type Error = std::convert::Infallible;
    type Future = std::future::Ready<Result<Self::Response, Self::Error>>;

    fn poll_ready(
        &mut self,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Self::Error>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<String>) -> Self::Future {
        std::future::ready(Ok((self.0)(request)))
    }
}
