//! A webhook receiver of the test's own on a loopback port: it keeps every request it gets
//! and answers 500 to the first ones it is told to fail, 200 after.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use actix_web::{App, HttpRequest, HttpResponse, HttpServer, web};
use tokio::sync::Notify;

/// One request as the receiver got it, and what it answered.
#[derive(Debug, Clone)]
pub struct Received {
    pub headers: HashMap<String, String>,
    pub body: Vec<u8>,
    pub answered: u16,
}

impl Received {
    pub fn header(&self, name: &str) -> &str {
        self.headers.get(name).map_or("", String::as_str)
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).expect("a JSON body")
    }
}

#[derive(Default)]
struct Log {
    received: Mutex<Vec<Received>>,
    arrived: Notify,
    fail_first: AtomicUsize,
}

pub struct Receiver {
    pub url: String,
    log: Arc<Log>,
    server: actix_web::dev::ServerHandle,
}

async fn take(req: HttpRequest, body: web::Bytes, log: web::Data<Log>) -> HttpResponse {
    let failing = log
        .fail_first
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
        .is_ok();
    let answered = if failing { 500 } else { 200 };
    let headers = req
        .headers()
        .iter()
        .map(|(k, v)| (k.as_str().to_owned(), v.to_str().unwrap_or("").to_owned()))
        .collect();
    log.received.lock().unwrap().push(Received {
        headers,
        body: body.to_vec(),
        answered,
    });
    log.arrived.notify_waiters();
    match failing {
        true => HttpResponse::InternalServerError().body("receiver down for a moment"),
        false => HttpResponse::Ok().body("thanks"),
    }
}

impl Receiver {
    /// Listening on 127.0.0.1, answering 500 to the first `fail_first` requests.
    pub async fn start(fail_first: usize) -> Self {
        let log = Arc::new(Log {
            fail_first: AtomicUsize::new(fail_first),
            ..Log::default()
        });
        let data = web::Data::from(log.clone());
        let server = HttpServer::new(move || {
            App::new()
                .app_data(data.clone())
                .default_service(web::to(take))
        })
        .workers(1)
        .disable_signals()
        .bind("127.0.0.1:0")
        .expect("the receiver binds");
        let port = server.addrs()[0].port();
        let server = server.run();
        let handle = server.handle();
        tokio::spawn(server);
        Self {
            url: format!("http://127.0.0.1:{port}/hooks/ratekeeper"),
            log,
            server: handle,
        }
    }

    pub fn received(&self) -> Vec<Received> {
        self.log.received.lock().unwrap().clone()
    }

    /// Every request so far once there are at least `n`; panics after `limit`.
    pub async fn wait_for(&self, n: usize, limit: Duration) -> Vec<Received> {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            let arrived = self.log.arrived.notified();
            let got = self.received();
            if got.len() >= n {
                return got;
            }
            if tokio::time::timeout_at(deadline, arrived).await.is_err() {
                panic!("{} requests within {limit:?}, not {n}: {got:?}", got.len());
            }
        }
    }

    pub async fn stop(&self) {
        self.server.stop(false).await;
    }
}

/// A receiver that takes connections and never answers: each is held open until dropped.
pub struct HangingReceiver {
    pub url: String,
    task: tokio::task::JoinHandle<()>,
}

impl HangingReceiver {
    pub async fn start() -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let task = tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((stream, _)) = listener.accept().await {
                held.push(stream);
            }
        });
        Self {
            url: format!("http://127.0.0.1:{port}/hooks/hanging"),
            task,
        }
    }
}

impl Drop for HangingReceiver {
    fn drop(&mut self) {
        self.task.abort();
    }
}
