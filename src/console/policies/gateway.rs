//! The "Behind a gateway" part of a policy's page: how an Envoy in front of a service asks
//! ratekeeper's rate limit service (gRPC `ShouldRateLimit`) about this policy: the
//! descriptor that names it (`generic_key` = its name, then the key's entry on a per_key
//! policy), the patterns it declares, and the Envoy configuration to copy: the route's
//! `rate_limits` and the http filter's `rate_limit_service`.

use crate::control::PolicyView;
use crate::domain::Scope;

use super::descriptors_text;

/// The header a per_key example reads the key from, and the descriptor key it becomes.
const EXAMPLE_HEADER: &str = "x-user-id";
const EXAMPLE_KEY: &str = "user_id";
/// The domain the examples use when the policy's patterns name none: the `generic_key`
/// convention finds the policy in any domain.
const DEFAULT_DOMAIN: &str = "ratekeeper";

pub struct GatewayPart {
    /// The descriptor that names the policy, as `key=value` entries.
    pub descriptor: String,
    /// The declared patterns, one line each as the form writes them.
    pub patterns: Vec<String>,
    /// The route's `rate_limits` (YAML).
    pub route: String,
    /// The http filter with its `rate_limit_service` (YAML).
    pub filter: String,
}

impl GatewayPart {
    pub fn of(policy: &PolicyView) -> Self {
        let keyed = policy.scope == Scope::PerKey;
        let mut descriptor = format!("generic_key={}", policy.name);
        if keyed {
            descriptor.push_str(&format!(", {EXAMPLE_KEY}=<the caller's key>"));
        }
        let domain = policy
            .descriptors
            .iter()
            .find_map(|d| d.domain.as_deref())
            .unwrap_or(DEFAULT_DOMAIN);
        Self {
            descriptor,
            patterns: policy
                .descriptors
                .iter()
                .map(descriptors_text::render_line)
                .collect(),
            route: route(&policy.name, keyed),
            filter: filter(domain),
        }
    }
}

fn route(name: &str, keyed: bool) -> String {
    let mut yaml = format!(
        "rate_limits:\n\
         - actions:\n  \
           - generic_key:\n      \
               descriptor_value: \"{name}\"\n"
    );
    if keyed {
        yaml.push_str(&format!(
            "  - request_headers:\n      \
                 header_name: \"{EXAMPLE_HEADER}\"\n      \
                 descriptor_key: \"{EXAMPLE_KEY}\"\n"
        ));
    }
    yaml
}

fn filter(domain: &str) -> String {
    format!(
        "http_filters:\n\
         - name: envoy.filters.http.ratelimit\n  \
           typed_config:\n    \
             \"@type\": type.googleapis.com/envoy.extensions.filters.http.ratelimit.v3.RateLimit\n    \
             domain: \"{domain}\"\n    \
             rate_limit_service:\n      \
               transport_api_version: V3\n      \
               grpc_service:\n        \
                 envoy_grpc:\n          \
                   cluster_name: ratekeeper\n        \
                 initial_metadata:\n        \
                 - key: authorization\n          \
                   value: \"Bearer <API key of your application>\"\n"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_snippets_are_yaml_envoy_reads() {
        let route: serde_json::Value =
            serde_norway::from_str(&route("orders.create", true)).unwrap();
        let actions = &route["rate_limits"][0]["actions"];
        assert_eq!(
            actions[0]["generic_key"]["descriptor_value"],
            "orders.create"
        );
        assert_eq!(actions[1]["request_headers"]["descriptor_key"], "user_id");
        let filter: serde_json::Value = serde_norway::from_str(&filter("edge")).unwrap();
        let config = &filter["http_filters"][0]["typed_config"];
        assert_eq!(config["domain"], "edge");
        let service = &config["rate_limit_service"];
        assert_eq!(service["transport_api_version"], "V3");
        assert_eq!(
            service["grpc_service"]["envoy_grpc"]["cluster_name"],
            "ratekeeper"
        );
        assert_eq!(
            service["grpc_service"]["initial_metadata"][0]["value"],
            "Bearer <API key of your application>"
        );
    }
}
