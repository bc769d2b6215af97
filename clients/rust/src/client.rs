//! [`Client`]: the acquire API (`/v1/acquire`, `/v1/refund`, `/v1/release`).

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use tokio::time::Instant;
use url::Url;

use crate::cache::DenialCache;
use crate::decision::{AllDecision, Decision, RateLimitHeaders, Released, WireAll, WireDecision};
use crate::error::{Error, TransportError};
use crate::lease::Lease;
use crate::transport::{self, HttpOptions};

/// The timeout of a call when none is given: 1 second.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(1);
/// The denial cache's size when none is given.
pub const DEFAULT_DENIAL_CACHE_SIZE: usize = 10_000;
/// How many times a request is sent again after its connection was refused.
const MAX_RETRIES: u32 = 2;
/// The first retry's pause (doubled each time, times a random factor in 0.5..1.5).
const BACKOFF: Duration = Duration::from_millis(50);

/// An API key. Its `Debug` and `Display` never show it.
#[derive(Clone)]
pub struct ApiKey(Arc<str>);

impl ApiKey {
    /// Wraps a key.
    pub fn new(key: impl Into<String>) -> Self {
        Self(Arc::from(key.into()))
    }

    /// The key itself, for the `Authorization` header.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ApiKey(<redacted>)")
    }
}

impl fmt::Display for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

impl From<&str> for ApiKey {
    fn from(key: &str) -> Self {
        Self::new(key)
    }
}

impl From<String> for ApiKey {
    fn from(key: String) -> Self {
        Self::new(key)
    }
}

/// The settings of a [`Client`]; see [`Client::builder`].
#[derive(Debug)]
pub struct ClientBuilder {
    url: String,
    api_key: ApiKey,
    timeout: Duration,
    fail_open: bool,
    denial_cache_size: usize,
    ca_file: Option<PathBuf>,
}

impl ClientBuilder {
    /// The default timeout of each call (1 s unless set): connecting, sending, and reading
    /// the reply, retries included.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// What an acquire answers when the server cannot be reached (false unless set:
    /// fail closed). Each call may say otherwise ([`AcquireOptions::fail_open`]).
    pub fn fail_open(mut self, fail_open: bool) -> Self {
        self.fail_open = fail_open;
        self
    }

    /// How many denials the client remembers (10,000 unless set); 0 turns the denial
    /// cache off.
    pub fn denial_cache_size(mut self, size: usize) -> Self {
        self.denial_cache_size = size;
        self
    }

    /// Trusts only the CA certificates of this PEM file for an `https://` server (a server
    /// under a private CA) instead of the platform's roots. The file is read at once: an
    /// unreadable file or one without certificates is an error here.
    pub fn ca_file(mut self, path: impl AsRef<Path>) -> Result<Self, Error> {
        let path = path.as_ref();
        transport::ca_certificates(path)?;
        self.ca_file = Some(path.to_owned());
        Ok(self)
    }

    /// The client. Fails on a URL that is not `http://` or `https://`, or a CA file with
    /// an `http://` URL.
    pub fn build(self) -> Result<Client, Error> {
        let base = transport::parse_base_url(&self.url)?;
        let http = transport::http_client(
            &base,
            HttpOptions {
                ca_file: self.ca_file.as_deref(),
                pool_idle_timeout: Some(Duration::from_secs(60)),
            },
        )?;
        Ok(Client {
            inner: Arc::new(Inner {
                acquire_url: transport::endpoint(&base, &["v1", "acquire"]),
                refund_url: transport::endpoint(&base, &["v1", "refund"]),
                release_url: transport::endpoint(&base, &["v1", "release"]),
                base,
                http,
                api_key: self.api_key,
                timeout: self.timeout,
                fail_open: self.fail_open,
                cache: DenialCache::new(self.denial_cache_size),
            }),
        })
    }
}

/// A client of a ratekeeper server's acquire API. Cheap to clone (the clones share one
/// connection pool and one denial cache); meant to be made once and shared.
#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

