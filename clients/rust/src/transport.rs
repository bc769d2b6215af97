//! The HTTP stack shared by [`crate::Client`] and [`crate::AdminClient`]: `http://`, or
//! `https://` with the server's certificate always verified, against the platform's
//! trusted roots (rustls-platform-verifier: on Linux the system's CA store) or, with a
//! CA file, against only the CA certificates of that PEM file (a server under a private
//! CA). There is deliberately no way to skip verification. A redirect from an `https://`
//! server never downgrades to plain `http://`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use url::Url;

/// The `User-Agent` every request carries: `ratekeeper-rust/<version>`.
pub const USER_AGENT: &str = concat!("ratekeeper-rust/", env!("CARGO_PKG_VERSION"));

/// Why a client could not be set up.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SetupError {
    /// The base URL is not a URL.
    #[error("{url:?} is not a URL such as http://127.0.0.1:8080")]
    NotAUrl {
        /// The URL as given.
        url: String,
    },
    /// The base URL's scheme is neither `http` nor `https`.
    #[error("{url:?}: the scheme {scheme}:// is not supported; use http:// or https://")]
    Scheme {
        /// The URL as given.
        url: String,
        /// Its scheme.
        scheme: String,
    },
    /// A CA file was given for an `http://` URL: whoever gave it expected TLS.
    #[error("the CA file {} is given but {url:?} is not https://", path.display())]
    CaFileWithoutHttps {
        /// The CA file.
        path: PathBuf,
        /// The URL as given.
        url: String,
    },
    /// The CA file could not be read.
    #[error("cannot read the CA file {}", path.display())]
    CaFileUnreadable {
        /// The CA file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The CA file is not PEM.
    #[error("the CA file {} is not a PEM certificate file: {reason}", path.display())]
    CaFileNotPem {
        /// The CA file.
        path: PathBuf,
        /// The parser's words.
        reason: String,
    },
    /// The CA file holds no certificate (an empty trust store would refuse every server).
    #[error("the CA file {} holds no PEM certificate (a -----BEGIN CERTIFICATE----- block)", path.display())]
    CaFileEmpty {
        /// The CA file.
        path: PathBuf,
    },
    /// The HTTP client could not be built (its sources say why).
    #[error("cannot set up the HTTP client{}", ca_file.as_ref().map(|p| format!(" with the CA file {}", p.display())).unwrap_or_default())]
    Build {
        /// The CA file, when one was given.
        ca_file: Option<PathBuf>,
        /// reqwest's error.
        #[source]
        source: reqwest::Error,
    },
}

/// A base URL checked to be `http://` or `https://`, without a trailing slash.
pub fn parse_base_url(url: &str) -> Result<Url, SetupError> {
    let parsed = Url::parse(url).map_err(|_| SetupError::NotAUrl {
        url: url.to_owned(),
    })?;
    match parsed.scheme() {
        "http" | "https" => {}
        other => {
            return Err(SetupError::Scheme {
                url: url.to_owned(),
                scheme: other.to_owned(),
            });
        }
    }
    if parsed.cannot_be_a_base() {
        return Err(SetupError::NotAUrl {
            url: url.to_owned(),
        });
    }
    Ok(parsed)
}

/// `base` with `segments` appended to its path (`/api` + `v1/apply`).
pub fn endpoint(base: &Url, segments: &[&str]) -> Url {
    let mut url = base.clone();
    if let Ok(mut path) = url.path_segments_mut() {
        path.pop_if_empty().extend(segments);
    }
    url
}

/// Options of [`http_client`].
#[derive(Clone, Debug, Default)]
pub struct HttpOptions<'a> {
    /// Trust only this PEM file's CA certificates (https only).
    pub ca_file: Option<&'a Path>,
    /// How long an idle connection is kept for the next request.
    pub pool_idle_timeout: Option<Duration>,
}

/// A reqwest client for `base` (from [`parse_base_url`]): TLS for `https://`, verified
/// against the CA file's certificates when one is given; a CA file with `http://` is
/// refused rather than ignored. Every request says `User-Agent: ratekeeper-rust/<version>`.
pub fn http_client(base: &Url, options: HttpOptions<'_>) -> Result<reqwest::Client, SetupError> {
    let https = match base.scheme() {
        "https" => true,
        "http" => false,
        other => {
            return Err(SetupError::Scheme {
                url: base.to_string(),
                scheme: other.to_owned(),
            });
        }
    };
    if let (false, Some(path)) = (https, options.ca_file) {
        return Err(SetupError::CaFileWithoutHttps {
            path: path.to_owned(),
            url: base.to_string(),
        });
    }
    install_crypto_provider();
    let mut builder = reqwest::Client::builder()
        .https_only(https)
        .user_agent(USER_AGENT);
    if let Some(idle) = options.pool_idle_timeout {
        builder = builder.pool_idle_timeout(idle);
    }
    if let Some(path) = options.ca_file {
        builder = builder.tls_certs_only(ca_certificates(path)?);
    }
    builder.build().map_err(|source| SetupError::Build {
        ca_file: options.ca_file.map(Path::to_owned),
        source,
    })
}

