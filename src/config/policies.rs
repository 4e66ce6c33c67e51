//! Namespace policies from an optional TOML file (`--config`, `CLAIMD_CONFIG`): a
//! `[default]` section and `[namespaces."<name>"]` overrides, every key optional; and the
//! per-tenant quotas of its `[tenants]` table (`config::quotas`). A key
//! missing from a namespace falls back to `[default]`, then to the built-in default
//! ([`Policy::default`]); `response_retention` falls back to `[default]`'s (capped at the
//! namespace's retention), then to the retention itself. Every error names the key.
//! `claimd check-config` prints the effective policies; SIGHUP reloads the file.

mod reload;
mod render;
#[cfg(test)]
mod tests;

pub use self::reload::reload_on_sighup;
pub use self::render::render;

use super::defaults;
use super::duration::{parse_delta, parse_duration, show};
use crate::domain::{Policies, Policy};
use chrono::TimeDelta;
use clap::Args;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The policy file and the janitor that enforces its retention (options of `serve`).
#[derive(Debug, Clone, Args)]
pub struct PolicyArgs {
    /// A TOML file of namespace policies (lease, attempts, backoff, retention); reloaded on
    /// SIGHUP. Check one with `claimd check-config --config FILE`.
    #[arg(long = "config", env = "CLAIMD_CONFIG")]
    pub config: Option<PathBuf>,
    /// How often the janitor prunes receipts past their retention; 0 turns it off.
    #[arg(long, env = "CLAIMD_JANITOR_INTERVAL", default_value = defaults::JANITOR_INTERVAL,
          value_parser = parse_duration)]
    pub janitor_interval: Duration,
    /// Receipts the janitor deletes or strips per statement (each its own transaction).
    #[arg(long, env = "CLAIMD_JANITOR_BATCH", default_value_t = defaults::JANITOR_BATCH,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub janitor_batch: u32,
}

impl PolicyArgs {
    /// The policies of `--config`, or the built-in defaults without one.
    pub fn policies(&self) -> Result<Policies, PolicyFileError> {
        self.config.as_deref().map_or(Ok(Policies::default()), load)
    }

    /// The janitor's interval and batch.
    pub fn janitor(&self) -> crate::janitor::JanitorOptions {
        crate::janitor::JanitorOptions {
            interval: self.janitor_interval,
            batch: self.janitor_batch,
        }
    }
}

/// Options of `claimd check-config`.
#[derive(Debug, Clone, Args)]
pub struct CheckConfigArgs {
    /// The policy file to check.
    #[arg(long = "config", env = "CLAIMD_CONFIG")]
    pub config: PathBuf,
}

/// Why a policy file was refused. Every message names the flag (`--config`), the file and
/// the key where one is at fault, and says what to do.
#[derive(Debug, thiserror::Error)]
pub enum PolicyFileError {
    /// The file cannot be read.
    #[error(
        "--config: cannot read the policy file {}: {error} — name an existing file, or leave \
         --config out for the built-in policies",
        path.display()
    )]
    Read {
        /// The file.
        path: PathBuf,
        /// What the operating system said.
        error: std::io::Error,
    },
    /// The file is not TOML of the expected shape (including unknown keys).
    #[error(
        "--config: policy file {}: {key}: {problem} — fix it there (`claimd check-config` \
         checks a file)",
        path.display()
    )]
    Syntax {
        /// The file.
        path: PathBuf,
        /// The dotted key at fault, e.g. `namespaces."x".lease` (the table if no key).
        key: String,
        /// The parser's description and the line.
        problem: String,
    },
    /// A value is out of range or inconsistent.
    #[error(
        "--config: policy file {}: {key}: {problem} — fix it there (`claimd check-config` \
         checks a file)",
        path.display()
    )]
    Invalid {
        /// The file.
        path: PathBuf,
        /// The dotted key at fault.
        key: String,
        /// What is wrong.
        problem: String,
    },
}

/// Shortest and longest lease and backoff step (as for requests).
const DELAYS: (TimeDelta, TimeDelta) = (crate::domain::MIN_DELAY, crate::domain::MAX_DELAY);
/// Shortest and longest retention.
const RETENTIONS: (TimeDelta, TimeDelta) = (TimeDelta::seconds(1), TimeDelta::days(3650));

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    default: Section,
    #[serde(default)]
    namespaces: BTreeMap<String, Section>,
    /// The `[mesh]` table, read by `config::mesh` (the policies do not use it).
    #[serde(default)]
    #[allow(dead_code)]
    mesh: Option<toml::Table>,
    /// The `[tenants]` quotas, read by `config::quotas`.
    #[serde(default)]
    tenants: Option<toml::Table>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Section {
    lease: Option<String>,
    max_attempts: Option<i64>,
    backoff_base: Option<String>,
    backoff_max: Option<String>,
    retention: Option<String>,
    response_retention: Option<String>,
}

/// Reads and validates the policy file at `path`.
pub fn load(path: &Path) -> Result<Policies, PolicyFileError> {
    let text = std::fs::read_to_string(path).map_err(|error| PolicyFileError::Read {
        path: path.to_owned(),
        error,
    })?;
    parse(path, &text)
}

