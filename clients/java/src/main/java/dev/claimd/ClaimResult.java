package dev.claimd;

import dev.claimd.v1.Receipt;
import java.util.Optional;

/** The answer to a Claim: the decision, the receipt after it and, when claimed, the lease. */
public final class ClaimResult {
  private final Decision decision;
  private final Receipt receipt;
  private final Lease lease;

  ClaimResult(Decision decision, Receipt receipt, Lease lease) {
    this.decision = decision;
    this.receipt = receipt;
    this.lease = lease;
  }

  /** What the caller should do. */
  public Decision decision() {
    return decision;
  }

  /** The receipt after the decision. */
  public Receipt receipt() {
    return receipt;
  }

  /** The lease this caller won: present only when the decision is CLAIMED. */
  public Optional<Lease> lease() {
    return Optional.ofNullable(lease);
  }

  /** The stored response for COMPLETED (empty for the other decisions). */
  public byte[] response() {
    return decision == Decision.COMPLETED ? receipt.getResponse().toByteArray() : new byte[0];
  }

  @Override
  public String toString() {
    return "ClaimResult{" + decision + ", attempt " + receipt.getAttempt() + "}";
  }
}
