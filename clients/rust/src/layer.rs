//! [`RateLimitLayer`]: a tower layer that acquires a permit for each request before
//! the service behind it sees it, for axum, hyper, tonic or any tower service.
//!
//! Denied: the service is not called; the answer is `429 Too Many Requests` with
//! `Retry-After` and the `RateLimit` / `RateLimit-Policy` headers of the decision.
//! Granted: the service's response, with the decision's `RateLimit` headers added.
//! The server unreachable: the client's fail-open choice decides (degraded decisions).
//! An error of the call itself (no such policy, a bad API key, a refused key) answers
//! `500 Internal Server Error` without calling the service, unless
//! [`RateLimitLayer::pass_on_error`] lets such requests through.
//!
//! ```no_run
//! use ratekeeper_client::{Client, RateLimitLayer};
//!
//! # fn main() -> Result<(), ratekeeper_client::Error> {
//! let client = Client::builder("http://127.0.0.1:8080", "rk_live_...").build()?;
//! let layer = RateLimitLayer::new(client, "api.requests").key_fn(|req: &http::Request<String>| {
//!     req.headers()
//!         .get("x-user")
//!         .and_then(|v| v.to_str().ok())
//!         .map(str::to_owned)
//! });
//! # let _ = layer;
//! # Ok(())
//! # }
//! ```

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use http::{HeaderName, HeaderValue, Request, Response, StatusCode};
use tower_layer::Layer;
use tower_service::Service;

use crate::client::{AcquireOptions, Client};
use crate::decision::{Decision, RateLimitHeaders};

/// How a request's key is found (see [`RateLimitLayer::key_fn`]).
pub trait RequestKey<B>: Clone + Send + Sync + 'static {
    /// The caller's key for a `per_key` policy, or `None`.
    fn key(&self, request: &Request<B>) -> Option<String>;
}

/// No key: the policy is global (the layer's default).
#[derive(Clone, Copy, Debug, Default)]
pub struct NoKey;

impl<B> RequestKey<B> for NoKey {
    fn key(&self, _: &Request<B>) -> Option<String> {
        None
    }
}

impl<B, F> RequestKey<B> for F
where
    F: Fn(&Request<B>) -> Option<String> + Clone + Send + Sync + 'static,
{
    fn key(&self, request: &Request<B>) -> Option<String> {
        self(request)
    }
}

/// How a request's resource (policy name) is found (see [`RateLimitLayer::resource_fn`]).
pub trait RequestResource<B>: Clone + Send + Sync + 'static {
    /// The policy to acquire from for this request.
    fn resource(&self, request: &Request<B>) -> String;
}

/// One resource for every request (the layer's default).
#[derive(Clone, Debug)]
pub struct Fixed(Arc<str>);

impl<B> RequestResource<B> for Fixed {
    fn resource(&self, _: &Request<B>) -> String {
        self.0.to_string()
    }
}

/// A function of the request naming its resource.
#[derive(Clone, Debug)]
pub struct ResourceFn<F>(F);

impl<B, F> RequestResource<B> for ResourceFn<F>
where
    F: Fn(&Request<B>) -> String + Clone + Send + Sync + 'static,
{
    fn resource(&self, request: &Request<B>) -> String {
        (self.0)(request)
    }
}

/// A tower [`Layer`] rate-limiting each request through a ratekeeper [`Client`].
#[derive(Clone, Debug)]
pub struct RateLimitLayer<R = Fixed, K = NoKey> {
    client: Client,
    resource: R,
    key: K,
    permits: i64,
    pass_on_error: bool,
}

impl RateLimitLayer {
    /// Every request acquires one permit of `resource`, without a key.
    pub fn new(client: Client, resource: impl Into<String>) -> Self {
        Self {
            client,
            resource: Fixed(Arc::from(resource.into())),
            key: NoKey,
            permits: 1,
            pass_on_error: false,
        }
    }
}

