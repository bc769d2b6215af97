//! The HTTP client of `--server`: the client library's [`AdminClient`], over `http://`,
//! or `https://` with the server's certificate always verified, against the platform's
//! trusted roots (rustls-platform-verifier: on Linux the system's CA store, e.g. Debian's
//! `ca-certificates`) or, with `--ca-file`, against only the CA certificates of that PEM
//! file (a server under a private CA). There is deliberately no way to skip verification.
//! This module words the library's errors in the command line's terms (its flags).

use std::path::Path;

use anyhow::anyhow;
use ratekeeper_client::transport::SetupError;
use ratekeeper_client::{AdminClient, TransportError};

/// The environment variable that gives `--ca-file` (e.g. from a CI's secrets).
pub const CA_FILE_VARIABLE: &str = "RATEKEEPER_CA_FILE";

/// A client of `server`'s admin API calling with `token`: TLS for `https://`, verified
/// against `ca_file`'s certificates when given; `--ca-file` with `http://` is refused
/// rather than ignored, since whoever gave it expected TLS.
pub fn for_server(
    server: &str,
    token: &str,
    ca_file: Option<&Path>,
) -> anyhow::Result<AdminClient> {
    AdminClient::new(server, token, ca_file).map_err(|e| setup_error(server, e))
}

/// The library's set-up error, naming the flags.
fn setup_error(server: &str, error: SetupError) -> anyhow::Error {
    match error {
        SetupError::NotAUrl { .. } => {
            anyhow!("--server {server:?} is not a URL such as http://127.0.0.1:8080")
        }
        SetupError::Scheme { scheme, .. } => anyhow!(
            "--server {server:?}: the scheme {scheme}:// is not supported; use http:// or https://"
        ),
        SetupError::CaFileWithoutHttps { path, .. } => anyhow!(
            "--ca-file {} is given but --server {server:?} is not https://",
            path.display()
        ),
        SetupError::CaFileUnreadable { path, source } => {
            anyhow::Error::new(source).context(format!("cannot read --ca-file {}", path.display()))
        }
        SetupError::CaFileNotPem { path, reason } => anyhow!(
            "--ca-file {} is not a PEM certificate file: {reason}",
            path.display()
        ),
        SetupError::CaFileEmpty { path } => anyhow!(
            "--ca-file {} holds no PEM certificate (a -----BEGIN CERTIFICATE----- block)",
            path.display()
        ),
        // The error's sources say why (reqwest's own text is only "builder error").
        SetupError::Build {
            ca_file: Some(path),
            source,
        } => anyhow::Error::new(source).context(format!(
            "--ca-file {}: cannot use its certificates",
            path.display()
        )),
        other => anyhow::Error::new(other),
    }
}

/// Why a request could not be sent (its text names the endpoint), with what to do when
/// the server's certificate was refused (its CA unknown to the trusted roots: a private
/// CA wants `--ca-file`).
pub fn unreachable(error: TransportError, endpoint: &url::Url) -> anyhow::Error {
    let refused = error.is_untrusted_certificate();
    let error = anyhow::Error::new(error);
    if refused {
        error.context(format!(
            "cannot reach {endpoint}: its certificate is not trusted (a server under a private CA needs --ca-file or {CA_FILE_VARIABLE} naming that CA's certificate)"
        ))
    } else {
        error
    }
}