struct Inner {
    base: Url,
    acquire_url: Url,
    refund_url: Url,
    release_url: Url,
    http: reqwest::Client,
    api_key: ApiKey,
    timeout: Duration,
    fail_open: bool,
    cache: DenialCache,
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("url", &self.inner.base.as_str())
            .field("api_key", &self.inner.api_key)
            .field("timeout", &self.inner.timeout)
            .field("fail_open", &self.inner.fail_open)
            .field("denial_cache_size", &self.inner.cache.capacity())
            .finish()
    }
}

/// The options of one acquire (or check, or lease): all optional.
///
/// ```
/// use std::time::Duration;
/// use ratekeeper_client::AcquireOptions;
///
/// let options = AcquireOptions::new().key("user-42").permits(2).wait(Duration::from_secs(2));
/// assert_eq!(options.permits, 2);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AcquireOptions {
    /// The permits asked for (1 unless set; 0 is a check).
    pub permits: i64,
    /// The caller's key, for a `per_key` policy.
    pub key: Option<String>,
    /// What to answer when the server cannot be reached; the client's default if `None`.
    pub fail_open: Option<bool>,
    /// This call's timeout; the client's default if `None`.
    pub timeout: Option<Duration>,
    /// How long to wait for a denied permit: on a denial whose `retry_after_ms` fits in
    /// what is left of it, sleep that long and ask again; a denial that cannot end in
    /// time is answered at once. `None` (the default): never wait.
    pub wait: Option<Duration>,
}

impl Default for AcquireOptions {
    fn default() -> Self {
        Self {
            permits: 1,
            key: None,
            fail_open: None,
            timeout: None,
            wait: None,
        }
    }
}

impl AcquireOptions {
    /// One permit, no key, the client's defaults.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets [`AcquireOptions::permits`].
    pub fn permits(mut self, permits: i64) -> Self {
        self.permits = permits;
        self
    }

    /// Sets [`AcquireOptions::key`].
    pub fn key(mut self, key: impl Into<String>) -> Self {
        self.key = Some(key.into());
        self
    }

    /// Sets [`AcquireOptions::fail_open`].
    pub fn fail_open(mut self, fail_open: bool) -> Self {
        self.fail_open = Some(fail_open);
        self
    }

    /// Sets [`AcquireOptions::timeout`].
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Sets [`AcquireOptions::wait`].
    pub fn wait(mut self, wait: Duration) -> Self {
        self.wait = Some(wait);
        self
    }
}

/// One item of an all-or-nothing acquire ([`Client::acquire_all`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct AllItem {
    /// The policy's name.
    pub resource: String,
    /// The caller's key, for a `per_key` policy.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// The permits asked for (the server's default, 1, when `None`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub permits: Option<i64>,
}

impl AllItem {
    /// One permit of `resource`.
    pub fn new(resource: impl Into<String>) -> Self {
        Self {
            resource: resource.into(),
            key: None,
            permits: None,
        }
    }

    /// Sets the key.
    pub fn key(mut self, key: impl Into<String>) -> Self {
        self.key = Some(key.into());
        self
    }

    /// Sets the permits.
    pub fn permits(mut self, permits: i64) -> Self {
        self.permits = Some(permits);
        self
    }
}

/// The options of a call without permits or key of its own ([`Client::acquire_all`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CallOptions {
    /// What to answer when the server cannot be reached; the client's default if `None`.
    pub fail_open: Option<bool>,
    /// This call's timeout; the client's default if `None`.
    pub timeout: Option<Duration>,
}

#[derive(Serialize)]
struct AcquireBody<'a> {
    resource: &'a str,
    permits: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    key: Option<&'a str>,
}

#[derive(Serialize)]
struct AllBody<'a> {
    all: &'a [AllItem],
}

#[derive(Serialize)]
struct ReleaseBody<'a> {
    resource: &'a str,
    lease_id: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    key: Option<&'a str>,
}

/// A reply: its status, headers and body.
struct Reply {
    status: u16,
    headers: http::HeaderMap,
    body: String,
}

