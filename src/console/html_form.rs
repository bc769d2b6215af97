//! A form body as browsers send it, including repeated fields (`allowed_apps=shop&
//! allowed_apps=billing` from a list of checkboxes), which `web::Form` cannot read into a
//! list. The body's size limit is the route's `web::PayloadConfig`.

use std::future::Future;
use std::pin::Pin;

use actix_web::{FromRequest, HttpMessage, HttpRequest, dev::Payload, web};
use serde::de::DeserializeOwned;

use super::error::ConsoleError;

pub struct HtmlForm<T>(pub T);

impl<T> HtmlForm<T> {
    pub fn into_inner(self) -> T {
        self.0
    }
}

impl<T> std::ops::Deref for HtmlForm<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.0
    }
}

impl<T: DeserializeOwned + 'static> FromRequest for HtmlForm<T> {
    type Error = ConsoleError;
    type Future = Pin<Box<dyn Future<Output = Result<Self, Self::Error>>>>;

    fn from_request(req: &HttpRequest, payload: &mut Payload) -> Self::Future {
        let is_form = req.content_type() == "application/x-www-form-urlencoded";
        let body = web::Bytes::from_request(req, payload);
        Box::pin(async move {
            let unreadable = |why: String| {
                ConsoleError::BadRequest(format!("The form could not be read: {why}"))
            };
            if !is_form {
                return Err(unreadable(
                    "it was not sent as an HTML form (application/x-www-form-urlencoded)".into(),
                ));
            }
            let body = body.await.map_err(|e| unreadable(e.to_string()))?;
            serde_html_form::from_bytes(&body)
                .map(HtmlForm)
                .map_err(|e| unreadable(e.to_string()))
        })
    }
}
