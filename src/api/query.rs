//! Query strings of the admin API: `web::Query` after checking that every value is UTF-8
//! text (see `domain::non_utf8_field`), so that `?key=%ff` is a 400, not the bucket of
//! U+FFFD.

use std::future::{Ready, ready};
use std::ops::Deref;

use actix_web::{FromRequest, HttpRequest, dev::Payload, web};
use serde::de::DeserializeOwned;

use super::problem::Problem;
use crate::domain::{FieldError, non_utf8_field};

/// A query string read as `T`, every value of it UTF-8 text.
pub struct TextQuery<T>(pub T);

impl<T> Deref for TextQuery<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.0
    }
}

impl<T: DeserializeOwned> FromRequest for TextQuery<T> {
    type Error = Problem;
    type Future = Ready<Result<Self, Problem>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        ready(read(req.query_string()))
    }
}

fn read<T: DeserializeOwned>(query: &str) -> Result<TextQuery<T>, Problem> {
    if let Some(field) = non_utf8_field(query) {
        let error = FieldError::new(field.clone(), "is not UTF-8 text once percent-decoded");
        return Err(
            Problem::malformed(format!("bad query string: {field} is not UTF-8 text"))
                .with_fields(error.into()),
        );
    }
    web::Query::<T>::from_query(query)
        .map(|q| TextQuery(q.into_inner()))
        .map_err(|e| Problem::malformed(format!("bad query string: {e}")))
}
