//! Durations in policy files: a whole number and a unit, `500ms`, `90s`, `5m`, `12h` or
//! `30d`; shown back in the largest unit that divides them.

use chrono::TimeDelta;

const UNITS: [(&str, i64); 5] = [
    ("d", 86_400_000),
    ("h", 3_600_000),
    ("m", 60_000),
    ("s", 1_000),
    ("ms", 1),
];

/// Parses `90s`, `5m`, `12h`, `30d` or `500ms`; the error says what is expected without
/// repeating the value.
pub(super) fn parse(text: &str) -> Result<TimeDelta, String> {
    let expected = || "must be a duration like \"90s\", \"5m\", \"12h\" or \"30d\"".to_owned();
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .ok_or_else(expected)?;
    let (digits, unit) = text.split_at(split);
    let n: i64 = digits.parse().map_err(|_| expected())?;
    let (_, millis) = UNITS
        .iter()
        .find(|(name, _)| *name == unit)
        .ok_or_else(expected)?;
    n.checked_mul(*millis)
        .and_then(TimeDelta::try_milliseconds)
        .ok_or_else(|| "is too long".to_owned())
}

/// `d` in the largest unit that divides it exactly, e.g. `90s`, `5m`, `30d`.
pub(super) fn show(d: TimeDelta) -> String {
    let millis = d.num_milliseconds();
    if millis == 0 {
        return "0s".into();
    }
    let (name, size) = UNITS
        .iter()
        .find(|(_, size)| millis % size == 0)
        .unwrap_or(&("ms", 1));
    format!("{}{name}", millis / size)
}
