//! The `[tenants]` table: inheritance from `[tenants.default]`, no limit without it, every
//! refusal naming the dotted key, and what `check-config` prints.

use crate::config::policies::{parse, render};
use crate::domain::{Policies, Quota, Rate};
use std::path::Path;

fn load(text: &str) -> Policies {
    parse(Path::new("claimd.toml"), text).unwrap_or_else(|e| panic!("{text:?}: {e}"))
}

fn error(text: &str) -> String {
    match parse(Path::new("claimd.toml"), text) {
        Ok(p) => panic!("accepted {text:?} as {p:?}"),
        Err(e) => e.to_string(),
    }
}

fn rate(per_second: f64) -> Option<Rate> {
    Rate::new(per_second)
}

#[test]
fn a_file_without_tenants_limits_nobody() {
    let p = load("[default]\nlease = \"60s\"\n");
    assert!(p.quotas.is_unlimited());
    assert_eq!(p.quotas.for_tenant("acme"), &Quota::default());
    assert!(load("[tenants.default]\n").quotas.is_unlimited());
}

#[test]
fn a_tenant_takes_each_missing_key_from_tenants_default_else_no_limit() {
    let p = load(
        r#"
        [tenants.default]
        claims_per_second = 50
        burst = 100

        [tenants."acme"]
        claims_per_second = 2.5
        writes_per_second = 10
        max_waiting = 0

        [tenants."globex"]
        max_waiting = 16
        "#,
    );
    let acme = p.quotas.for_tenant("acme");
    assert_eq!(
        acme.claims_bucket(),
        Some((rate(2.5).unwrap(), 3)),
        "its own rate, so not the default's burst: one second's worth"
    );
    assert_eq!(acme.writes_bucket(), Some((rate(10.0).unwrap(), 10)));
    assert_eq!(acme.max_waiting, Some(0));
    let globex = p.quotas.for_tenant("globex");
    assert_eq!(globex.claims_bucket(), Some((rate(50.0).unwrap(), 100)));
    assert_eq!(
        (globex.writes_per_second, globex.max_waiting),
        (None, Some(16))
    );
    let other = p.quotas.for_tenant("initech");
    assert_eq!(other, &p.quotas.default);
    assert_eq!((other.writes_per_second, other.max_waiting), (None, None));
}

#[test]
fn a_burst_alone_resizes_the_default_rate_s_bucket() {
    let p = load("[tenants.default]\nclaims_per_second = 10\n[tenants.\"acme\"]\nburst = 40\n");
    let acme = p.quotas.for_tenant("acme").claims_bucket();
    assert_eq!(acme, Some((rate(10.0).unwrap(), 40)));
}

#[test]
fn without_a_burst_the_claims_bucket_holds_one_second() {
    let p = load("[tenants.\"acme\"]\nclaims_per_second = 7.5\n");
    let bucket = p.quotas.for_tenant("acme").claims_bucket();
    assert_eq!(bucket, Some((rate(7.5).unwrap(), 8)));
    let small = load("[tenants.default]\nclaims_per_second = 0.2\n");
    assert_eq!(small.quotas.default.claims_bucket().map(|b| b.1), Some(1));
}

