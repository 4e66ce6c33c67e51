//! [`Budget`]: the request-body bytes every call together may hold at once, and the share
//! of one source ([`Source`](crate::source::Source): an IPv4 address, or the /64 an IPv6
//! address belongs to — one host or one customer's network gets one share, however many
//! addresses it uses).

use super::BodyRefused;
pub use crate::source::Source;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How often, at most, a refusal at the budget is logged.
const WARN_EVERY: Duration = Duration::from_secs(60);

#[derive(Debug, Default)]
struct Usage {
    total: usize,
    by_source: HashMap<Source, usize>,
    refused: u64,
    warned_at: Option<Instant>,
}

/// The bytes all calls, and each source, may hold at once; takes and gives back.
#[derive(Debug)]
pub struct Budget {
    total: usize,
    per_source: usize,
    usage: Mutex<Usage>,
}

impl Budget {
    /// A budget of `total` bytes, at most `per_source` of them for one source.
    pub fn new(total: usize, per_source: usize) -> Budget {
        Budget {
            total,
            per_source: per_source.min(total),
            usage: Mutex::default(),
        }
    }

    /// Takes `n` more bytes for a body from `source` (unknown: only the total applies), or
    /// says which limit is full; nothing is taken then.
    pub fn take(&self, source: Option<Source>, n: usize) -> Result<(), BodyRefused> {
        let mut usage = self.usage.lock().unwrap_or_else(|p| p.into_inner());
        let refused = if usage.total.saturating_add(n) > self.total {
            Some(BodyRefused::BudgetFull { bytes: self.total })
        } else {
            let held = source.and_then(|s| usage.by_source.get(&s).copied());
            (held.unwrap_or(0).saturating_add(n) > self.per_source).then_some(
                BodyRefused::SourceFull {
                    bytes: self.per_source,
                },
            )
        };
        if let Some(refused) = refused {
            note_refused(&mut usage, &refused, self);
            return Err(refused);
        }
        usage.total += n;
        if let Some(source) = source {
            *usage.by_source.entry(source).or_default() += n;
        }
        Ok(())
    }

    /// Gives back `n` bytes taken for a body from `source`.
    pub fn give_back(&self, source: Option<Source>, n: usize) {
        if n == 0 {
            return;
        }
        let mut usage = self.usage.lock().unwrap_or_else(|p| p.into_inner());
        usage.total = usage.total.saturating_sub(n);
        if let Some(source) = source
            && let Some(held) = usage.by_source.get_mut(&source)
        {
            *held = held.saturating_sub(n);
            if *held == 0 {
                usage.by_source.remove(&source);
            }
        }
    }

    /// The bytes held now, in all and by the sources holding any (for tests).
    pub fn held(&self) -> (usize, usize) {
        let usage = self.usage.lock().unwrap_or_else(|p| p.into_inner());
        (usage.total, usage.by_source.len())
    }
}

/// Logs refusals at a warning at most once a minute, with how many there were.
fn note_refused(usage: &mut Usage, refused: &BodyRefused, budget: &Budget) {
    usage.refused += 1;
    let now = Instant::now();
    if usage
        .warned_at
        .is_none_or(|at| now.duration_since(at) >= WARN_EVERY)
    {
        tracing::warn!(
            refused = usage.refused,
            held.total = usage.total,
            held.sources = usage.by_source.len(),
            max.total = budget.total,
            max.per_source = budget.per_source,
            "request bodies refused: {refused}"
        );
        usage.warned_at = Some(now);
        usage.refused = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> Option<Source> {
        Some(Source::from(
            text.parse::<std::net::IpAddr>().expect("an address"),
        ))
    }

    #[test]
    fn a_source_gets_its_share_and_all_sources_the_total() {
        let budget = Budget::new(100, 40);
        assert_eq!(budget.take(ip("10.0.0.1"), 40), Ok(()));
        assert_eq!(
            budget.take(ip("10.0.0.1"), 1),
            Err(BodyRefused::SourceFull { bytes: 40 })
        );
        assert_eq!(budget.take(ip("10.0.0.2"), 40), Ok(()));
        assert_eq!(
            budget.take(ip("10.0.0.3"), 21),
            Err(BodyRefused::BudgetFull { bytes: 100 })
        );
        assert_eq!(budget.take(None, 20), Ok(()));
        budget.give_back(ip("10.0.0.1"), 40);
        budget.give_back(None, 20);
        assert_eq!(budget.held(), (40, 1));
        assert_eq!(budget.take(ip("10.0.0.1"), 40), Ok(()));
    }

    #[test]
    fn ipv6_addresses_of_one_64_share_one_source() {
        let budget = Budget::new(100, 40);
        assert_eq!(budget.take(ip("2001:db8:1:2::1"), 30), Ok(()));
        assert!(budget.take(ip("2001:db8:1:2:ffff::9"), 11).is_err());
        assert_eq!(budget.take(ip("2001:db8:1:3::1"), 30), Ok(()));
        assert_eq!(
            Source::from("::ffff:10.0.0.1".parse::<std::net::IpAddr>().unwrap()),
            ip("10.0.0.1").unwrap()
        );
    }
}
