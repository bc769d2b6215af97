//! The request bodies of the create operations, as precise as the server's rules: the
//! input types serve a create and a change alike (every field optional, so that a missing
//! one is a 422 naming it), but a create requires some fields, and a policy takes the
//! parameters of its algorithm only. Made here from the generated input schemas, so
//! that the two cannot drift: a fuzzer then sends creates the server can accept.

use utoipa::openapi::schema::{Object, OneOfBuilder, Schema};
use utoipa::openapi::{OpenApi, Ref, RefOr};

use crate::domain::{Algorithm, Param};

pub struct Creates;

impl utoipa::Modify for Creates {
    fn modify(&self, openapi: &mut OpenApi) {
        let Some(app) = object(openapi, "AppInput") else {
            return;
        };
        let new_app = required(app.clone(), &["slug", "name"]);
        let Some(policy) = object(openapi, "PolicyInput") else {
            return;
        };
        let new_policy = Algorithm::ALL
            .into_iter()
            .fold(OneOfBuilder::new(), |one_of, algorithm| {
                one_of.item(new_policy(policy.clone(), algorithm))
            })
            .description(Some(
                "A new policy: each algorithm with its own parameters, and no others",
            ))
            .build();
        let components = openapi.components.get_or_insert_with(Default::default);
        components.schemas.insert("NewApp".into(), new_app.into());
        components
            .schemas
            .insert("NewPolicy".into(), Schema::OneOf(new_policy).into());
        request_body(openapi, "/api/v1/apps", "NewApp");
        request_body(openapi, "/api/v1/policies", "NewPolicy");
    }
}

/// The object schema of a component, if it is one.
fn object(openapi: &OpenApi, name: &str) -> Option<Object> {
    match openapi.components.as_ref()?.schemas.get(name)? {
        RefOr::T(Schema::Object(object)) => Some(object.clone()),
        _ => None,
    }
}

fn required(mut object: Object, fields: &[&str]) -> Object {
    object.required = fields.iter().map(|f| (*f).to_owned()).collect();
    object
}

/// A new policy of `algorithm`: its name, owner and capacity required, its own
/// parameters required and the other algorithms' left out; no version (a create has
/// none).
fn new_policy(mut object: Object, algorithm: Algorithm) -> Object {
    object.properties.remove("version");
    let mut fields = vec!["name", "owner_app", "max_permits", "algorithm"];
    for param in Param::ALL {
        if algorithm.uses(param) {
            fields.push(param.field());
        } else {
            object.properties.remove(param.field());
        }
    }
    if let Some(RefOr::T(Schema::Object(choice))) = object.properties.get_mut("algorithm") {
        choice.enum_values = Some(vec![algorithm.as_str().into()]);
    } else {
        let only = utoipa::openapi::schema::ObjectBuilder::new()
            .schema_type(utoipa::openapi::schema::Type::String)
            .enum_values(Some([algorithm.as_str()]))
            .build();
        object.properties.insert("algorithm".into(), only.into());
    }
    required(object, &fields)
}

/// Points the JSON request body of `POST path` at component `schema`.
fn request_body(openapi: &mut OpenApi, path: &str, schema: &str) {
    let body = openapi
        .paths
        .paths
        .get_mut(path)
        .and_then(|item| item.post.as_mut())
        .and_then(|post| post.request_body.as_mut())
        .and_then(|body| body.content.get_mut("application/json"));
    if let Some(content) = body {
        content.schema = Some(Ref::from_schema_name(schema).into());
    }
}
