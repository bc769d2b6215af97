//! A handler's response: a page rendered, or a redirect after a form.

use actix_web::HttpResponse;
use actix_web::http::StatusCode;
use actix_web::http::header::{
    self, CACHE_CONTROL, CacheControl, CacheDirective, ContentType, HeaderValue,
};
use askama::Template;

use super::error::ConsoleError;

pub fn see_other(location: &str) -> HttpResponse {
    HttpResponse::SeeOther()
        .insert_header((header::LOCATION, location.to_owned()))
        .finish()
}

/// A page as an HTML response.
pub fn render(page: &impl Template) -> Result<HttpResponse, ConsoleError> {
    render_status(page, StatusCode::OK)
}

/// A page as an HTML response with another status (a form back with its errors: 422).
pub fn render_status(
    page: &impl Template,
    status: StatusCode,
) -> Result<HttpResponse, ConsoleError> {
    let body = page.render().map_err(anyhow::Error::from)?;
    Ok(HttpResponse::build(status)
        .content_type(ContentType::html())
        .body(body))
}

/// A page showing a secret: no cache may keep it.
pub fn no_store(response: &mut HttpResponse) {
    let value = CacheControl(vec![CacheDirective::NoStore]).to_string();
    if let Ok(value) = HeaderValue::from_str(&value) {
        response.headers_mut().insert(CACHE_CONTROL, value);
    }
}
