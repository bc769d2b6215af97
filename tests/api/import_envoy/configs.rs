//! Configs written here, each showing one rule: errors name their line; several
//! documents and files make one policy file; units longer than a day refill over the unit.

use ratekeeper::policy_file::{FilePolicy, from_envoy};
use serde_json::Value;

use super::fixture;

/// Errors of configs written here: each names its line.
#[test]
fn a_bad_config_is_refused_naming_the_line() {
    let cases = [
        (
            "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: fortnight\n      requests_per_unit: 1\n",
            5,
            "unknown unit `fortnight`",
        ),
        (
            "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: second\n",
            4,
            "`requests_per_unit` is required",
        ),
        (
            "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unlimited: true\n      unit: second\n",
            4,
            "takes no `unit`",
        ),
        (
            "domain: d\ndescriptors:\n  - key: k\n    rate_limt:\n      unit: second\n",
            4,
            "unknown field `rate_limt`",
        ),
        ("descriptors: []\n", 1, "`domain` is required"),
        (
            "domain: d\ndescriptors:\n  - value: v\n",
            3,
            "needs a `key`",
        ),
        (
            "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: second\n      requests_per_unit: many\n",
            6,
            "whole number",
        ),
        (
            "domain: d\ndescriptors:\n  - key: a b\n    rate_limit: {unit: second, requests_per_unit: 1}\n",
            3,
            "key must be",
        ),
        (
            "domain: d\ndescriptors:\n  - key: k\n  - key: k\n",
            4,
            "configured a second time",
        ),
        (
            "domain: d\n---\ndomain: d\n",
            3,
            "the domain d is configured a second time",
        ),
        ("domain: d\ndescriptors: [unclosed\n", 3, "not YAML"),
    ];
    for (text, line, words) in cases {
        let files = [("inline.yaml".to_owned(), text.to_owned())];
        let errors = from_envoy(&files, "shop", &[]).expect_err(text);
        let first = &errors.0[0].1;
        assert_eq!(first.line, line, "{text:?}: {errors}");
        assert!(first.message.contains(words), "{text:?}: {errors}");
    }
    let deep: String = (0..9)
        .map(|i| {
            format!(
                "{}- key: k{i}\n{}  descriptors:\n",
                "  ".repeat(2 * i + 1),
                "  ".repeat(2 * i + 1)
            )
        })
        .collect();
    let files = [(
        "deep.yaml".to_owned(),
        format!("domain: d\ndescriptors:\n{deep}"),
    )];
    let errors = from_envoy(&files, "shop", &[]).unwrap_err();
    assert!(errors.0[0].1.message.contains("deeper than 8"), "{errors}");
    let ok = [fixture("example1_mongo_cps.yaml")];
    assert!(
        from_envoy(&ok, "Shop", &[])
            .unwrap_err()
            .to_string()
            .contains("--app")
    );
    assert!(from_envoy(&ok, "shop", &["a,b".to_owned()]).is_err());
}

#[test]
fn several_documents_and_files_make_one_file_and_week_month_year_refill_over_their_unit() {
    let (_, one) = fixture("example1_mongo_cps.yaml");
    let (_, two) = fixture("example2_messaging.yaml");
    let long = "domain: long\ndescriptors:\n  - key: k\n    value: w\n    rate_limit: {unit: week, requests_per_unit: 7}\n  - key: k\n    value: m\n    rate_limit: {unit: MONTH, requests_per_unit: 30}\n  - key: k\n    value: y\n    rate_limit: {unit: year, requests_per_unit: 365, name: yearly quota}\n";
    let files = [
        ("both.yaml".to_owned(), format!("{one}---\n{two}")),
        ("long.yaml".to_owned(), long.to_owned()),
    ];
    let document = from_envoy(&files, "shop", &["shop".into(), "web".into()]).unwrap();
    let names: Vec<&str> = document.policies.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "mongo_cps/database:users",
            "mongo_cps/database:default",
            "messaging/message_type:marketing/to_number",
            "messaging/to_number",
            "long/k:w",
            "long/k:m",
            "yearly-quota"
        ]
    );
    let per_day = |p: &FilePolicy| match serde_json::to_value(&p.rate).unwrap() {
        Value::Number(n) => n.as_f64().unwrap() * 86_400.0,
        other => panic!("{other}"),
    };
    for p in &document.policies[4..] {
        assert_eq!(p.algorithm.as_deref(), Some("token_bucket"));
        assert!((per_day(p) - 1.0).abs() < 1e-9, "one a day: {p:?}");
        assert_eq!(
            p.allowed_apps,
            Some(vec!["shop".to_owned(), "web".to_owned()])
        );
    }
}
