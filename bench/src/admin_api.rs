//! The set-up through the server's admin JSON API: the application, its API key, the
//! policies (`p0..` created concurrently, failures retried once one at a time), and the
//! probes that wait until each scenario's acquire is granted.

use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use futures_util::{StreamExt, stream};
use serde_json::Value;

use crate::server::Server;

pub const APP: &str = "bench";

pub struct AdminApi {
    http: reqwest::Client,
    base: String,
    token: String,
}

/// A reply: its status and its body (the first bytes, for messages).
pub struct Reply {
    pub status: u16,
    pub body: String,
}

/// What creating the `p0..` policies took.
pub struct Creation {
    pub seconds: f64,
    pub first_failures: usize,
    /// The status codes of the first failures, e.g. "503 x2, 000 x1".
    pub first_failure_codes: String,
}

impl AdminApi {
    pub fn new(server: &Server) -> Self {
        Self {
            http: reqwest::Client::new(),
            base: server.base.clone(),
            token: server.token.clone(),
        }
    }

    async fn send(&self, method: reqwest::Method, path: &str, body: Option<&str>) -> Reply {
        let mut request = self
            .http
            .request(method, format!("{}{path}", self.base))
            .bearer_auth(&self.token)
            .header("Accept", "application/json")
            .timeout(Duration::from_secs(60));
        if let Some(body) = body {
            request = request
                .header("Content-Type", "application/json")
                .body(body.to_owned());
        }
        match request.send().await {
            Ok(reply) => Reply {
                status: reply.status().as_u16(),
                body: reply.text().await.unwrap_or_default(),
            },
            Err(e) => Reply {
                status: 0,
                body: e.to_string(),
            },
        }
    }

    /// A POST that must answer `want` (another 2xx only warns).
    async fn post_expect(&self, path: &str, body: &str, want: u16) -> Result<Reply> {
        let reply = self.send(reqwest::Method::POST, path, Some(body)).await;
        if reply.status != want {
            if (200..300).contains(&reply.status) {
                crate::log!(
                    "WARNING: POST {path} answered {}, the design says {want}",
                    reply.status
                );
            } else {
                bail!(
                    "POST {path} answered {}, wanted {want}: {}",
                    reply.status,
                    head(&reply.body, 600)
                );
            }
        }
        Ok(reply)
    }

    /// The application, its API key (returned), and the policies hot, hot2 (scenario k
    /// acquires all of hot and hot2), tight, users, few.
    pub async fn create_app(&self, policy_fields: &str, keyed_fields: &str) -> Result<String> {
        crate::log!("creating the application, its API key and the policies hot and tight");
        self.post_expect(
            "/api/v1/apps",
            &format!(r#"{{"slug":"{APP}","name":"Bench","description":""}}"#),
            201,
        )
        .await?;
        let key_reply = self
            .post_expect(
                &format!("/api/v1/apps/{APP}/keys"),
                r#"{"label":"bench"}"#,
                201,
            )
            .await?;
        let key: Value =
            serde_json::from_str(&key_reply.body).context("the key reply is not JSON")?;
        let key = key["key"]
            .as_str()
            .filter(|k| !k.is_empty())
            .with_context(|| {
                format!(
                    "no \"key\" in the key reply: {}",
                    head(&key_reply.body, 600)
                )
            })?
            .to_owned();
        for hot in ["hot", "hot2"] {
            self.post_expect("/api/v1/policies", &policy_body(hot, policy_fields), 201)
                .await?;
        }
        self.post_expect(
            "/api/v1/policies",
            &policy_body("tight", r#""rate":1,"max_permits":1"#),
            201,
        )
        .await?;
        for keyed in ["users", "few"] {
            let fields = format!(r#""scope":"per_key",{keyed_fields}"#);
            self.post_expect("/api/v1/policies", &policy_body(keyed, &fields), 201)
                .await?;
        }
        Ok(key)
    }

    /// Creates `p0..p<n-1>`, `parallel` at a time; those that fail are retried once, one at
    /// a time, and any still failing stop the run.
    pub async fn create_policies(
        &self,
        n: usize,
        parallel: usize,
        fields: &str,
    ) -> Result<Creation> {
        crate::log!("creating {n} policies over HTTP ({parallel} in parallel)");
        let started = Instant::now();
        let failed = self
            .create_each((0..n).map(|i| format!("p{i}")).collect(), parallel, fields)
            .await;
        let first_failures = failed.len();
        let mut codes: Vec<(u16, usize)> = Vec::new();
        for (_, code) in &failed {
            match codes.iter_mut().find(|(c, _)| c == code) {
                Some((_, count)) => *count += 1,
                None => codes.push((*code, 1)),
            }
        }
        let first_failure_codes = codes
            .iter()
            .map(|(code, count)| format!("{code:03} x{count}"))
            .collect::<Vec<_>>()
            .join(", ");
        if first_failures > 0 {
            crate::log!(
                "{first_failures} creation(s) failed (codes: {first_failure_codes}); retrying them one at a time"
            );
            let names = failed.into_iter().map(|(name, _)| name).collect();
            let still = self.create_each(names, 1, fields).await;
            if let Some((name, code)) = still.first() {
                bail!(
                    "{} of {n} policies could not be created; e.g. {name}: {code:03}",
                    still.len()
                );
            }
        }
        let seconds = started.elapsed().as_secs_f64();
        crate::log!(
            "created {n} policies in {seconds:.1} s ({:.0}/s)",
            n as f64 / seconds
        );
        Ok(Creation {
            seconds,
            first_failures,
            first_failure_codes,
        })
    }

    /// The names whose creation failed, with the status each got.
    async fn create_each(
        &self,
        names: Vec<String>,
        parallel: usize,
        fields: &str,
    ) -> Vec<(String, u16)> {
        stream::iter(names)
            .map(|name| async move {
                let reply = self
                    .send(
                        reqwest::Method::POST,
                        "/api/v1/policies",
                        Some(&policy_body(&name, fields)),
                    )
                    .await;
                (name, reply.status)
            })
            .buffer_unordered(parallel)
            .filter(|(_, status)| std::future::ready(!(200..300).contains(status)))
            .collect()
            .await
    }

    /// `GET /api/v1/policies/<name>/top?minutes=5`, its first 300 bytes.
    pub async fn top_callers(&self, policy: &str) -> String {
        let reply = self
            .send(
                reqwest::Method::GET,
                &format!("/api/v1/policies/{policy}/top?minutes=5"),
                None,
            )
            .await;
        head(&reply.body, 300).to_owned()
    }
}

fn policy_body(name: &str, fields: &str) -> String {
    format!(r#"{{"name":"{name}","owner_app":"{APP}",{fields}}}"#)
}

/// The longest prefix of `text` within `bytes`, on a character boundary.
pub fn head(text: &str, bytes: usize) -> &str {
    let mut end = bytes.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}
