//! What a check found: counts of the history's calls, every violation (one line each,
//! starting with its rule's name) and, for the first few keys with one, their calls.

use std::collections::BTreeMap;

/// The checker's findings.
#[derive(Debug, Default)]
pub struct Verdict {
    /// Calls in the history, acknowledged or not.
    pub ops: usize,
    /// Calls answered.
    pub acknowledged: usize,
    /// Calls that may or may not have happened.
    pub unknown: usize,
    /// Of those, the ones claimd answered UNAVAILABLE (rather than the caller giving up).
    pub unavailable: usize,
    /// CLAIMED answers.
    pub claimed: usize,
    /// The calls that may or may not have happened, by status code.
    pub cut_short: BTreeMap<String, usize>,
    /// Every broken invariant, one line each, naming the rule and the key.
    pub violations: Vec<String>,
    /// The calls of the first few keys with a violation, one line each.
    pub evidence: BTreeMap<String, Vec<String>>,
}

/// Keys whose calls a verdict keeps as evidence.
pub(super) const EVIDENCE_KEYS: usize = 4;

impl Verdict {
    /// How many violations each rule found (a violation starts with its rule's name).
    pub fn rules(&self) -> BTreeMap<&str, usize> {
        let mut rules = BTreeMap::new();
        for v in &self.violations {
            *rules.entry(v.split(':').next().unwrap_or(v)).or_default() += 1;
        }
        rules
    }

    /// Panics with the first violations (and the counts) unless there are none.
    pub fn assert_valid(&self) {
        assert!(
            self.violations.is_empty(),
            "{} violation(s) in a history of {} calls ({} answered, {} unknown):\n{}\n{}",
            self.violations.len(),
            self.ops,
            self.acknowledged,
            self.unknown,
            self.violations
                .iter()
                .take(20)
                .cloned()
                .collect::<Vec<_>>()
                .join("\n"),
            self.evidence
                .iter()
                .map(|(key, lines)| format!("calls of {key}:\n  {}", lines.join("\n  ")))
                .collect::<Vec<_>>()
                .join("\n")
        );
    }
}
