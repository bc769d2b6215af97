//! The HTTP client of `--server`: `http://`, or `https://` with the server's certificate
//! always verified, against the platform's trusted roots (rustls-platform-verifier: on
//! Linux the system's CA store, e.g. Debian's `ca-certificates`) or, with `--ca-file`,
//! against only the CA certificates of that PEM file (a server under a private CA). There
//! is deliberately no way to skip verification.

use std::path::Path;

use anyhow::{Context, anyhow, bail};
use url::Url;

/// The environment variable that gives `--ca-file` (e.g. from a CI's secrets).
pub const CA_FILE_VARIABLE: &str = "RATEKEEPER_CA_FILE";

/// A client for `endpoint` (already checked to be a URL): TLS for `https://`, verified
/// against `ca_file`'s certificates when given; `--ca-file` with `http://` is refused
/// rather than ignored, since whoever gave it expected TLS.
pub fn for_endpoint(
    server: &str,
    endpoint: &Url,
    ca_file: Option<&Path>,
) -> anyhow::Result<reqwest::Client> {
    let https = match endpoint.scheme() {
        "https" => true,
        "http" => false,
        other => bail!(
            "--server {server:?}: the scheme {other}:// is not supported; use http:// or https://"
        ),
    };
    if let (false, Some(path)) = (https, ca_file) {
        bail!(
            "--ca-file {} is given but --server {server:?} is not https://",
            path.display()
        );
    }
    install_crypto_provider();
    // https_only: a redirect from an https:// server never downgrades to plain http.
    let mut builder = reqwest::Client::builder().https_only(https);
    if let Some(path) = ca_file {
        builder = builder.tls_certs_only(ca_certificates(path)?);
    }
    // The error's sources say why (reqwest's own text is only "builder error").
    builder.build().map_err(|e| {
        let e = anyhow::Error::new(e);
        match ca_file {
            Some(path) => e.context(format!(
                "--ca-file {}: cannot use its certificates",
                path.display()
            )),
            None => e.context("cannot set up the HTTP client"),
        }
    })
}

/// The certificates of a PEM file; a file with none (not PEM, or only a key) is an
/// error naming the file, not an empty trust store that would refuse every server.
fn ca_certificates(path: &Path) -> anyhow::Result<Vec<reqwest::Certificate>> {
    let shown = path.display();
    let pem = std::fs::read(path).with_context(|| format!("cannot read --ca-file {shown}"))?;
    let certificates = reqwest::Certificate::from_pem_bundle(&pem)
        .map_err(|e| anyhow!("--ca-file {shown} is not a PEM certificate file: {e}"))?;
    if certificates.is_empty() {
        bail!("--ca-file {shown} holds no PEM certificate (a -----BEGIN CERTIFICATE----- block)");
    }
    Ok(certificates)
}

/// reqwest is built with `rustls-no-provider` (README "From the command line": ring, not
/// aws-lc-rs, which needs cmake to build), so the process must name rustls's crypto
/// provider before a client is built. Installing it twice is harmless: the first stays.
fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// Why a request could not be sent, with what to do when the server's certificate was
/// refused (its CA unknown to the trusted roots: a private CA wants `--ca-file`).
pub fn unreachable(error: reqwest::Error, endpoint: &Url) -> anyhow::Error {
    let error = anyhow::Error::new(error);
    let refused = error.chain().any(|cause| {
        matches!(
            rustls_error(cause),
            Some(rustls::Error::InvalidCertificate(_))
        )
    });
    if refused {
        error.context(format!(
            "cannot reach {endpoint}: its certificate is not trusted (a server under a private CA needs --ca-file or {CA_FILE_VARIABLE} naming that CA's certificate)"
        ))
    } else {
        error.context(format!("cannot reach {endpoint}"))
    }
}

/// The rustls error inside an I/O error. The connector wraps it in I/O errors, one
/// inside another, whose `source()` skips the wrapped error: so unwrap them by hand.
fn rustls_error<'a>(cause: &'a (dyn std::error::Error + 'static)) -> Option<&'a rustls::Error> {
    let mut cause = cause;
    loop {
        if let Some(tls) = cause.downcast_ref::<rustls::Error>() {
            return Some(tls);
        }
        cause = cause.downcast_ref::<std::io::Error>()?.get_ref()?;
    }
}
