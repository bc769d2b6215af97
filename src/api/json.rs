//! A JSON body extractor whose errors say which field is wrong: broken JSON is a 400,
//! a field of the wrong type or an unknown field is a 422 naming it.

use actix_web::dev::Payload;
use actix_web::web::Bytes;
use actix_web::{FromRequest, HttpRequest};
use futures_util::future::LocalBoxFuture;
use serde::de::DeserializeOwned;

use super::problem::Problem;
use crate::domain::FieldError;

pub struct ValidJson<T>(pub T);

impl<T: DeserializeOwned + 'static> FromRequest for ValidJson<T> {
    type Error = Problem;
    type Future = LocalBoxFuture<'static, Result<Self, Problem>>;

    fn from_request(req: &HttpRequest, payload: &mut Payload) -> Self::Future {
        let bytes = Bytes::from_request(req, payload);
        Box::pin(async move {
            let bytes = bytes
                .await
                .map_err(|e| Problem::malformed(format!("cannot read the body: {e}")))?;
            parse(&bytes).map(ValidJson)
        })
    }
}

pub fn parse<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, Problem> {
    let de = &mut serde_json::Deserializer::from_slice(bytes);
    match serde_path_to_error::deserialize::<_, T>(de) {
        Ok(value) => Ok(value),
        Err(e) => {
            let path = e.path().to_string();
            let inner = e.into_inner();
            if inner.is_syntax() || inner.is_eof() || path == "." {
                Err(Problem::malformed(format!(
                    "the body is not the expected JSON object: {inner}"
                )))
            } else {
                let message = inner.to_string();
                // serde appends " at line L column C": the field name says it better.
                let message = message
                    .split(" at line ")
                    .next()
                    .unwrap_or(&message)
                    .to_owned();
                Err(Problem::invalid(FieldError::new(path, message).into()))
            }
        }
    }
}

/// A required body field of the client APIs, parsed; missing or invalid is a 400 naming it
/// (the admin API answers 422 instead: see `control::inputs`).
pub fn required_field<T>(
    field: &'static str,
    value: Option<String>,
    parse: impl FnOnce(String) -> Result<T, FieldError>,
) -> Result<T, Problem> {
    let value = value.ok_or_else(|| {
        Problem::malformed(format!("{field} is required"))
            .with_fields(FieldError::new(field, "is required").into())
    })?;
    parse(value).map_err(|e| Problem::malformed(e.to_string()).with_fields(e.into()))
}
