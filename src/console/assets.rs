//! The console's static files, compiled into the binary: no CDN, nothing to deploy beside
//! it. Cached for an hour (there is no fingerprinting in the names).

use actix_web::http::header::{CacheControl, CacheDirective, ContentType};
use actix_web::{HttpResponse, web};

use super::error::ConsoleError;

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

pub async fn serve(file: web::Path<String>) -> Result<HttpResponse, ConsoleError> {
    let (_, content_type, body) = FILES
        .iter()
        .find(|(name, _, _)| *name == file.as_str())
        .ok_or_else(|| ConsoleError::NotFound("file".to_owned()))?;
    Ok(HttpResponse::Ok()
        .insert_header(ContentType(
            content_type.parse().map_err(anyhow::Error::from)?,
        ))
        .insert_header(CacheControl(vec![
            CacheDirective::Public,
            CacheDirective::MaxAge(3600),
        ]))
        .body(*body))
}
