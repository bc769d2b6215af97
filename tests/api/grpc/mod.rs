//! Envoy's rate limit service (`ShouldRateLimit`), driven by the client `envoy-types`
//! generates from Envoy's own protos, over a real h2c connection to the real server on
//! port 0, against real Redis and SQL.

mod all_or_nothing;
mod auth;
mod conventions;
mod outages;
mod patterns;
mod replaces_and_blocks;
mod shared_with_http;
mod shutdown;

use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::Entry;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::{Code, DescriptorStatus};
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use envoy_types::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use envoy_types::pb::google::protobuf::UInt64Value;
use ratekeeper::config::Settings;
use reqwest::StatusCode;
use serde_json::{Value, json};
use tonic::transport::Channel;

use crate::helpers::*;

/// The test settings, with gRPC served on a free port.
fn grpc_settings(database_url: &str, redis_url: &str, prefix: &str) -> Settings {
    Settings {
        grpc_listen: Some("127.0.0.1:0".into()),
        ..settings(database_url, redis_url, prefix)
    }
}

/// The server with gRPC on, over SQLite and the shared Redis, with an app "shop" and its key.
async fn shop_over_grpc() -> (TestApp, String) {
    let db = fresh_database(Db::Sqlite).await;
    let app = spawn_app_with(grpc_settings(&db, &redis_url(), &test_prefix("grpc"))).await;
    app.create_app("shop").await;
    let key = app.create_key("shop").await;
    (app, key)
}

#[test]
fn a_grpc_address_that_is_not_host_port_stops_the_start() {
    let mut bad = grpc_settings("sqlite://unused.db", "redis://127.0.0.1:6379", "unused");
    assert!(bad.validate().is_ok());
    bad.grpc_listen = Some("localhost".into());
    let refused = bad.validate().expect_err("not host:port");
    assert!(refused.to_string().contains("grpc_listen"), "{refused}");
}

/// A client of the server's rate limit service.
async fn client(app: &TestApp) -> RateLimitServiceClient<Channel> {
    let address = app.grpc_address.clone().expect("the server serves gRPC");
    RateLimitServiceClient::connect(address)
        .await
        .expect("connects over h2c")
}

/// A descriptor of these entries (key, value).
fn descriptor(entries: &[(&str, &str)]) -> RateLimitDescriptor {
    RateLimitDescriptor {
        entries: entries
            .iter()
            .map(|(key, value)| Entry {
                key: (*key).to_owned(),
                value: (*value).to_owned(),
            })
            .collect(),
        ..RateLimitDescriptor::default()
    }
}

/// A descriptor with hits of its own.
fn with_hits(mut descriptor: RateLimitDescriptor, hits: u64) -> RateLimitDescriptor {
    descriptor.hits_addend = Some(UInt64Value { value: hits });
    descriptor
}

/// `ShouldRateLimit` with the API key in the metadata, as Envoy's `initial_metadata`
/// sends it.
async fn should_rate_limit(
    app: &TestApp,
    api_key: Option<&str>,
    descriptors: Vec<RateLimitDescriptor>,
    hits_addend: u32,
) -> Result<RateLimitResponse, tonic::Status> {
    let mut request = tonic::Request::new(RateLimitRequest {
        domain: "edge".into(),
        descriptors,
        hits_addend,
    });
    if let Some(key) = api_key {
        request.metadata_mut().insert(
            "authorization",
            format!("Bearer {key}").parse().expect("ascii metadata"),
        );
    }
    client(app)
        .await
        .should_rate_limit(request)
        .await
        .map(tonic::Response::into_inner)
}

/// The reply to one call that must succeed.
async fn ask(app: &TestApp, key: &str, descriptors: Vec<RateLimitDescriptor>) -> RateLimitResponse {
    should_rate_limit(app, Some(key), descriptors, 0)
        .await
        .expect("answered")
}

fn code(status: &DescriptorStatus) -> Code {
    Code::try_from(status.code).expect("a known code")
}

fn overall(reply: &RateLimitResponse) -> Code {
    Code::try_from(reply.overall_code).expect("a known code")
}

/// The value of a header the reply asks Envoy to add.
fn header<'a>(reply: &'a RateLimitResponse, name: &str) -> Option<&'a str> {
    reply
        .response_headers_to_add
        .iter()
        .find(|h| h.key.eq_ignore_ascii_case(name))
        .map(|h| h.value.as_str())
}

/// A live keyed bucket's remaining permits, as the admin API reads it.
async fn bucket_permits(app: &TestApp, policy: &str, key: &str) -> f64 {
    let path = format!("/api/v1/policies/{policy}/state?key={key}");
    let state = expect_status(app.get(&path, &app.admin_token).await, StatusCode::OK).await;
    state["current_permits"]
        .as_f64()
        .unwrap_or_else(|| panic!("{state}"))
}

/// An HTTP acquire of one permit of a per_key policy's bucket: its status and body.
async fn http_acquire_keyed(
    app: &TestApp,
    api_key: &str,
    policy: &str,
    key: &str,
) -> (StatusCode, Value) {
    let r = app
        .post(
            "/v1/acquire",
            api_key,
            json!({"resource": policy, "permits": 1, "key": key}),
        )
        .await;
    let status = r.status();
    (status, r.json().await.unwrap())
}
