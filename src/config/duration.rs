//! Durations: one parser for every duration flag (`--janitor-interval`, `--db-timeout`, …)
//! and every duration in the policy file. A whole number and a unit — `500ms`, `90s`, `5m`,
//! `12h` or `30d` — with spaces around the value ignored. Flags also take a bare number of
//! seconds (`0`, `5`), as they always have; the policy file wants the unit (`lease = "2"`
//! is refused). Shown back in the largest unit that divides them.

use chrono::TimeDelta;
use std::time::Duration;

/// The units, largest first, in milliseconds.
const UNITS: [(&str, u64); 5] = [
    ("d", 86_400_000),
    ("h", 3_600_000),
    ("m", 60_000),
    ("s", 1_000),
    ("ms", 1),
];

/// Whether a number without a unit is taken as seconds or refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Bare {
    Seconds,
    Refused,
}

/// A flag's duration: `500ms`, `90s`, `5m`, `12h`, `30d` or a bare number of seconds; the
/// error says what is expected without repeating the value (clap names the flag).
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    parse(text, Bare::Seconds)
}

/// A policy file's duration: `500ms`, `90s`, `5m`, `12h` or `30d` (the unit required).
pub(crate) fn parse_delta(text: &str) -> Result<TimeDelta, String> {
    let d = parse(text, Bare::Refused)?;
    TimeDelta::from_std(d).map_err(|_| "is too long".to_owned())
}

fn parse(text: &str, bare: Bare) -> Result<Duration, String> {
    let expected = || "must be a duration like \"90s\", \"5m\", \"12h\" or \"30d\"".to_owned();
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (digits, unit) = text.split_at(split);
    let n: u64 = digits.parse().map_err(|_| expected())?;
    let millis = match (unit, bare) {
        ("", Bare::Seconds) => 1_000,
        ("", Bare::Refused) => return Err(expected()),
        (unit, _) => {
            let (_, millis) = UNITS
                .iter()
                .find(|(name, _)| *name == unit)
                .ok_or_else(expected)?;
            *millis
        }
    };
    n.checked_mul(millis)
        .map(Duration::from_millis)
        .ok_or_else(|| "is too long".to_owned())
}

/// `d` in the largest unit that divides it exactly, e.g. `90s`, `5m`, `30d`.
pub(crate) fn show(d: TimeDelta) -> String {
    let millis = d.num_milliseconds().unsigned_abs();
    if millis == 0 {
        return "0s".into();
    }
    let (name, size) = UNITS
        .iter()
        .find(|(_, size)| millis.is_multiple_of(*size))
        .unwrap_or(&("ms", 1));
    let sign = if d < TimeDelta::zero() { "-" } else { "" };
    format!("{sign}{}{name}", millis / size)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_and_policy_files_share_one_spelling_and_only_flags_take_bare_seconds() {
        let s = Duration::from_secs;
        for (text, want) in [
            ("500ms", Duration::from_millis(500)),
            ("90s", s(90)),
            ("5m", s(300)),
            ("12h", s(12 * 3600)),
            ("30d", s(30 * 86_400)),
            ("5", s(5)),
            ("0", s(0)),
            ("1h", s(3600)),
            (" 60s ", s(60)),
        ] {
            assert_eq!(parse_duration(text), Ok(want), "{text:?}");
        }
        for bad in ["", "s", "5 minutes", "1.5h", "-3s", "3w", "1h30m", "5S"] {
            let error = parse_duration(bad).unwrap_err();
            assert!(
                error.contains("must be a duration like"),
                "{bad:?}: {error}"
            );
        }
        assert_eq!(
            parse_duration(&format!("{}d", u64::MAX / 1000)),
            Err("is too long".to_owned())
        );
    }

    #[test]
    fn durations_show_in_the_largest_exact_unit() {
        assert_eq!(show(TimeDelta::seconds(90)), "90s");
        assert_eq!(show(TimeDelta::hours(48)), "2d");
        assert_eq!(show(TimeDelta::minutes(90)), "90m");
        assert_eq!(show(TimeDelta::zero()), "0s");
        assert_eq!(show(TimeDelta::milliseconds(1500)), "1500ms");
    }
}
