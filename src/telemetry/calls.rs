//! What the API records about a call besides its latency: the namespace and decision on
//! the call's span, Claim decisions and redelivery hints as metrics, the (rate-limited)
//! warning that acknowledgements arrive too late, and store failures.

use super::exporter::{CLAIM_DECISIONS, REDELIVERY_HINTS, STORE_ERRORS};
use super::labels::NamespaceLabels;
use crate::domain::Decision;
use crate::store::StoreError;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// At most one late-acknowledgement warning per namespace label in this long.
pub const WARN_EVERY: Duration = Duration::from_secs(60);

/// The decision's wire name without the `DECISION_` prefix: the metric label and log field.
pub fn decision_name(decision: Decision) -> &'static str {
    match decision {
        Decision::Claimed => "CLAIMED",
        Decision::InFlight => "IN_FLIGHT",
        Decision::Completed => "COMPLETED",
        Decision::RetryScheduled => "RETRY_SCHEDULED",
        Decision::Quarantined => "QUARANTINED",
        Decision::Conflict => "CONFLICT",
    }
}

/// Records the call's namespace on its span (the `rpc` span of [`super::RpcLayer`]).
pub fn note_namespace(namespace: &str) {
    tracing::Span::current().record("namespace", namespace);
    super::traces::attribute("claimd.namespace", namespace);
}

/// Counts a store failure answered with an error status, labelled by
/// [`StoreError::kind`] (one of [`super::STORE_ERROR_KINDS`]); never the error's text.
pub fn store_error(error: &StoreError) {
    metrics::counter!(STORE_ERRORS, "kind" => error.kind()).increment(1);
}

/// Claim decisions and redelivery hints, labelled by bounded namespace.
#[derive(Debug, Default)]
pub struct ClaimTelemetry {
    labels: NamespaceLabels,
    /// Per namespace label: when the last warning went out, and how many were held back.
    warned: Mutex<HashMap<String, (Instant, u64)>>,
}

impl ClaimTelemetry {
    /// Telemetry whose namespace labels are bounded by `labels`.
    pub fn new(labels: NamespaceLabels) -> Self {
        ClaimTelemetry {
            labels,
            warned: Mutex::new(HashMap::new()),
        }
    }

    /// Records a Claim's decision (span, metrics) and, when the platform redelivered an
    /// event that is in flight or done, warns that acknowledgements arrive too late.
    pub fn claim_decided(&self, namespace: &str, decision: Decision, delivery_attempt: u32) {
        let name = decision_name(decision);
        tracing::Span::current().record("decision", name);
        super::traces::attribute("claimd.decision", name);
        let label = self.labels.label(namespace);
        metrics::counter!(CLAIM_DECISIONS, "namespace" => label.clone(), "decision" => name)
            .increment(1);
        if delivery_attempt == 0 {
            return;
        }
        metrics::counter!(REDELIVERY_HINTS, "namespace" => label.clone()).increment(1);
        if !matches!(decision, Decision::InFlight | Decision::Completed) {
            return;
        }
        if let Some(held_back) = self.may_warn(label, Instant::now()) {
            tracing::warn!(
                namespace,
                delivery_attempt,
                decision = name,
                held_back,
                "the platform redelivered an event that is already in flight or done: \
                 acknowledgements are arriving too late (acknowledge first, then work)"
            );
        }
    }

    /// Whether a warning for `label` may go out at `now`, with how many were held back
    /// since the last one; `None` within [`WARN_EVERY`] of the last.
    fn may_warn(&self, label: String, now: Instant) -> Option<u64> {
        // Entries are replaced whole; a panic elsewhere cannot leave one half-written.
        let mut warned = self.warned.lock().unwrap_or_else(|p| p.into_inner());
        match warned.get_mut(&label) {
            Some((at, held_back)) if now.duration_since(*at) < WARN_EVERY => {
                *held_back += 1;
                None
            }
            Some((at, held_back)) => {
                let count = *held_back;
                (*at, *held_back) = (now, 0);
                Some(count)
            }
            None => {
                warned.insert(label, (now, 0));
                Some(0)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warnings_go_out_at_most_once_a_minute_per_namespace() {
        let telemetry = ClaimTelemetry::default();
        let t0 = Instant::now();
        assert_eq!(telemetry.may_warn("a".into(), t0), Some(0));
        assert_eq!(
            telemetry.may_warn("a".into(), t0 + Duration::from_secs(1)),
            None
        );
        assert_eq!(telemetry.may_warn("b".into(), t0), Some(0), "per namespace");
        assert_eq!(
            telemetry.may_warn("a".into(), t0 + Duration::from_secs(59)),
            None
        );
        assert_eq!(telemetry.may_warn("a".into(), t0 + WARN_EVERY), Some(2));
        assert_eq!(telemetry.may_warn("a".into(), t0 + WARN_EVERY), None);
    }
}