impl Client {
    /// The settings of a client of the server at `url` (e.g. `http://127.0.0.1:8080`),
    /// calling with `api_key` (an application's key).
    pub fn builder(url: impl Into<String>, api_key: impl Into<ApiKey>) -> ClientBuilder {
        ClientBuilder {
            url: url.into(),
            api_key: api_key.into(),
            timeout: DEFAULT_TIMEOUT,
            fail_open: false,
            denial_cache_size: DEFAULT_DENIAL_CACHE_SIZE,
            ca_file: None,
        }
    }

    /// The server's base URL.
    pub fn url(&self) -> &Url {
        &self.inner.base
    }

    /// Asks for permits of `resource` (a policy's name). A grant and a denial are both
    /// `Ok`: look at [`Decision::allowed`]. When the server cannot be reached in time
    /// (connection refused after retries, reset, timeout) the answer is a degraded
    /// decision whose `allowed` is the call's `fail_open`, not an error. A denial
    /// remembered in the denial cache is answered without a request (`cached`).
    ///
    /// Errors are the server's refusals of the request itself: [`Error::NotFound`] (no
    /// such policy), [`Error::Invalid`] (permits, key), [`Error::Forbidden`], ...
    pub async fn acquire(
        &self,
        resource: &str,
        options: AcquireOptions,
    ) -> Result<Decision, Error> {
        let Some(wait) = options.wait else {
            return self.acquire_once(resource, &options).await;
        };
        let deadline = Instant::now() + wait;
        loop {
            let decision = self.acquire_once(resource, &options).await?;
            if !decision.is_denial() {
                return Ok(decision);
            }
            let Some(pause) = wait_pause(
                &decision,
                deadline.saturating_duration_since(Instant::now()),
            ) else {
                return Ok(decision);
            };
            tokio::time::sleep(pause).await;
        }
    }

    /// Whether one permit of `resource` would be granted now, taking nothing (an acquire of
    /// 0 permits; `options.permits` is ignored). Fails and degrades as an acquire.
    pub async fn check(&self, resource: &str, options: AcquireOptions) -> Result<Decision, Error> {
        self.acquire(
            resource,
            AcquireOptions {
                permits: 0,
                ..options
            },
        )
        .await
    }

    async fn acquire_once(
        &self,
        resource: &str,
        options: &AcquireOptions,
    ) -> Result<Decision, Error> {
        let key = options.key.as_deref();
        if let Some(cached) = self.inner.cache.lookup(resource, key, options.permits) {
            return Ok(cached);
        }
        let body = AcquireBody {
            resource,
            permits: options.permits,
            key,
        };
        let fail_open = options.fail_open.unwrap_or(self.inner.fail_open);
        let reply = match self
            .send(&self.inner.acquire_url, &body, options.timeout)
            .await
        {
            Ok(reply) => reply,
            Err(_) => return Ok(Decision::degraded(fail_open)),
        };
        let decision = decision_of(reply)?;
        self.inner
            .cache
            .record(resource, key, options.permits, &decision);
        Ok(decision)
    }

    /// Asks for every item together: granted only when each is (a denied call takes
    /// nothing from any bucket). Always sent (never answered from the denial cache); the
    /// denied items are remembered in it. Unreachable server: every result degraded,
    /// `allowed` the call's `fail_open`.
    pub async fn acquire_all(
        &self,
        items: &[AllItem],
        options: CallOptions,
    ) -> Result<AllDecision, Error> {
        let fail_open = options.fail_open.unwrap_or(self.inner.fail_open);
        let reply = match self
            .send(
                &self.inner.acquire_url,
                &AllBody { all: items },
                options.timeout,
            )
            .await
        {
            Ok(reply) => reply,
            Err(_) => {
                return Ok(AllDecision {
                    allowed: fail_open,
                    results: items
                        .iter()
                        .map(|_| Decision::degraded(fail_open))
                        .collect(),
                    degraded: true,
                    headers: RateLimitHeaders::default(),
                });
            }
        };
        if !matches!(reply.status, 200 | 429) {
            return Err(Error::from_reply(reply.status, &reply.body));
        }
        let wire: WireAll = serde_json::from_str(&reply.body)
            .map_err(|e| unreadable(reply.status, &reply.body, &e))?;
        let results: Vec<Decision> = wire
            .results
            .into_iter()
            .map(|w| w.into_decision(RateLimitHeaders::default()))
            .collect();
        for (item, decision) in items.iter().zip(&results) {
            // Only denials teach: an item granted in a denied call was given back.
            if decision.is_denial() {
                let permits = item.permits.unwrap_or(1);
                self.inner
                    .cache
                    .record(&item.resource, item.key.as_deref(), permits, decision);
            }
        }
        Ok(AllDecision {
            allowed: wire.allowed,
            degraded: !results.is_empty() && results.iter().all(|d| d.degraded),
            results,
            headers: RateLimitHeaders::from_map(&reply.headers),
        })
    }

