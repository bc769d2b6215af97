//! The console's static files, compiled into the binary: no CDN, nothing to deploy beside
//! it. Pages link each file by a name that carries a hash of its content
//! (`style.3f9a0c1b2d.css`), so a browser may keep it for a year: a new release changes
//! the name. The plain name still answers (for a page cached before the upgrade), but
//! must be checked again on every use.

use std::sync::LazyLock;

use actix_web::http::header::{CacheControl, CacheDirective, ContentType};
use actix_web::{HttpResponse, web};
use sha2::{Digest, Sha256};

use super::error::ConsoleError;

/// A year: what a browser may keep a file whose name changes with its content.
const IMMUTABLE_SECONDS: u32 = 365 * 24 * 3600;

struct Asset {
    name: &'static str,
    /// `style.<hash>.css`.
    hashed_name: String,
    content_type: &'static str,
    body: &'static str,
}

const FILES: &[(&str, &str, &str)] = &[
    (
        "style.css",
        "text/css; charset=utf-8",
        include_str!("../../static/style.css"),
    ),
    (
        "console.js",
        "text/javascript; charset=utf-8",
        include_str!("../../static/console.js"),
    ),
    (
        "app-filter.js",
        "text/javascript; charset=utf-8",
        include_str!("../../static/app-filter.js"),
    ),
];

static ASSETS: LazyLock<Vec<Asset>> = LazyLock::new(|| {
    FILES
        .iter()
        .map(|&(name, content_type, body)| Asset {
            name,
            hashed_name: hashed(name, body),
            content_type,
            body,
        })
        .collect()
});

/// `style.css` -> `style.<first 10 hex digits of its SHA-256>.css`.
fn hashed(name: &str, body: &str) -> String {
    let digest = Sha256::digest(body.as_bytes());
    let hex: String = digest[..5].iter().map(|b| format!("{b:02x}")).collect();
    match name.rsplit_once('.') {
        Some((stem, ext)) => format!("{stem}.{hex}.{ext}"),
        None => format!("{name}.{hex}"),
    }
}

/// The URL a page links a static file by (its content-hashed name). Templates call it
/// with a file name from [`FILES`]; any other name is a bug in a template.
pub fn href(name: &str) -> String {
    let asset = ASSETS
        .iter()
        .find(|a| a.name == name)
        .unwrap_or_else(|| panic!("no static file {name}"));
    format!("/static/{}", asset.hashed_name)
}

pub async fn serve(file: web::Path<String>) -> Result<HttpResponse, ConsoleError> {
    let file = file.as_str();
    let (asset, cache) = ASSETS
        .iter()
        .find_map(|a| {
            if a.hashed_name == file {
                Some((
                    a,
                    vec![
                        CacheDirective::Public,
                        CacheDirective::MaxAge(IMMUTABLE_SECONDS),
                        CacheDirective::Extension("immutable".to_owned(), None),
                    ],
                ))
            } else if a.name == file {
                Some((a, vec![CacheDirective::NoCache]))
            } else {
                None
            }
        })
        .ok_or_else(|| ConsoleError::NotFound("file".to_owned()))?;
    Ok(HttpResponse::Ok()
        .insert_header(ContentType(
            asset.content_type.parse().map_err(anyhow::Error::from)?,
        ))
        .insert_header(CacheControl(cache))
        .body(asset.body))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hashed_name_changes_with_the_content() {
        assert_ne!(hashed("a.css", "x"), hashed("a.css", "y"));
        assert!(hashed("a.css", "x").starts_with("a."));
        assert!(hashed("a.css", "x").ends_with(".css"));
        assert_eq!(hashed("a.css", "x").len(), "a..css".len() + 10);
    }

    #[test]
    fn every_file_has_a_link() {
        for (name, _, _) in FILES {
            assert!(href(name).starts_with("/static/"));
        }
    }
}
