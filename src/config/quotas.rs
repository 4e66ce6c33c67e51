//! The `[tenants]` table of the policy file (issue 43): `[tenants.default]` and
//! `[tenants."<name>"]` overrides with the keys `claims_per_second`, `burst`,
//! `writes_per_second`, `max_waiting`, `max_receipts` and `max_stored_bytes`, every one
//! optional. A key missing from a tenant
//! comes from `[tenants.default]`, else is no limit (but `burst` goes with the Claims rate:
//! a section with a rate of its own has its own burst, else one second's worth); so a file without `[tenants]` limits
//! nobody (as before quotas existed). Read with the policies (`policies::parse`), so SIGHUP
//! replaces them together; `claimd check-config` prints them ([`render`]). Every error
//! names the dotted key (`tenants."acme".claims_per_second`).

use crate::domain::{MAX_TENANT, Quota, Quotas, Rate, Storage, check_name};
use std::collections::HashMap;
use std::fmt::Write as _;
use toml::Value;

/// The keys a tenant section takes.
const KEYS: [&str; 6] = [
    "claims_per_second",
    "burst",
    "writes_per_second",
    "max_waiting",
    "max_receipts",
    "max_stored_bytes",
];

/// The largest `burst` and `max_waiting`.
const MAX_COUNT: i64 = 1_000_000_000;

/// The largest `max_receipts` and `max_stored_bytes`.
const MAX_STORED: i64 = 1_000_000_000_000_000_000;

/// A key at fault (dotted) and what is wrong with it.
type Fault = (String, String);

/// The quotas of the `[tenants]` table `table` (`None`: no table, no limit).
pub(super) fn parse(table: Option<&toml::Table>) -> Result<Quotas, Fault> {
    let Some(table) = table else {
        return Ok(Quotas::default());
    };
    let default = match table.get("default") {
        Some(section) => section_of(section, "tenants.default")?,
        None => Quota::default(),
    };
    check(&default, &default, "tenants.default")?;
    let mut tenants = HashMap::new();
    for (name, section) in table {
        if name == "default" {
            continue;
        }
        let prefix = format!("tenants.{name:?}");
        check_name(name, MAX_TENANT).map_err(|e| (prefix.clone(), format!("tenant {e}")))?;
        let own = section_of(section, &prefix)?;
        // A burst goes with its rate: a section that sets its own Claims rate has its own
        // burst (or one second's worth), not the default's sized for another rate.
        let (claims_per_second, burst) = match own.claims_per_second {
            Some(rate) => (Some(rate), own.burst),
            None => (default.claims_per_second, own.burst.or(default.burst)),
        };
        let quota = Quota {
            claims_per_second,
            burst,
            writes_per_second: own.writes_per_second.or(default.writes_per_second),
            max_waiting: own.max_waiting.or(default.max_waiting),
            storage: Storage {
                max_receipts: own.storage.max_receipts.or(default.storage.max_receipts),
                max_stored_bytes: (own.storage.max_stored_bytes)
                    .or(default.storage.max_stored_bytes),
            },
        };
        check(&own, &quota, &prefix)?;
        tenants.insert(name.clone(), quota);
    }
    Ok(Quotas { default, tenants })
}

/// The keys `section` (at `prefix`) gives, each checked on its own.
fn section_of(section: &Value, prefix: &str) -> Result<Quota, Fault> {
    let Some(section) = section.as_table() else {
        let problem = format!(
            "must be a table ([{prefix}]) of quotas: {}",
            KEYS.join(", ")
        );
        return Err((prefix.to_owned(), problem));
    };
    let mut quota = Quota::default();
    for (key, value) in section {
        let at = || format!("{prefix}.{key}");
        match key.as_str() {
            "claims_per_second" => {
                quota.claims_per_second = Some(rate(value).ok_or_else(|| (at(), RATE.into()))?)
            }
            "writes_per_second" => {
                quota.writes_per_second = Some(rate(value).ok_or_else(|| (at(), RATE.into()))?)
            }
            "burst" => quota.burst = Some(count(value, 1).ok_or_else(|| (at(), whole(1)))?),
            "max_waiting" => {
                quota.max_waiting = Some(count(value, 0).ok_or_else(|| (at(), whole(0)))?)
            }
            "max_receipts" => quota.storage.max_receipts = Some(stored(value, at)?),
            "max_stored_bytes" => quota.storage.max_stored_bytes = Some(stored(value, at)?),
            _ => {
                let problem = format!("unknown key; a tenant's quotas are {}", KEYS.join(", "));
                return Err((at(), problem));
            }
        }
    }
    Ok(quota)
}

