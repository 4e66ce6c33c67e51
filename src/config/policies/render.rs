//! The effective policies and tenant quotas printed as a policy file (`claimd check-config`).

use crate::config::duration::show;
use crate::domain::{Policies, Policy};
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// The effective policies as a policy file: every key of `[default]` and of each
/// namespace, inherited values included, then the `[tenants]` quotas the same way (what
/// `claimd check-config` prints).
pub fn render(policies: &Policies) -> String {
    let mut out = String::new();
    let mut section = |header: &str, p: &Policy| {
        let _ = writeln!(out, "[{header}]");
        let _ = writeln!(out, "lease = \"{}\"", show(p.lease_ttl));
        let _ = writeln!(out, "max_attempts = {}", p.max_attempts);
        let _ = writeln!(out, "backoff_base = \"{}\"", show(p.backoff_base));
        let _ = writeln!(out, "backoff_max = \"{}\"", show(p.backoff_max));
        let _ = writeln!(out, "retention = \"{}\"", show(p.retention));
        let rr = show(p.response_retention);
        let _ = writeln!(out, "response_retention = \"{rr}\"\n");
    };
    section("default", &policies.default);
    let sorted: BTreeMap<_, _> = policies.namespaces.iter().collect();
    for (name, policy) in sorted {
        section(&format!("namespaces.{name:?}"), policy);
    }
    crate::config::quotas::render(&policies.quotas, &mut out);
    out.trim_end().to_owned() + "\n"
}