/// The certificates of a PEM file; a file with none (not PEM, or only a key) is an error
/// naming the file, not an empty trust store that would refuse every server.
pub fn ca_certificates(path: &Path) -> Result<Vec<reqwest::Certificate>, SetupError> {
    let pem = std::fs::read(path).map_err(|source| SetupError::CaFileUnreadable {
        path: path.to_owned(),
        source,
    })?;
    let certificates =
        reqwest::Certificate::from_pem_bundle(&pem).map_err(|e| SetupError::CaFileNotPem {
            path: path.to_owned(),
            reason: e.to_string(),
        })?;
    if certificates.is_empty() {
        return Err(SetupError::CaFileEmpty {
            path: path.to_owned(),
        });
    }
    Ok(certificates)
}

/// reqwest is built with `rustls-no-provider` (ring, not aws-lc-rs, which needs cmake to
/// build), so the process must name rustls's crypto provider before a client is built.
/// Installing it twice is harmless: the first stays.
fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// Every error in `error`'s chain, the I/O errors' wrapped ones included: the connector
/// wraps errors in I/O errors, one inside another, whose `source()` skips the wrapped
/// error, so they are unwrapped by hand.
fn causes<'a>(
    error: &'a (dyn std::error::Error + 'static),
) -> impl Iterator<Item = &'a (dyn std::error::Error + 'static)> {
    let mut stack = vec![error];
    std::iter::from_fn(move || {
        let cause = stack.pop()?;
        if let Some(io) = cause.downcast_ref::<std::io::Error>()
            && let Some(inner) = io.get_ref()
        {
            stack.push(inner);
        } else if let Some(next) = cause.source() {
            stack.push(next);
        }
        Some(cause)
    })
}

/// Whether the connection was refused: the request surely did not reach the server, so
/// it may be sent again.
pub fn is_refused(error: &reqwest::Error) -> bool {
    error.is_connect()
        && causes(error).any(|cause| {
            cause
                .downcast_ref::<std::io::Error>()
                .is_some_and(|io| io.kind() == std::io::ErrorKind::ConnectionRefused)
        })
}

/// Whether the server's certificate was refused (its CA unknown to the trusted roots).
pub fn is_untrusted_certificate(error: &reqwest::Error) -> bool {
    causes(error).any(|cause| {
        matches!(
            cause.downcast_ref::<rustls::Error>(),
            Some(rustls::Error::InvalidCertificate(_))
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_http_and_https_urls_are_taken() {
        assert!(parse_base_url("http://127.0.0.1:8080").is_ok());
        assert!(parse_base_url("https://rk.internal/prefix/").is_ok());
        let ftp = parse_base_url("ftp://127.0.0.1:21").unwrap_err();
        assert!(ftp.to_string().contains("use http:// or https://"), "{ftp}");
        assert!(matches!(
            parse_base_url("not a url"),
            Err(SetupError::NotAUrl { .. })
        ));
    }

    #[test]
    fn endpoints_are_appended_to_the_base_path() {
        let base = parse_base_url("http://h:1/rk/").unwrap();
        assert_eq!(
            endpoint(&base, &["v1", "acquire"]).as_str(),
            "http://h:1/rk/v1/acquire"
        );
        let base = parse_base_url("http://h:1").unwrap();
        assert_eq!(
            endpoint(&base, &["api", "v1", "apply"]).as_str(),
            "http://h:1/api/v1/apply"
        );
    }

    #[test]
    fn a_ca_file_is_for_https_and_must_hold_certificates() {
        let dir = std::env::temp_dir().join(format!("rk-client-ca-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let not_pem = dir.join("ca.txt");
        std::fs::write(&not_pem, "not a certificate\n").unwrap();
        let http = parse_base_url("http://127.0.0.1:1").unwrap();
        let https = parse_base_url("https://127.0.0.1:1").unwrap();
        fn with(path: &Path) -> HttpOptions<'_> {
            HttpOptions {
                ca_file: Some(path),
                ..HttpOptions::default()
            }
        }
        assert!(matches!(
            http_client(&http, with(&not_pem)),
            Err(SetupError::CaFileWithoutHttps { .. })
        ));
        assert!(matches!(
            http_client(&https, with(&not_pem)),
            Err(SetupError::CaFileEmpty { .. })
        ));
        assert!(matches!(
            http_client(&https, with(&dir.join("missing.pem"))),
            Err(SetupError::CaFileUnreadable { .. })
        ));
        assert!(http_client(&https, HttpOptions::default()).is_ok());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