/// What a rate must be.
const RATE: &str = "must be a positive number (calls a second, at most 1000000000)";

fn whole(min: i64) -> String {
    format!("must be a whole number from {min} to {MAX_COUNT}")
}

fn rate(value: &Value) -> Option<Rate> {
    match value {
        // At most 1e9 passes `Rate::new`, which f64 holds exactly.
        Value::Integer(n) => Rate::new(*n as f64),
        Value::Float(x) => Rate::new(*x),
        _ => None,
    }
}

/// A storage limit: a whole number from 0 (nothing more may be stored) to [`MAX_STORED`].
fn stored(value: &Value, at: impl Fn() -> String) -> Result<u64, Fault> {
    let n = value.as_integer().filter(|n| (0..=MAX_STORED).contains(n));
    let problem = || format!("must be a whole number from 0 to {MAX_STORED}");
    n.and_then(|n| u64::try_from(n).ok())
        .ok_or_else(|| (at(), problem()))
}

fn count(value: &Value, min: i64) -> Option<u32> {
    let n = value
        .as_integer()
        .filter(|n| (min..=MAX_COUNT).contains(n))?;
    u32::try_from(n).ok()
}

/// A section's keys together: a `burst` needs a Claims rate, its own or the default's.
fn check(own: &Quota, resolved: &Quota, prefix: &str) -> Result<(), Fault> {
    if own.burst.is_some() && resolved.claims_per_second.is_none() {
        let problem = "needs claims_per_second (here or in [tenants.default]): burst is the \
                       size of the Claims bucket"
            .to_owned();
        return Err((format!("{prefix}.burst"), problem));
    }
    Ok(())
}

/// The effective quotas as the policy file's `[tenants]` sections: every key of
/// `[tenants.default]` and of each tenant, inherited values and the default burst
/// included, a key without a limit as a comment.
pub(super) fn render(quotas: &Quotas, out: &mut String) {
    let mut section = |header: &str, q: &Quota| {
        let _ = writeln!(out, "[{header}]");
        let claims = q.claims_bucket();
        let lines = [
            ("claims_per_second", claims.map(|(r, _)| show_rate(r))),
            ("burst", claims.map(|(_, b)| b.to_string())),
            ("writes_per_second", q.writes_per_second.map(show_rate)),
            ("max_waiting", q.max_waiting.map(|n| n.to_string())),
            (
                "max_receipts",
                q.storage.max_receipts.map(|n| n.to_string()),
            ),
            (
                "max_stored_bytes",
                q.storage.max_stored_bytes.map(|n| n.to_string()),
            ),
        ];
        for (key, value) in lines {
            let _ = match value {
                Some(value) => writeln!(out, "{key} = {value}"),
                None => writeln!(out, "# {key}: no limit"),
            };
        }
        out.push('\n');
    };
    section("tenants.default", &quotas.default);
    let mut named: Vec<_> = quotas.tenants.iter().collect();
    named.sort_by(|a, b| a.0.cmp(b.0));
    for (name, quota) in named {
        section(&format!("tenants.{name:?}"), quota);
    }
}

/// A rate as TOML: a whole number without a fraction (`50`), else the shortest float that
/// reads back the same.
fn show_rate(rate: Rate) -> String {
    format!("{}", rate.per_second())
}

#[cfg(test)]
mod tests;