#[test]
fn every_bad_key_or_value_is_refused_naming_the_key() {
    let cases = [
        (
            "[tenants.\"acme\"]\nclaims_per_second = 0\n",
            "tenants.\"acme\".claims_per_second: must be a positive number",
        ),
        (
            "[tenants.\"acme\"]\nclaims_per_second = -3\n",
            "tenants.\"acme\".claims_per_second: must be a positive number",
        ),
        (
            "[tenants.\"acme\"]\nclaims_per_second = \"5\"\n",
            "tenants.\"acme\".claims_per_second: must be a positive number",
        ),
        (
            "[tenants.\"acme\"]\nclaims_per_second = nan\n",
            "tenants.\"acme\".claims_per_second: must be a positive number",
        ),
        (
            "[tenants.default]\nwrites_per_second = 2e9\n",
            "tenants.default.writes_per_second: must be a positive number",
        ),
        (
            "[tenants.\"acme\"]\nclaims_per_second = 1\nburst = 0\n",
            "tenants.\"acme\".burst: must be a whole number from 1 to",
        ),
        (
            "[tenants.\"acme\"]\nclaims_per_second = 1\nburst = 1.5\n",
            "tenants.\"acme\".burst: must be a whole number",
        ),
        (
            "[tenants.\"acme\"]\nmax_waiting = -1\n",
            "tenants.\"acme\".max_waiting: must be a whole number from 0 to",
        ),
        (
            "[tenants.\"acme\"]\nmax_receipts = -1\n",
            "tenants.\"acme\".max_receipts: must be a whole number from 0 to",
        ),
        (
            "[tenants.default]\nmax_stored_bytes = \"1 GB\"\n",
            "tenants.default.max_stored_bytes: must be a whole number from 0 to",
        ),
        (
            "[tenants.\"acme\"]\nclaims_per_secnod = 5\n",
            "tenants.\"acme\".claims_per_secnod: unknown key; a tenant's quotas are \
             claims_per_second, burst, writes_per_second, max_waiting",
        ),
        (
            "[tenants.\"acme\"]\nburst = 5\n",
            "tenants.\"acme\".burst: needs claims_per_second",
        ),
        (
            "[tenants.default]\nburst = 5\n",
            "tenants.default.burst: needs claims_per_second",
        ),
        (
            "[tenants.\"bad tenant\"]\nmax_waiting = 1\n",
            "tenants.\"bad tenant\": tenant may only contain",
        ),
        ("[tenants]\nacme = 5\n", "tenants.\"acme\": must be a table"),
        ("tenants = 5\n", "tenants: invalid type"),
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
fn check_config_prints_each_tenant_section_with_its_effective_quotas() {
    let p = load(
        "[tenants.default]\nclaims_per_second = 50\n[tenants.\"zeta\"]\nmax_waiting = 3\n\
         [tenants.\"acme\"]\nclaims_per_second = 0.5\nwrites_per_second = 20\n",
    );
    let shown = render(&p);
    let default = shown.split("[tenants.default]\n").nth(1).expect(&shown);
    assert!(
        default.starts_with(
            "claims_per_second = 50\nburst = 50\n# writes_per_second: no limit\n\
             # max_waiting: no limit\n"
        ),
        "{shown}"
    );
    let acme = shown.find("[tenants.\"acme\"]").expect(&shown);
    let zeta = shown.find("[tenants.\"zeta\"]").expect(&shown);
    assert!(acme < zeta, "tenants are sorted: {shown}");
    assert!(
        shown[acme..].starts_with(
            "[tenants.\"acme\"]\nclaims_per_second = 0.5\nburst = 1\nwrites_per_second = 20\n\
             # max_waiting: no limit\n"
        ),
        "{shown}"
    );
    let again = load(&shown).quotas;
    for tenant in ["acme", "zeta", "default", "anyone"] {
        let (was, is) = (p.quotas.for_tenant(tenant), again.for_tenant(tenant));
        assert_eq!(was.claims_bucket(), is.claims_bucket(), "{tenant}");
        assert_eq!(was.writes_bucket(), is.writes_bucket(), "{tenant}");
        assert_eq!(was.max_waiting, is.max_waiting, "{tenant}");
    }
}

#[test]
fn without_tenants_check_config_says_there_is_no_limit() {
    let shown = render(&load(""));
    assert!(
        shown.ends_with(
            "[tenants.default]\n# claims_per_second: no limit\n# burst: no limit\n\
             # writes_per_second: no limit\n# max_waiting: no limit\n\
             # max_receipts: no limit\n# max_stored_bytes: no limit\n"
        ),
        "{shown}"
    );
}

#[test]
fn storage_limits_are_inherited_key_by_key_and_printed_by_check_config() {
    let p = load(
        r#"
        [tenants.default]
        max_receipts = 100000
        max_stored_bytes = 1000000

        [tenants."acme"]
        max_receipts = 10
        "#,
    );
    let acme = p.quotas.for_tenant("acme").storage;
    assert_eq!(
        (acme.max_receipts, acme.max_stored_bytes),
        (Some(10), Some(1_000_000))
    );
    let other = p.quotas.for_tenant("other").storage;
    assert_eq!(
        (other.max_receipts, other.max_stored_bytes),
        (Some(100_000), Some(1_000_000))
    );
    let shown = render(&p);
    assert!(shown.contains("[tenants.\"acme\"]"), "{shown}");
    assert!(
        shown.contains("max_receipts = 10\nmax_stored_bytes = 1000000\n"),
        "{shown}"
    );
    assert_eq!(
        load(&shown).quotas,
        p.quotas,
        "check-config's output reads back the same"
    );
}