/// Validates the policy file `text` (read from `path`, named in errors).
pub fn parse(path: &Path, text: &str) -> Result<Policies, PolicyFileError> {
    let file: File = toml::from_str(text).map_err(|e| {
        let line = e.span().map(|s| text[..s.start].matches('\n').count() + 1);
        let key = e.span().map(|s| key_at(text, s.start));
        let key = key
            .filter(|k| !k.is_empty())
            .unwrap_or_else(|| "(top level)".into());
        let mut problem = e.message().to_owned();
        if let Some(line) = line {
            let _ = write!(problem, " (line {line})");
        }
        PolicyFileError::Syntax {
            path: path.to_owned(),
            key,
            problem,
        }
    })?;
    let invalid = |key: String, problem: String| PolicyFileError::Invalid {
        path: path.to_owned(),
        key,
        problem,
    };
    let builtin = Policy::default();
    let default =
        resolve(&file.default, "default", &builtin, None).map_err(|(k, p)| invalid(k, p))?;
    let inherited = file
        .default
        .response_retention
        .as_ref()
        .map(|_| default.response_retention);
    let mut namespaces = std::collections::HashMap::new();
    for (name, section) in &file.namespaces {
        let prefix = format!("namespaces.{name:?}");
        if let Err(e) = crate::domain::check_name(name, crate::domain::MAX_NAMESPACE) {
            return Err(invalid(prefix, format!("namespace {e}")));
        }
        let policy =
            resolve(section, &prefix, &default, inherited).map_err(|(k, p)| invalid(k, p))?;
        namespaces.insert(name.clone(), policy);
    }
    let quotas = super::quotas::parse(file.tenants.as_ref()).map_err(|(k, p)| invalid(k, p))?;
    Ok(Policies {
        default,
        namespaces,
        quotas,
    })
}

/// `section` over `base`: each key given replaces the base's. `response_retention` comes
/// from the section, else from `inherited` capped at the retention, else is the retention.
fn resolve(
    section: &Section,
    prefix: &str,
    base: &Policy,
    inherited: Option<TimeDelta>,
) -> Result<Policy, (String, String)> {
    let key = |name: &str| format!("{prefix}.{name}");
    let delay = |name: &str, value: &Option<String>, or: TimeDelta, (min, max)| match value {
        None => Ok(or),
        Some(text) => {
            let d = parse_delta(text).map_err(|p| (key(name), p))?;
            if d < min || d > max {
                let range = format!("{} and {}", show(min), show(max));
                return Err((key(name), format!("must be between {range}")));
            }
            Ok(d)
        }
    };
    let lease_ttl = delay("lease", &section.lease, base.lease_ttl, DELAYS)?;
    let backoff_base = delay(
        "backoff_base",
        &section.backoff_base,
        base.backoff_base,
        DELAYS,
    )?;
    let backoff_max = delay(
        "backoff_max",
        &section.backoff_max,
        base.backoff_max,
        DELAYS,
    )?;
    if backoff_max < backoff_base {
        return Err(match section.backoff_max {
            Some(_) => (
                key("backoff_max"),
                format!(
                    "must not be less than backoff_base ({})",
                    show(backoff_base)
                ),
            ),
            None => (
                key("backoff_base"),
                format!("must not exceed backoff_max ({})", show(backoff_max)),
            ),
        });
    }
    let retention = delay("retention", &section.retention, base.retention, RETENTIONS)?;
    let response_retention = match &section.response_retention {
        Some(_) => {
            let range = (TimeDelta::zero(), RETENTIONS.1);
            let d = delay(
                "response_retention",
                &section.response_retention,
                retention,
                range,
            )?;
            if d > retention {
                let problem = format!("must not exceed retention ({})", show(retention));
                return Err((key("response_retention"), problem));
            }
            d
        }
        None => inherited.map_or(retention, |r| r.min(retention)),
    };
    let max_attempts = match section.max_attempts {
        None => base.max_attempts,
        Some(n) => match u32::try_from(n) {
            Ok(n) if (1..=i32::MAX as u32).contains(&n) => n,
            _ => {
                return Err((
                    key("max_attempts"),
                    "must be between 1 and 2147483647".into(),
                ));
            }
        },
    };
    Ok(Policy {
        lease_ttl,
        max_attempts,
        backoff_base,
        backoff_max,
        retention,
        response_retention,
        storage: Default::default(),
    })
}

/// The dotted key a parse error at byte `at` of `text` is about: the table header before
/// it, then the key on its line (or the header itself, for an error on a header line).
pub(super) fn key_at(text: &str, at: usize) -> String {
    let at = at.min(text.len());
    let line_start = text[..at].rfind('\n').map_or(0, |i| i + 1);
    let line_end = text[at..].find('\n').map_or(text.len(), |i| at + i);
    let line = text[line_start..line_end].trim();
    let header = |l: &str| {
        l.trim_start_matches('[')
            .trim_end_matches(']')
            .trim()
            .to_owned()
    };
    if line.starts_with('[') {
        return header(line);
    }
    let table = text[..line_start]
        .lines()
        .rev()
        .map(str::trim)
        .find(|l| l.starts_with('['))
        .map(header);
    let name = line.split('=').next().unwrap_or_default().trim().to_owned();
    match table {
        Some(table) if !name.is_empty() => format!("{table}.{name}"),
        Some(table) => table,
        None => name,
    }
}
