package dev.claimd;

/** What a Claim decided: the caller's next step for the event. */
public enum Decision {
  /** This caller holds the lease: do the work, then settle it through the {@link Lease}. */
  CLAIMED,
  /** Somebody else holds an unexpired lease; the receipt's lease_expires_at says until when. */
  IN_FLIGHT,
  /** The work is done; the receipt's response is the stored response to replay. */
  COMPLETED,
  /** A retry is scheduled; the receipt's next_attempt_at says when it may be claimed. */
  RETRY_SCHEDULED,
  /** The receipt is a dead letter; the receipt's last_error says why. */
  QUARANTINED,
  /** The key is known with another fingerprint: a different event under the same key. */
  CONFLICT;

  /** The decision of a wire {@link dev.claimd.v1.Decision}. */
  static Decision of(dev.claimd.v1.Decision wire) {
    switch (wire) {
      case DECISION_CLAIMED:
        return CLAIMED;
      case DECISION_IN_FLIGHT:
        return IN_FLIGHT;
      case DECISION_COMPLETED:
        return COMPLETED;
      case DECISION_RETRY_SCHEDULED:
        return RETRY_SCHEDULED;
      case DECISION_QUARANTINED:
        return QUARANTINED;
      case DECISION_CONFLICT:
        return CONFLICT;
      default:
        throw new IllegalStateException("claimd answered an unknown decision " + wire.getNumber());
    }
  }
}
