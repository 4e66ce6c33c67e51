package claimd

import (
	"crypto/sha256"

	"claimd.dev/go/claimd/claimdv1"
)

// Decision is claimd's answer to a Claim.
type Decision int32

// The decisions a Claim answers (claimd.v1.Decision).
const (
	// DecisionClaimed: the caller holds the lease; Outcome.Lease is set.
	DecisionClaimed = Decision(claimdv1.Decision_DECISION_CLAIMED)
	// DecisionInFlight: somebody else holds an unexpired lease.
	DecisionInFlight = Decision(claimdv1.Decision_DECISION_IN_FLIGHT)
	// DecisionCompleted: the work is done; the receipt's response is the one to replay.
	DecisionCompleted = Decision(claimdv1.Decision_DECISION_COMPLETED)
	// DecisionRetryScheduled: a retry is due at the receipt's next_attempt_at.
	DecisionRetryScheduled = Decision(claimdv1.Decision_DECISION_RETRY_SCHEDULED)
	// DecisionQuarantined: the receipt is a dead letter; last_error says why.
	DecisionQuarantined = Decision(claimdv1.Decision_DECISION_QUARANTINED)
	// DecisionConflict: the key is known with another fingerprint.
	DecisionConflict = Decision(claimdv1.Decision_DECISION_CONFLICT)
)

// String returns the proto name of the decision, e.g. "DECISION_CLAIMED".
func (d Decision) String() string { return claimdv1.Decision(d).String() }

// Outcome is the answer to a Claim.
type Outcome struct {
	// Decision says what the caller should do.
	Decision Decision
	// Receipt is the receipt after the decision.
	Receipt *claimdv1.Receipt
	// Lease is the caller's lease; set only when Decision is DecisionClaimed.
	Lease *Lease
}

// Fingerprint returns the SHA-256 of body, a fingerprint for Claim.
func Fingerprint(body []byte) []byte {
	sum := sha256.Sum256(body)
	return sum[:]
}