impl<R, K> RateLimitLayer<R, K> {
    /// The key of each request, for a `per_key` policy: a function of the request
    /// (annotate the closure's argument, `|req: &http::Request<Body>|`).
    pub fn key_fn<F>(self, key: F) -> RateLimitLayer<R, F> {
        RateLimitLayer {
            client: self.client,
            resource: self.resource,
            key,
            permits: self.permits,
            pass_on_error: self.pass_on_error,
        }
    }

    /// The resource of each request, a function of the request (instead of a fixed one).
    pub fn resource_fn<F>(self, resource: F) -> RateLimitLayer<ResourceFn<F>, K> {
        RateLimitLayer {
            client: self.client,
            resource: ResourceFn(resource),
            key: self.key,
            permits: self.permits,
            pass_on_error: self.pass_on_error,
        }
    }

    /// The permits each request takes (1 unless set).
    pub fn permits(mut self, permits: i64) -> Self {
        self.permits = permits;
        self
    }

    /// Lets a request through when the call fails with an error (e.g. no such policy)
    /// instead of answering 500.
    pub fn pass_on_error(mut self, pass: bool) -> Self {
        self.pass_on_error = pass;
        self
    }
}

impl<S, R: Clone, K: Clone> Layer<S> for RateLimitLayer<R, K> {
    type Service = RateLimit<S, R, K>;

    fn layer(&self, inner: S) -> Self::Service {
        RateLimit {
            inner,
            layer: self.clone(),
        }
    }
}

/// The service of [`RateLimitLayer`].
#[derive(Clone, Debug)]
pub struct RateLimit<S, R = Fixed, K = NoKey> {
    inner: S,
    layer: RateLimitLayer<R, K>,
}

impl<S, B, ResBody, R, K> Service<Request<B>> for RateLimit<S, R, K>
where
    S: Service<Request<B>, Response = Response<ResBody>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    B: Send + 'static,
    ResBody: Default + Send + 'static,
    R: RequestResource<B>,
    K: RequestKey<B>,
{
    type Response = Response<ResBody>;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        // The clone that was polled ready serves this request; a fresh clone stays.
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let resource = self.layer.resource.resource(&request);
        let mut options = AcquireOptions::new().permits(self.layer.permits);
        options.key = self.layer.key.key(&request);
        let client = self.layer.client.clone();
        let pass_on_error = self.layer.pass_on_error;
        Box::pin(async move {
            let decision = match client.acquire(&resource, options).await {
                Ok(decision) => decision,
                Err(_) if pass_on_error => return inner.call(request).await,
                Err(_) => {
                    let mut response = Response::new(ResBody::default());
                    *response.status_mut() = StatusCode::INTERNAL_SERVER_ERROR;
                    return Ok(response);
                }
            };
            if !decision.allowed {
                return Ok(too_many_requests(&decision));
            }
            let mut response = inner.call(request).await?;
            add_headers(response.headers_mut(), &decision.headers, false);
            Ok(response)
        })
    }
}

/// The 429 of a denial, with its headers (`Retry-After` computed when the decision has
/// none, as a degraded fail-closed one).
pub fn too_many_requests<B: Default>(decision: &Decision) -> Response<B> {
    let mut response = Response::new(B::default());
    *response.status_mut() = StatusCode::TOO_MANY_REQUESTS;
    let mut headers = decision.headers.clone();
    if headers.retry_after.is_none() {
        let ms = decision.retry_after_ms.unwrap_or(1000).max(1) as u64;
        headers.retry_after = Some(ms.div_ceil(1000).to_string());
    }
    add_headers(response.headers_mut(), &headers, true);
    response
}

fn add_headers(map: &mut http::HeaderMap, headers: &RateLimitHeaders, retry_after: bool) {
    for (name, value) in headers.iter() {
        if name == "Retry-After" && !retry_after {
            continue;
        }
        if let (Ok(name), Ok(value)) = (
            HeaderName::try_from(name.to_ascii_lowercase()),
            HeaderValue::try_from(value),
        ) {
            map.insert(name, value);
        }
    }
}