    /// Gives back `permits` a grant took but the work did not use; the decision says what
    /// is left. Forgets a remembered denial of (resource, key). No reply:
    /// [`Error::Transport`].
    pub async fn refund(
        &self,
        resource: &str,
        permits: i64,
        key: Option<&str>,
    ) -> Result<Decision, Error> {
        self.inner.cache.forget(resource, key);
        let body = AcquireBody {
            resource,
            permits,
            key,
        };
        let reply = self.send(&self.inner.refund_url, &body, None).await?;
        decision_of(reply)
    }

    /// Gives back a `concurrency` policy's lease. [`Error::NotFound`] when this
    /// application holds no such lease (expired, already released); [`Error::Conflict`]
    /// when the policy hands out none. No reply: [`Error::Transport`].
    pub async fn release(
        &self,
        resource: &str,
        lease_id: &str,
        key: Option<&str>,
    ) -> Result<Released, Error> {
        self.inner.cache.forget(resource, key);
        let body = ReleaseBody {
            resource,
            lease_id,
            key,
        };
        let reply = self.send(&self.inner.release_url, &body, None).await?;
        if reply.status != 200 {
            return Err(Error::from_reply(reply.status, &reply.body));
        }
        serde_json::from_str(&reply.body).map_err(|e| unreadable(reply.status, &reply.body, &e))
    }

    /// Acquires a `concurrency` permit for the scope of the returned [`Lease`]: give it
    /// back with [`Lease::release`]. A denial is [`Error::Denied`] carrying the decision
    /// (as is a degraded fail-closed answer); a degraded fail-open grant is a lease
    /// without an id, whose release sends nothing.
    pub async fn lease(&self, resource: &str, options: AcquireOptions) -> Result<Lease, Error> {
        let key = options.key.clone();
        let decision = self.acquire(resource, options).await?;
        if !decision.allowed {
            return Err(Error::Denied(Box::new(decision)));
        }
        Ok(Lease::new(self.clone(), resource.to_owned(), key, decision))
    }

    /// One POST, sent again (at most twice, after a jittered pause) only when its
    /// connection was refused, all within the call's timeout.
    async fn send(
        &self,
        url: &Url,
        body: &impl Serialize,
        timeout: Option<Duration>,
    ) -> Result<Reply, TransportError> {
        let timeout = timeout.unwrap_or(self.inner.timeout);
        let deadline = Instant::now() + timeout;
        let body = serde_json::to_vec(body).expect("a request body serialises");
        let mut attempt = 0;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(TransportError::timeout(format!(
                    "{url}: timed out after {timeout:?}"
                )));
            }
            let request = self
                .inner
                .http
                .post(url.clone())
                .bearer_auth(self.inner.api_key.expose())
                .header(http::header::CONTENT_TYPE, "application/json")
                .body(body.clone())
                .timeout(left);
            // The whole call under one bound: sending, then reading the body.
            let result = tokio::time::timeout(left, async {
                let response = request.send().await?;
                let status = response.status().as_u16();
                let headers = response.headers().clone();
                let body = response.text().await?;
                Ok::<_, reqwest::Error>(Reply {
                    status,
                    headers,
                    body,
                })
            })
            .await;
            let error = match result {
                Ok(Ok(reply)) => return Ok(reply),
                Ok(Err(error)) => error,
                Err(_) => {
                    return Err(TransportError::timeout(format!(
                        "{url}: timed out after {timeout:?}"
                    )));
                }
            };
            if attempt >= MAX_RETRIES || !transport::is_refused(&error) {
                return Err(TransportError::new(
                    format!("cannot reach {url}"),
                    Some(error),
                ));
            }
            let pause = backoff(attempt);
            if Instant::now() + pause >= deadline {
                return Err(TransportError::new(
                    format!("cannot reach {url}"),
                    Some(error),
                ));
            }
            tokio::time::sleep(pause).await;
            attempt += 1;
        }
    }
}

