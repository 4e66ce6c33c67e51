package dev.claimd;

import com.google.protobuf.ByteString;
import dev.claimd.v1.ClaimServiceGrpc;
import dev.claimd.v1.CompleteRequest;
import dev.claimd.v1.HeartbeatRequest;
import dev.claimd.v1.QuarantineRequest;
import dev.claimd.v1.Receipt;
import dev.claimd.v1.RetryRequest;
import io.grpc.Status;
import java.time.Duration;
import java.util.Set;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * A won claim, kept alive by a Heartbeat every heartbeat interval until it is settled, lost or
 * closed. Settle it exactly once: {@link #complete(byte[])}, {@link #retry(String)} or {@link
 * #quarantine(String)}; a second settle throws {@link IllegalStateException} without calling
 * claimd. {@link #close()} stops the heartbeats and, when the lease was neither settled nor
 * lost, gives the claim back with Retry, so try-with-resources hands the event back when the
 * work throws. The claim token never leaves this object.
 */
public final class Lease implements AutoCloseable {
  /** Codes that mean the claim token is no longer current: somebody took the work over. */
  private static final Set<Status.Code> LOST_CODES =
      Set.of(Status.Code.ABORTED, Status.Code.FAILED_PRECONDITION, Status.Code.NOT_FOUND);
  /** The Retry error of a lease closed without being settled. */
  static final String CLOSED_UNSETTLED = "lease closed without being settled";

  private final Claims claims;
  private final String namespace;
  private final String key;
  private final String token;
  private final Receipt receipt;
  private final Duration leaseTtl;
  private final Duration interval;
  private final AtomicBoolean settled = new AtomicBoolean();
  private volatile boolean lost;
  private volatile ScheduledFuture<?> beats;

  Lease(Claims claims, String namespace, String key, String token, Receipt receipt,
      Duration leaseTtl, Duration interval) {
    this.claims = claims;
    this.namespace = namespace;
    this.key = key;
    this.token = token;
    this.receipt = receipt;
    this.leaseTtl = leaseTtl;
    this.interval = interval;
  }

  void start(ScheduledExecutorService scheduler) {
    long every = Math.max(1, interval.toMillis());
    beats = scheduler.scheduleWithFixedDelay(this::beat, every, every, TimeUnit.MILLISECONDS);
  }

  /** The receipt the Claim answered (after a takeover: its checkpoint and recovery payload). */
  public Receipt receipt() {
    return receipt;
  }

  /** The fencing number of this attempt: 1 at the first claim, +1 at every later one. */
  public int attempt() {
    return receipt.getAttempt();
  }

  /** The namespace of the claim. */
  public String namespace() {
    return namespace;
  }

  /**
   * Whether the claim is no longer this caller's: a Heartbeat, checkpoint or settle was
   * answered ABORTED, FAILED_PRECONDITION or NOT_FOUND (somebody took the work over). Stop the
   * work; settling it will fail.
   */
  public boolean isLost() {
    return lost;
  }

  /** Whether complete, retry, quarantine or close settled (or tried to settle) the lease. */
  public boolean isSettled() {
    return settled.get();
  }

  /**
   * Stores a checkpoint (progress bytes that survive retries and takeovers) with a Heartbeat.
   *
   * @param checkpoint the progress bytes (at most 64 KiB)
   * @return the receipt after the heartbeat
   * @throws ClaimdException when the call fails (ABORTED and the like also mark it lost)
   * @throws IllegalStateException when the lease was settled
   */
  public Receipt checkpoint(byte[] checkpoint) {
    if (settled.get()) {
      throw new IllegalStateException("the lease is settled");
    }
    return heartbeat(ByteString.copyFrom(checkpoint));
  }

  /**
   * Complete: the work is done and {@code response} is replayed to duplicates. Tried again a
   * couple of times when claimd is UNAVAILABLE (Complete is idempotent for one token).
   *
   * @param response the response to store (at most 64 KiB)
   * @return the COMPLETED receipt
   * @throws ClaimdException when the call fails
   * @throws IllegalStateException when the lease was settled already
   */
  public Receipt complete(byte[] response) {
    settleOnce();
    CompleteRequest request = CompleteRequest.newBuilder()
        .setNamespace(namespace).setKey(key).setClaimToken(token)
        .setResponse(ByteString.copyFrom(response))
        .build();
    for (int attempt = 1; ; attempt++) {
      try {
        return settle(() -> claims.call(ClaimServiceGrpc.getCompleteMethod(), request,
            claims.callTimeout(), "Complete", key, token).getReceipt());
      } catch (ClaimdException e) {
        if (e.code() != Status.Code.UNAVAILABLE || attempt >= 3) {
          throw e;
        }
        pause(100L << attempt);
      }
    }
  }

  /**
   * Retry: gives the work back, claimable again after the namespace's backoff; the attempt
   * counts against the budget.
   *
   * @param error why the attempt failed (kept as last_error; never put secrets in it)
   * @return the receipt: RETRY_WAIT, or QUARANTINED when the budget is spent
   * @throws ClaimdException when the call fails
   * @throws IllegalStateException when the lease was settled already
   */
  public Receipt retry(String error) {
    return retry(error, null, true);
  }

  /**
   * Retry after {@code retryAfter} (1 s to 24 h); the attempt counts against the budget.
   *
   * @param error why the attempt failed
   * @param retryAfter when to retry, from now
   * @return the receipt: RETRY_WAIT, or QUARANTINED when the budget is spent
   * @throws ClaimdException when the call fails
   * @throws IllegalStateException when the lease was settled already
   */
  public Receipt retry(String error, Duration retryAfter) {
    return retry(error, retryAfter, true);
  }

  /**
   * Retry; {@code countAttempt == false} leaves the attempt budget as it is (the platform said
   * "wait", e.g. HTTP 429), though the attempt number still rises at the next claim.
   *
   * @param error why the attempt failed
   * @param retryAfter when to retry, from now; null: the namespace's backoff
   * @param countAttempt whether this attempt spends the budget
   * @return the receipt: RETRY_WAIT, or QUARANTINED when the budget is spent
   * @throws ClaimdException when the call fails
   * @throws IllegalStateException when the lease was settled already
   */
  public Receipt retry(String error, Duration retryAfter, boolean countAttempt) {
    settleOnce();
    return sendRetry(error, retryAfter, countAttempt);
  }

  /**
   * Quarantine: the event is poison; the receipt becomes a dead letter at once.
   *
   * @param error why (kept as last_error)
   * @return the QUARANTINED receipt
   * @throws ClaimdException when the call fails
   * @throws IllegalStateException when the lease was settled already
   */
  public Receipt quarantine(String error) {
    settleOnce();
    QuarantineRequest request = QuarantineRequest.newBuilder()
        .setNamespace(namespace).setKey(key).setClaimToken(token).setError(text(error))
        .build();
    return settle(() -> claims.call(ClaimServiceGrpc.getQuarantineMethod(), request,
        claims.callTimeout(), "Quarantine", key, token).getReceipt());
  }

  /**
   * Stops the heartbeats; a lease neither settled nor lost is given back with Retry. Never
   * throws: a failed give-back leaves the lease to expire.
   */
  @Override
  public void close() {
    stopBeats();
    if (lost || !settled.compareAndSet(false, true)) {
      return;
    }
    try {
      sendRetry(CLOSED_UNSETTLED, null, true);
    } catch (RuntimeException e) {
      // The claim runs out with its lease instead; nothing here may throw.
    }
  }

  @Override
  public String toString() {
    return "Lease{" + namespace + ", attempt " + receipt.getAttempt()
        + (lost ? ", lost" : "") + (settled.get() ? ", settled" : "") + "}";
  }

  private Receipt sendRetry(String error, Duration retryAfter, boolean countAttempt) {
    RetryRequest.Builder request = RetryRequest.newBuilder()
        .setNamespace(namespace).setKey(key).setClaimToken(token).setError(text(error));
    if (retryAfter != null) {
      request.setRetryAfter(Claims.proto(retryAfter));
    }
    if (!countAttempt) {
      request.setCountAttempt(false);
    }
    RetryRequest built = request.build();
    return settle(() -> claims.call(ClaimServiceGrpc.getRetryMethod(), built,
        claims.callTimeout(), "Retry", key, token).getReceipt());
  }

  private void settleOnce() {
    if (!settled.compareAndSet(false, true)) {
      throw new IllegalStateException("the lease is settled already");
    }
    stopBeats();
  }

  private Receipt settle(java.util.function.Supplier<Receipt> call) {
    try {
      return call.get();
    } catch (ClaimdException e) {
      if (LOST_CODES.contains(e.code())) {
        lost = true;
      }
      throw e;
    }
  }

  private void beat() {
    if (lost || settled.get()) {
      stopBeats();
      return;
    }
    try {
      heartbeat(null);
    } catch (RuntimeException e) {
      // Lost leases are marked by heartbeat(); anything else is tried at the next beat.
    }
  }

  private Receipt heartbeat(ByteString checkpoint) {
    HeartbeatRequest.Builder request = HeartbeatRequest.newBuilder()
        .setNamespace(namespace).setKey(key).setClaimToken(token);
    if (leaseTtl != null) {
      request.setLeaseTtl(Claims.proto(leaseTtl));
    }
    if (checkpoint != null) {
      request.setCheckpoint(checkpoint);
    }
    HeartbeatRequest built = request.build();
    try {
      return claims.call(ClaimServiceGrpc.getHeartbeatMethod(), built, claims.callTimeout(),
          "Heartbeat", key, token).getReceipt();
    } catch (ClaimdException e) {
      if (LOST_CODES.contains(e.code())) {
        lost = true;
        stopBeats();
      }
      throw e;
    }
  }

  private void stopBeats() {
    ScheduledFuture<?> future = beats;
    if (future != null) {
      future.cancel(false);
    }
  }

  private static String text(String error) {
    String t = error == null ? "" : error;
    return t.length() <= 4096 ? t : t.substring(0, 4096);
  }

  private static void pause(long millis) {
    try {
      Thread.sleep(millis);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }
}
