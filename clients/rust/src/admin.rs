//! [`AdminClient`]: the part of the admin API that applies policy files
//! (`POST /api/v1/apply`), as `ratekeeper policies plan|apply --server` uses it.

use std::fmt;
use std::path::Path;

use url::Url;

use crate::client::ApiKey;
use crate::error::{Error, Problem, TransportError};
use crate::transport::{self, HttpOptions, SetupError};

/// A client of a server's admin API, calling with a user's access token
/// (`ratekeeper token create NAME`).
#[derive(Clone)]
pub struct AdminClient {
    base: Url,
    apply_url: Url,
    http: reqwest::Client,
    token: ApiKey,
}

impl fmt::Debug for AdminClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AdminClient")
            .field("url", &self.base.as_str())
            .field("token", &self.token)
            .finish()
    }
}

/// How [`AdminClient::apply`] treats the file.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ApplyOptions {
    /// Only plan: change nothing, answer what would change (and the plan's `plan_id`).
    pub dry_run: bool,
    /// Also delete the policies of the file's applications that it does not list.
    pub prune: bool,
    /// Apply exactly this plan (from a dry run): refused with [`Error::Conflict`] when a
    /// policy it touches changed since.
    pub plan_id: Option<String>,
}

impl AdminClient {
    /// A client of the server at `url` (`http://` or `https://`), verifying an https
    /// server against only `ca_file`'s certificates when given (else the platform's
    /// roots). No timeout: applying a large file may take a while.
    pub fn new(
        url: &str,
        token: impl Into<ApiKey>,
        ca_file: Option<&Path>,
    ) -> Result<Self, SetupError> {
        let base = transport::parse_base_url(url)?;
        let http = transport::http_client(
            &base,
            HttpOptions {
                ca_file,
                ..HttpOptions::default()
            },
        )?;
        Ok(Self {
            apply_url: transport::endpoint(&base, &["api", "v1", "apply"]),
            base,
            http,
            token: token.into(),
        })
    }

    /// The URL [`AdminClient::apply`] posts to.
    pub fn apply_url(&self) -> &Url {
        &self.apply_url
    }

    /// Plans or applies a policy file (YAML or JSON, as `ratekeeper policies` reads it):
    /// the server's plan as JSON (`policies`, each with its `action`, and `plan_id`).
    /// A refusal is the error of its status (403 another application's policy, 409 a
    /// plan that changed, 422 an invalid file with each field named, ...).
    pub async fn apply(
        &self,
        policy_file: &str,
        options: &ApplyOptions,
    ) -> Result<serde_json::Value, Error> {
        let mut url = self.apply_url.clone();
        {
            let mut query = url.query_pairs_mut();
            query.append_pair("prune", if options.prune { "true" } else { "false" });
            if let Some(id) = &options.plan_id {
                query.append_pair("plan_id", id);
            }
            if options.dry_run {
                query.append_pair("dry_run", "true");
            }
        }
        let unreachable =
            |e| TransportError::new(format!("cannot reach {}", self.apply_url), Some(e));
        let response = self
            .http
            .post(url)
            .bearer_auth(self.token.expose())
            .header(http::header::CONTENT_TYPE, "application/yaml")
            .body(policy_file.to_owned())
            .send()
            .await
            .map_err(unreachable)?;
        let status = response.status().as_u16();
        let body = response.text().await.map_err(|e| {
            TransportError::new(
                format!("cannot read the answer of {}", self.apply_url),
                Some(e),
            )
        })?;
        if !(200..300).contains(&status) {
            return Err(Error::from_reply(status, &body));
        }
        serde_json::from_str(&body).map_err(|e| {
            Error::Unexpected(Problem {
                status,
                type_uri: "about:blank".to_owned(),
                title: "Not a plan".to_owned(),
                detail: Some(e.to_string()),
                errors: Vec::new(),
            })
        })
    }
}
