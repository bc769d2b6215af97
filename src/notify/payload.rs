//! What a receiver gets: the Standard Webhooks body (`{"type", "timestamp", "data"}`, the
//! event's data with a link to its policy's page) or, for a Slack incoming webhook, a
//! text summary (`{"text"}`). Rendered at each attempt from the stored event, the same
//! bytes every time (the link's base is the server's setting).

use serde_json::{Value, json};

use crate::domain::rfc3339;

/// One stored event, as the outbox holds it.
pub struct Event<'a> {
    pub event_type: &'a str,
    pub occurred_ms: i64,
    /// Its JSON: names the application and the policy, and what happened.
    pub data: &'a str,
}

/// The body of a delivery in `format` (`json` or `slack`); `base` is the console's
/// address as users reach it.
pub fn render(format: &str, event: &Event<'_>, base: &str) -> Vec<u8> {
    let mut data: Value = serde_json::from_str(event.data).unwrap_or_else(|_| json!({}));
    let link = policy_link(&data, base);
    if let (Some(object), Some(link)) = (data.as_object_mut(), &link) {
        object.insert("link".into(), Value::String(link.clone()));
    }
    let body = match format {
        "slack" => json!({ "text": summary(event, &data, link.as_deref()) }),
        _ => json!({
            "type": event.event_type,
            "timestamp": rfc3339(event.occurred_ms),
            "data": data,
        }),
    };
    body.to_string().into_bytes()
}

/// The policy's page: the console's permalink of it.
fn policy_link(data: &Value, base: &str) -> Option<String> {
    let policy = data.get("policy")?.as_str()?;
    Some(format!("{base}/policies/{policy}"))
}

/// One line a person reads in a chat channel.
fn summary(event: &Event<'_>, data: &Value, link: Option<&str>) -> String {
    let text = |field: &str| data.get(field).and_then(Value::as_str).unwrap_or("?");
    let (app, policy) = (text("application"), text("policy"));
    let counts = match data.get("last_minute") {
        Some(m) => format!(
            " Last minute: {} granted, {} denied.",
            m.get("granted").and_then(Value::as_u64).unwrap_or(0),
            m.get("denied").and_then(Value::as_u64).unwrap_or(0)
        ),
        None => String::new(),
    };
    let what = match event.event_type {
        "policy.denying" => format!("started denying at {}.{counts}", text("since")),
        "policy.recovered" => format!(
            "recovered: it denied nothing for its quiet period (it began denying at {}).",
            text("since")
        ),
        "policy.near_limit" => format!(
            "is near its limit: {} of {} permits left.{counts}",
            data.get("remaining")
                .and_then(Value::as_f64)
                .unwrap_or(0.0)
                .floor(),
            data.get("capacity").and_then(Value::as_i64).unwrap_or(0)
        ),
        "policy.changed" => format!("was changed by {} ({}).", text("actor"), text("action")),
        other => other.to_owned(),
    };
    let link = link
        .map(|l| format!(" <{l}|Open the policy>"))
        .unwrap_or_default();
    format!("ratekeeper: policy `{policy}` of `{app}` {what}{link}")
}

#[cfg(test)]
mod tests {
    use super::*;

    const DATA: &str = r#"{"application":"shop","policy":"checkout/pay","since":"2026-11-28T13:00:00.000Z","last_minute":{"granted":120,"denied":35}}"#;

    fn event(event_type: &str) -> Event<'_> {
        Event {
            event_type,
            occurred_ms: 1_796_000_000_000,
            data: DATA,
        }
    }

    #[test]
    fn the_json_body_is_the_standard_webhooks_envelope_with_a_link_to_the_policy() {
        let body = render("json", &event("policy.denying"), "https://rk.example.com");
        let body: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(body["type"], "policy.denying");
        assert_eq!(body["timestamp"], rfc3339(1_796_000_000_000));
        assert_eq!(body["data"]["policy"], "checkout/pay");
        assert_eq!(body["data"]["last_minute"]["denied"], 35);
        assert_eq!(
            body["data"]["link"],
            "https://rk.example.com/policies/checkout/pay"
        );
    }

    #[test]
    fn the_slack_body_is_one_line_of_text_naming_the_policy_counts_and_link() {
        let body = render("slack", &event("policy.denying"), "https://rk.example.com");
        let body: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(
            body["text"],
            "ratekeeper: policy `checkout/pay` of `shop` started denying at \
             2026-11-28T13:00:00.000Z. Last minute: 120 granted, 35 denied. \
             <https://rk.example.com/policies/checkout/pay|Open the policy>"
        );
        assert_eq!(body.as_object().unwrap().len(), 1);
    }

    #[test]
    fn the_same_event_renders_the_same_bytes_at_every_attempt() {
        let e = event("policy.recovered");
        assert_eq!(
            render("json", &e, "http://a"),
            render("json", &e, "http://a")
        );
    }
}
