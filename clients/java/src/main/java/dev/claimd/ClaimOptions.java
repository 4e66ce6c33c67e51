package dev.claimd;

import java.time.Duration;
import java.util.Optional;

/**
 * The optional parts of a Claim: build them with {@link #builder()}. Unset values leave the
 * choice to claimd (the namespace's lease) or to the client (heartbeats every third of the
 * lease).
 */
public final class ClaimOptions {
  /** The longest wait claimd allows a Claim. */
  public static final Duration MAX_WAIT = Duration.ofSeconds(60);

  private static final ClaimOptions DEFAULTS = builder().build();

  private final Duration lease;
  private final Duration wait;
  private final byte[] recoveryPayload;
  private final int deliveryAttempt;
  private final Duration heartbeatInterval;

  private ClaimOptions(Builder b) {
    this.lease = b.lease;
    this.wait = b.wait;
    this.recoveryPayload = b.recoveryPayload;
    this.deliveryAttempt = b.deliveryAttempt;
    this.heartbeatInterval = b.heartbeatInterval;
  }

  /** No options: the namespace's lease, no wait. */
  public static ClaimOptions defaults() {
    return DEFAULTS;
  }

  /** A builder of options. */
  public static Builder builder() {
    return new Builder();
  }

  /** The lease asked for (and renewed by every heartbeat); empty: the namespace's default. */
  public Optional<Duration> lease() {
    return Optional.ofNullable(lease);
  }

  /** How long claimd may hold the call while the answer would be IN_FLIGHT. */
  public Duration waitTime() {
    return wait;
  }

  /** Bytes kept with the receipt for whoever takes the work over. */
  public byte[] recoveryPayload() {
    return recoveryPayload.clone();
  }

  /** The platform's own retry number, a hint for metrics and logs. */
  public int deliveryAttempt() {
    return deliveryAttempt;
  }

  /** How often the lease heartbeats; empty: a third of the lease. */
  public Optional<Duration> heartbeatInterval() {
    return Optional.ofNullable(heartbeatInterval);
  }

  byte[] recoveryPayloadUnsafe() {
    return recoveryPayload;
  }

  /** Builds {@link ClaimOptions}. */
  public static final class Builder {
    private Duration lease;
    private Duration wait = Duration.ZERO;
    private byte[] recoveryPayload = new byte[0];
    private int deliveryAttempt;
    private Duration heartbeatInterval;

    private Builder() {}

    /**
     * The lease to ask for if claimed (1 s to 24 h); every heartbeat renews it for as long.
     *
     * @param lease the lease length
     * @return this builder
     */
    public Builder lease(Duration lease) {
      this.lease = positive(lease, "lease");
      return this;
    }

    /**
     * How long claimd may hold the call when the answer would be IN_FLIGHT (0 to 60 s): it
     * answers what a Claim decides once the receipt settles, or IN_FLIGHT when the wait is
     * over. The call's deadline is the client's call timeout plus the wait.
     *
     * @param wait the wait, 0 to 60 s
     * @return this builder
     */
    public Builder wait(Duration wait) {
      if (wait == null || wait.isNegative() || wait.compareTo(MAX_WAIT) > 0) {
        throw new IllegalArgumentException("wait must be 0 to 60 s");
      }
      this.wait = wait;
      return this;
    }

    /**
     * Bytes (at most 64 KiB) kept with the receipt and given to whoever takes the work over.
     *
     * @param payload the recovery payload
     * @return this builder
     */
    public Builder recoveryPayload(byte[] payload) {
      this.recoveryPayload = payload == null ? new byte[0] : payload.clone();
      return this;
    }

    /**
     * The platform's own retry number (a hint only; it never changes the decision).
     *
     * @param attempt the delivery attempt, 0 or more
     * @return this builder
     */
    public Builder deliveryAttempt(int attempt) {
      if (attempt < 0) {
        throw new IllegalArgumentException("deliveryAttempt must be >= 0");
      }
      this.deliveryAttempt = attempt;
      return this;
    }

    /**
     * How often a won lease heartbeats (default: a third of the lease).
     *
     * @param interval the heartbeat interval
     * @return this builder
     */
    public Builder heartbeatInterval(Duration interval) {
      this.heartbeatInterval = positive(interval, "heartbeatInterval");
      return this;
    }

    /**
     * The options.
     *
     * @return the built options
     */
    public ClaimOptions build() {
      return new ClaimOptions(this);
    }

    private static Duration positive(Duration d, String what) {
      if (d == null || d.isNegative() || d.isZero()) {
        throw new IllegalArgumentException(what + " must be positive");
      }
      return d;
    }
  }
}
