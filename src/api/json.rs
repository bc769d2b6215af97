//! JSON body extractors whose errors say which field is wrong. A body that is not one
//! JSON object (broken JSON, trailing bytes after it, not an object) is a 400 everywhere.
//! A field of the wrong type, `null`, or an unknown field is named in the problem: a 422
//! on the admin API ([`ValidJson`], like any other invalid field there), a 400 on the
//! client API ([`ClientJson`], where 422 means only a `permits` count out of range).

use actix_web::dev::Payload;
use actix_web::web::Bytes;
use actix_web::{FromRequest, HttpRequest};
use futures_util::future::LocalBoxFuture;
use serde::de::DeserializeOwned;

use super::problem::Problem;
use crate::domain::{FieldError, in_plain_words};

/// An admin API body: a field that does not fit is a 422 naming it.
pub struct ValidJson<T>(pub T);

/// A client API body (acquire, release): a field that does not fit is a 400 naming it.
pub struct ClientJson<T>(pub T);

impl<T: DeserializeOwned + 'static> FromRequest for ValidJson<T> {
    type Error = Problem;
    type Future = LocalBoxFuture<'static, Result<Self, Problem>>;

    fn from_request(req: &HttpRequest, payload: &mut Payload) -> Self::Future {
        let bytes = Bytes::from_request(req, payload);
        Box::pin(async move {
            let bytes = bytes.await.map_err(unreadable)?;
            parse(&bytes).map(ValidJson).map_err(BodyError::admin)
        })
    }
}

impl<T: DeserializeOwned + 'static> FromRequest for ClientJson<T> {
    type Error = Problem;
    type Future = LocalBoxFuture<'static, Result<Self, Problem>>;

    fn from_request(req: &HttpRequest, payload: &mut Payload) -> Self::Future {
        let bytes = Bytes::from_request(req, payload);
        Box::pin(async move {
            let bytes = bytes.await.map_err(unreadable)?;
            parse(&bytes).map(ClientJson).map_err(BodyError::client)
        })
    }
}

pub(crate) fn unreadable(e: actix_web::Error) -> Problem {
    Problem::malformed(format!("cannot read the body: {e}"))
}

/// Why a body could not become the type asked for.
#[derive(Debug)]
pub enum BodyError {
    /// Not one JSON object of the expected shape.
    Malformed(String),
    /// One field does not fit: wrong type, null, unknown.
    Field(FieldError),
}

impl BodyError {
    fn admin(self) -> Problem {
        match self {
            Self::Malformed(detail) => Problem::malformed(detail),
            Self::Field(e) => Problem::invalid(e.into()),
        }
    }

    fn client(self) -> Problem {
        match self {
            Self::Malformed(detail) => Problem::malformed(detail),
            Self::Field(e) => Problem::malformed(e.to_string()).with_fields(e.into()),
        }
    }
}

/// The body as a `T`: one JSON object, with nothing after it but whitespace. (serde
/// would also read a struct from an array of its fields in order; no client means that.)
pub fn parse<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, BodyError> {
    if bytes.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
        return Err(BodyError::Malformed(
            "the body must be one JSON object, {...}".into(),
        ));
    }
    // The common case, a body that fits, read straight (serde_json also refuses anything
    // but whitespace after the object); tracking the path costs on every field, so only
    // a body that does not fit is read again with it, to say where.
    if let Ok(value) = serde_json::from_slice(bytes) {
        return Ok(value);
    }
    let de = &mut serde_json::Deserializer::from_slice(bytes);
    let value = match serde_path_to_error::deserialize::<_, T>(&mut *de) {
        Ok(value) => value,
        Err(e) => {
            let path = e.path().to_string();
            let inner = e.into_inner();
            if inner.is_syntax() || inner.is_eof() || path == "." {
                return Err(BodyError::Malformed(format!(
                    "the body is not the expected JSON object: {inner}"
                )));
            }
            let message = inner.to_string();
            // serde appends " at line L column C": the field name says it better.
            let message = message.split(" at line ").next().unwrap_or(&message);
            return Err(BodyError::Field(FieldError::new(
                path,
                in_plain_words(message),
            )));
        }
    };
    de.end().map_err(|_| {
        BodyError::Malformed("the body has more after its JSON object; send one object".into())
    })?;
    Ok(value)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::control::not_null;
    use serde::Deserialize;

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Body {
        #[serde(default, deserialize_with = "not_null")]
        rate: Option<f64>,
    }

    #[test]
    fn one_object_with_fields_that_fit() {
        assert_eq!(parse::<Body>(br#" {"rate": 2} "#).unwrap().rate, Some(2.0));
        assert_eq!(parse::<Body>(b"{}").unwrap().rate, None);
        let field = |body: &[u8]| match parse::<Body>(body) {
            Err(BodyError::Field(e)) => e.field,
            other => panic!("{other:?}"),
        };
        assert_eq!(field(br#"{"rate": null}"#), "rate");
        assert_eq!(field(br#"{"rate": "2"}"#), "rate");
        assert_eq!(field(br#"{"rat": 2}"#), "rat");
        for malformed in [&br#"{"rate": 2} xyz"#[..], b"{} {}", b"[1]", b"{", b""] {
            assert!(matches!(
                parse::<Body>(malformed),
                Err(BodyError::Malformed(_))
            ));
        }
    }
}
