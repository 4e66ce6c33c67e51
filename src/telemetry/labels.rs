//! Bounded label values. A namespace is chosen by callers, so it must not become an
//! unbounded set of Prometheus series: the namespaces named in the policy file (as it is
//! now, reloads included) keep their name, and so do the first `limit` other namespaces this
//! process sees; every later one is reported as [`OTHER`]. Tenant ids, keys, tokens and
//! payloads are never label values.

use crate::domain::PolicyHandle;
use std::collections::HashSet;
use std::sync::Mutex;

/// The label value of every namespace past the limit.
pub const OTHER: &str = "other";

/// How many namespaces not named in the policy file get their own label by default.
pub const DEFAULT_NAMESPACE_LIMIT: usize = 100;

/// Maps namespaces to a bounded set of label values (at most the policy file's namespaces,
/// `limit` more, and [`OTHER`]).
#[derive(Debug)]
pub struct NamespaceLabels {
    policies: PolicyHandle,
    limit: usize,
    seen: Mutex<HashSet<String>>,
}

impl NamespaceLabels {
    /// Labels for the namespaces `policies` names (always kept) plus the first `limit` others.
    pub fn new(policies: PolicyHandle, limit: usize) -> Self {
        NamespaceLabels {
            policies,
            limit,
            seen: Mutex::new(HashSet::new()),
        }
    }

    /// The label value for `namespace`: its own name while it is named or among the first
    /// `limit` seen, [`OTHER`] after that.
    pub fn label(&self, namespace: &str) -> String {
        if self.policies.current().namespaces.contains_key(namespace) {
            return namespace.to_owned();
        }
        // The set is only ever inserted into; a panic elsewhere cannot leave it half-changed.
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        if seen.contains(namespace) {
            return namespace.to_owned();
        }
        if seen.len() < self.limit {
            seen.insert(namespace.to_owned());
            return namespace.to_owned();
        }
        OTHER.to_owned()
    }
}

impl Default for NamespaceLabels {
    fn default() -> Self {
        NamespaceLabels::new(PolicyHandle::default(), DEFAULT_NAMESPACE_LIMIT)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{Policies, Policy};

    fn naming(namespace: &str) -> PolicyHandle {
        let mut policies = Policies::default();
        policies
            .namespaces
            .insert(namespace.into(), Policy::default());
        PolicyHandle::new(policies)
    }

    #[test]
    fn the_first_namespaces_keep_their_names_and_later_ones_are_other() {
        let labels = NamespaceLabels::new(naming("stripe"), 2);
        assert_eq!(labels.label("a"), "a");
        assert_eq!(labels.label("b"), "b");
        assert_eq!(labels.label("c"), OTHER);
        assert_eq!(labels.label("a"), "a", "a namespace keeps its label");
        assert_eq!(labels.label("stripe"), "stripe", "named ones do not count");
        assert_eq!(labels.label("d"), OTHER);
    }

    #[test]
    fn a_limit_of_zero_labels_only_named_namespaces() {
        let policies = naming("slack");
        let labels = NamespaceLabels::new(policies.clone(), 0);
        assert_eq!(labels.label("slack"), "slack");
        assert_eq!(labels.label("x"), OTHER);
        policies.replace(naming("x").current().as_ref().clone());
        assert_eq!(
            labels.label("x"),
            "x",
            "a reloaded policy file names it now"
        );
    }
}
