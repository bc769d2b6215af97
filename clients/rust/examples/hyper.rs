//! A hyper server behind `RateLimitLayer`: each request takes a permit of
//! `RATEKEEPER_RESOURCE` (default `orders.create`) for the caller named by its `x-user`
//! header; denied, it is answered 429 with Retry-After and the RateLimit headers.
//!
//! ```sh
//! RATEKEEPER_API_KEY=rk_live_... cargo run -p ratekeeper-client --example hyper
//! curl -i -H 'x-user: alice' http://127.0.0.1:3000/
//! ```

use std::convert::Infallible;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::service::TowerToHyperService;
use ratekeeper_client::{Client, RateLimitLayer};
use tower_layer::Layer;

/// The application's own handler.
#[derive(Clone)]
struct Hello;

impl tower_service::Service<Request<Incoming>> for Hello {
    type Response = Response<Full<Bytes>>;
    type Error = Infallible;
    type Future = std::future::Ready<Result<Self::Response, Infallible>>;

    fn poll_ready(
        &mut self,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Infallible>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, _: Request<Incoming>) -> Self::Future {
        std::future::ready(Ok(Response::new(Full::new(Bytes::from("hello\n")))))
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::var("RATEKEEPER_URL").unwrap_or_else(|_| "http://127.0.0.1:8080".into());
    let api_key = std::env::var("RATEKEEPER_API_KEY")?;
    let resource = std::env::var("RATEKEEPER_RESOURCE").unwrap_or_else(|_| "orders.create".into());
    let client = Client::builder(url, api_key).build()?;
    let layer = RateLimitLayer::new(client, resource).key_fn(|req: &Request<Incoming>| {
        req.headers()
            .get("x-user")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    });
    let service = layer.layer(Hello);

    let listener = tokio::net::TcpListener::bind("127.0.0.1:3000").await?;
    println!("listening on http://{}", listener.local_addr()?);
    loop {
        let (socket, _) = listener.accept().await?;
        let service = TowerToHyperService::new(service.clone());
        tokio::spawn(async move {
            let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                .serve_connection(TokioIo::new(socket), service)
                .await;
        });
    }
}