/// The pause before retry `attempt` (0-based): 50 ms × 2^attempt × random(0.5..1.5).
fn backoff(attempt: u32) -> Duration {
    BACKOFF.mul_f64(f64::from(1u32 << attempt) * rand::random_range(0.5..1.5))
}

/// How long to sleep before asking again after `denial`, with `left` of the wait: its
/// retry time plus a little jitter (never 0), or `None` when it cannot come in time.
pub(crate) fn wait_pause(denial: &Decision, left: Duration) -> Option<Duration> {
    let retry_after = Duration::from_millis(u64::try_from(denial.retry_after_ms?).ok()?);
    if retry_after.is_zero() || retry_after > left {
        return None;
    }
    let jitter = Duration::from_millis(rand::random_range(1..=10));
    Some((retry_after + jitter).min(left))
}

/// An acquire's (or refund's) reply as a decision: 200 and 429 are decisions, any other
/// status an error.
fn decision_of(reply: Reply) -> Result<Decision, Error> {
    if !matches!(reply.status, 200 | 429) {
        return Err(Error::from_reply(reply.status, &reply.body));
    }
    let wire: WireDecision =
        serde_json::from_str(&reply.body).map_err(|e| unreadable(reply.status, &reply.body, &e))?;
    Ok(wire.into_decision(RateLimitHeaders::from_map(&reply.headers)))
}

fn unreadable(status: u16, body: &str, error: &serde_json::Error) -> Error {
    Error::Unexpected(crate::error::Problem {
        status,
        type_uri: "about:blank".to_owned(),
        title: "Unreadable reply".to_owned(),
        detail: Some(format!("{error}: {}", body.trim())),
        errors: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_api_key_never_shows() {
        let client = Client::builder("http://127.0.0.1:1", "rk_live_secret-key")
            .build()
            .unwrap();
        let shown = format!(
            "{client:?} {:?} {}",
            client.inner.api_key, client.inner.api_key
        );
        assert!(!shown.contains("secret"), "{shown}");
        assert!(shown.contains("redacted"), "{shown}");
        let builder = format!("{:?}", Client::builder("http://x", "rk_live_secret-key"));
        assert!(!builder.contains("secret"), "{builder}");
    }

    #[test]
    fn the_backoff_doubles_with_jitter() {
        for attempt in 0..3 {
            let base = 50.0 * f64::from(1u32 << attempt);
            for _ in 0..20 {
                let ms = backoff(attempt).as_secs_f64() * 1000.0;
                assert!(ms >= base * 0.5 && ms <= base * 1.5, "{attempt}: {ms}");
            }
        }
    }

    #[test]
    fn a_wait_sleeps_only_for_a_denial_that_can_end_in_time() {
        let denial = |ms| Decision {
            retry_after_ms: Some(ms),
            ..Decision::default()
        };
        let pause = wait_pause(&denial(200), Duration::from_millis(1000)).unwrap();
        assert!(pause > Duration::from_millis(200) && pause <= Duration::from_millis(210));
        // Exactly in time: at most what is left.
        let pause = wait_pause(&denial(1000), Duration::from_millis(1000)).unwrap();
        assert_eq!(pause, Duration::from_millis(1000));
        assert_eq!(wait_pause(&denial(1001), Duration::from_millis(1000)), None);
        assert_eq!(wait_pause(&denial(0), Duration::from_millis(1000)), None);
        assert_eq!(
            wait_pause(&Decision::default(), Duration::from_millis(1000)),
            None
        );
    }
}
