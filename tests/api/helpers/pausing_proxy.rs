//! An HTTP proxy in front of the server that holds back a chosen request until the test
//! lets it go: what happens between a client's two requests (someone else's edit between
//! the CLI's dry run and its apply) is then the test's to decide, without sleeping.

use actix_web::{App, HttpRequest, HttpResponse, HttpServer, web};
use tokio::sync::{mpsc, oneshot};

/// Requests whose path and query contain `hold` wait, one at a time, until the test
/// answers the `oneshot` it receives from [`PausingProxy::held`].
pub struct PausingProxy {
    /// `http://127.0.0.1:<port>`.
    pub url: String,
    held: mpsc::Receiver<oneshot::Sender<()>>,
    server: actix_web::dev::ServerHandle,
}

struct Forward {
    target: String,
    hold: String,
    held: mpsc::Sender<oneshot::Sender<()>>,
    client: reqwest::Client,
}

impl PausingProxy {
    /// In front of `target` (e.g. `http://127.0.0.1:8080`).
    pub fn start(target: &str, hold: &str) -> Self {
        let (sender, held) = mpsc::channel(1);
        let forward = web::Data::new(Forward {
            target: target.to_owned(),
            hold: hold.to_owned(),
            held: sender,
            client: reqwest::Client::new(),
        });
        let server = HttpServer::new(move || {
            App::new()
                .app_data(forward.clone())
                .default_service(web::to(pass_on))
        })
        .workers(1)
        .disable_signals()
        .bind(("127.0.0.1", 0))
        .unwrap();
        let url = format!("http://{}", server.addrs()[0]);
        let server = server.run();
        let handle = server.handle();
        tokio::spawn(server);
        Self {
            url,
            held,
            server: handle,
        }
    }

    /// Waits until a request to hold arrives (a client that never sends one fails the
    /// test after a minute rather than hanging it); sending on the answer lets it go on.
    pub async fn held(&mut self) -> oneshot::Sender<()> {
        tokio::time::timeout(std::time::Duration::from_secs(60), self.held.recv())
            .await
            .expect("no request to hold arrived")
            .expect("the proxy runs")
    }
}

impl Drop for PausingProxy {
    fn drop(&mut self) {
        drop(self.server.stop(false));
    }
}

/// The request as it came (method, path and query, the headers that matter here, body),
/// and the server's answer as it went.
async fn pass_on(
    request: HttpRequest,
    body: web::Bytes,
    forward: web::Data<Forward>,
) -> HttpResponse {
    let path = request.uri().path_and_query().map_or("/", |p| p.as_str());
    if path.contains(&forward.hold) {
        let (resume, resumed) = oneshot::channel();
        forward.held.send(resume).await.expect("the test waits");
        resumed.await.expect("the test lets the request go");
    }
    let method = reqwest::Method::from_bytes(request.method().as_str().as_bytes()).unwrap();
    let mut outgoing = forward
        .client
        .request(method, format!("{}{path}", forward.target))
        .body(body.to_vec());
    for name in ["authorization", "content-type"] {
        if let Some(value) = request.headers().get(name) {
            outgoing = outgoing.header(name, value.as_bytes());
        }
    }
    let answer = outgoing.send().await.expect("the server answers");
    let status = actix_web::http::StatusCode::from_u16(answer.status().as_u16()).unwrap();
    let content_type = answer
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_owned());
    let mut reply = HttpResponse::build(status);
    if let Some(content_type) = content_type {
        reply.content_type(content_type);
    }
    reply.body(answer.bytes().await.unwrap())
}
