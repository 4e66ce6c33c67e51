//! The policy file's rules: inheritance, validation messages naming the key, durations and
//! the rendering `check-config` prints.

use super::*;

fn load_str(text: &str) -> Result<Policies, PolicyFileError> {
    super::parse(Path::new("claimd.toml"), text)
}

fn error(text: &str) -> String {
    match load_str(text) {
        Ok(p) => panic!("accepted {text:?} as {p:?}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn an_empty_file_is_the_built_in_defaults() {
    let p = load_str("").unwrap();
    assert_eq!(p, Policies::default());
    assert_eq!(p.default.response_retention, p.default.retention);
}

#[test]
fn namespaces_inherit_each_missing_key_from_default_then_the_built_in_default() {
    let p = load_str(
        r#"
        [default]
        lease = "60s"
        retention = "7d"

        [namespaces."slack-events"]
        max_attempts = 3
        retention = "2d"
        response_retention = "1d"

        [namespaces."stripe"]
        backoff_max = "1h"
        "#,
    )
    .unwrap();
    assert_eq!(p.default.lease_ttl, TimeDelta::seconds(60));
    assert_eq!(p.default.max_attempts, 8);
    assert_eq!(p.default.response_retention, TimeDelta::days(7));
    let slack = p.for_namespace("slack-events");
    assert_eq!(slack.lease_ttl, TimeDelta::seconds(60));
    assert_eq!(slack.max_attempts, 3);
    assert_eq!(
        (slack.retention, slack.response_retention),
        (TimeDelta::days(2), TimeDelta::days(1))
    );
    let stripe = p.for_namespace("stripe");
    assert_eq!(stripe.backoff_max, TimeDelta::hours(1));
    assert_eq!(stripe.backoff_base, TimeDelta::seconds(1));
    assert_eq!(stripe.retention, TimeDelta::days(7));
    assert_eq!(p.for_namespace("other"), &p.default);
}

#[test]
fn response_retention_is_the_retention_unless_given_and_an_inherited_one_is_capped() {
    let p = load_str(
        r#"
        [default]
        response_retention = "3d"
        [namespaces.short]
        retention = "1d"
        [namespaces.long]
        retention = "90d"
        [namespaces.own]
        retention = "60d"
        "#,
    )
    .unwrap();
    assert_eq!(p.default.response_retention, TimeDelta::days(3));
    assert_eq!(
        p.for_namespace("short").response_retention,
        TimeDelta::days(1)
    );
    assert_eq!(
        p.for_namespace("long").response_retention,
        TimeDelta::days(3)
    );
    let p = load_str("[namespaces.own]\nretention = \"60d\"\n").unwrap();
    assert_eq!(
        p.for_namespace("own").response_retention,
        TimeDelta::days(60)
    );
}

#[test]
fn every_error_names_the_file_and_the_key() {
    let cases = [
        (
            "[default]\nleese = \"5s\"\n",
            "default.leese: unknown field `leese`",
        ),
        ("[default]\n\nleese = \"5s\"\n", "(line 3)"),
        (
            "[namespaces.\"x\"]\nlease = \"5 minutes\"\n",
            "namespaces.\"x\".lease: must be a duration",
        ),
        (
            "[namespaces.x]\nlease = \"25h\"\n",
            "namespaces.\"x\".lease: must be between 1s and 1d",
        ),
        (
            "[default]\nmax_attempts = 0\n",
            "default.max_attempts: must be between 1 and",
        ),
        (
            "[namespaces.x]\nretention = \"1d\"\nresponse_retention = \"2d\"\n",
            "namespaces.\"x\".response_retention: must not exceed retention (1d)",
        ),
        (
            "[namespaces.\"bad name\"]\n",
            "namespaces.\"bad name\": namespace may only contain",
        ),
        (
            "[namespaces.x]\nbackoff_max = \"500ms\"\n",
            "namespaces.\"x\".backoff_max: must be between",
        ),
        (
            "[namespaces.x]\nbackoff_base = \"10m\"\n",
            "namespaces.\"x\".backoff_base: must not exceed backoff_max (5m)",
        ),
        (
            "[defualt]\nlease = \"5s\"\n",
            "defualt: unknown field `defualt`",
        ),
        ("[default]\nlease = 90\n", "default.lease: invalid type"),
        (
            "[default]\nretention = \"0s\"\n",
            "default.retention: must be between 1s and 3650d",
        ),
    ];
    for (text, expected) in cases {
        let message = error(text);
        assert!(
            message.starts_with("--config: policy file claimd.toml: "),
            "{message}"
        );
        assert!(
            message.contains(expected),
            "{text:?}: {message:?} lacks {expected:?}"
        );
    }
}

#[test]
fn the_rendering_is_a_policy_file_that_loads_to_the_same_policies() {
    let p = load_str(
        "[default]\nretention = \"12h\"\n[namespaces.b]\nlease = \"5m\"\n[namespaces.a]\n\
         response_retention = \"0s\"\n",
    )
    .unwrap();
    let shown = render(&p);
    assert!(shown.starts_with("[default]\nlease = \"90s\"\n"), "{shown}");
    let a = shown.find("[namespaces.\"a\"]").unwrap();
    let b = shown.find("[namespaces.\"b\"]").unwrap();
    assert!(a < b, "namespaces are sorted: {shown}");
    assert_eq!(load_str(&shown).unwrap(), p);
}
