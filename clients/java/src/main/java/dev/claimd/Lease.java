package dev.claimd;

import com.google.protobuf.ByteString;
import dev.claimd.v1.ClaimServiceGrpc;
import dev.claimd.v1.CompleteRequest;
import dev.claimd.v1.QuarantineRequest;
import dev.claimd.v1.Receipt;
import dev.claimd.v1.RetryRequest;
import io.grpc.Status;
import java.time.Duration;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.ScheduledExecutorService;
import java.util.function.Supplier;

/**
 * A won claim, kept alive by a Heartbeat every heartbeat interval until it is settled, lost or
 * closed. Settle it once: {@link #complete(byte[])}, {@link #retry(String)} or {@link
 * #quarantine(String)}; a settle after a successful one throws {@link IllegalStateException}
 * without calling claimd. A settle that fails for any other reason than the claim being lost
 * (e.g. UNAVAILABLE) leaves the lease open: heartbeats resume, it may be settled again, and
 * {@link #close()} gives it back. {@link #close()} stops the heartbeats and, when the lease was
 * neither settled nor lost, gives the claim back with Retry, so try-with-resources hands the
 * event back when the work throws. Heartbeats are asynchronous calls, each with a deadline of
 * at most the heartbeat interval; a heartbeat never blocks another lease's. Checkpoints and
 * settles are serialized, and a heartbeat's "lost" answer is ignored once the lease is settled.
 * The claim token never leaves this object.
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
  /** Held for a whole checkpoint or settle: they never overlap. */
  private final Object ops = new Object();
  /** Guards the fields below (never held during a call). */
  private final Object lock = new Object();
  private final Heartbeats beats;
  private boolean settled;
  private boolean settling;
  private boolean closed;
  private volatile boolean lost;

  Lease(Claims claims, String namespace, String key, String token, Receipt receipt,
      Duration leaseTtl, Duration interval) {
    this.claims = claims;
    this.namespace = namespace;
    this.key = key;
    this.token = token;
    this.receipt = receipt;
    this.leaseTtl = leaseTtl;
    this.beats = new Heartbeats(claims, interval,
        Heartbeats.request(namespace, key, token, leaseTtl, null), lock,
        () -> !(lost || settled || settling || closed), code -> {
          if (LOST_CODES.contains(code)) {
            markLost();
          }
        });
  }

  void start(ScheduledExecutorService scheduler) {
    beats.start(scheduler);
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
   * answered ABORTED, FAILED_PRECONDITION or NOT_FOUND (somebody took the work over) before the
   * lease was settled. Stop the work; settling it will fail.
   */
  public boolean isLost() {
    return lost;
  }

  /**
   * Whether complete, retry, quarantine or close settled the lease: claimd accepted the settle,
   * or answered that the claim is no longer this caller's. A settle that failed otherwise
   * leaves it unsettled.
   */
  public boolean isSettled() {
    synchronized (lock) {
      return settled;
    }
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
    ByteString bytes = ByteString.copyFrom(checkpoint);
    synchronized (ops) {
      synchronized (lock) {
        if (settled) {
          throw new IllegalStateException("the lease is settled");
        }
      }
      try {
        return claims.call(ClaimServiceGrpc.getHeartbeatMethod(),
            Heartbeats.request(namespace, key, token, leaseTtl, bytes), claims.callTimeout(),
            "Heartbeat", key, token).getReceipt();
      } catch (ClaimdException e) {
        if (LOST_CODES.contains(e.code())) {
          markLost();
        }
        throw e;
      }
    }
  }

  /**
   * Complete: the work is done and {@code response} is replayed to duplicates. Tried again a
   * couple of times when claimd is UNAVAILABLE (Complete is idempotent for one token).
   *
   * @param response the response to store (at most 64 KiB)
   * @return the COMPLETED receipt
   * @throws ClaimdException when the call fails (the lease stays open unless it was lost)
   * @throws IllegalStateException when the lease was settled already
   * @throws NullPointerException when {@code response} is null (nothing changes)
   */
  public Receipt complete(byte[] response) {
    Objects.requireNonNull(response, "response");
    CompleteRequest request = CompleteRequest.newBuilder()
        .setNamespace(namespace).setKey(key).setClaimToken(token)
        .setResponse(ByteString.copyFrom(response))
        .build();
    return settle(() -> {
      for (int attempt = 1; ; attempt++) {
        try {
          return claims.call(ClaimServiceGrpc.getCompleteMethod(), request,
              claims.callTimeout(), "Complete", key, token).getReceipt();
        } catch (ClaimdException e) {
          if (e.code() != Status.Code.UNAVAILABLE || attempt >= 3) {
            throw e;
          }
          pause(100L << attempt);
        }
      }
    });
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

  /**
   * Quarantine: the event is poison; the receipt becomes a dead letter at once.
   *
   * @param error why (kept as last_error)
   * @return the QUARANTINED receipt
   * @throws ClaimdException when the call fails
   * @throws IllegalStateException when the lease was settled already
   */
  public Receipt quarantine(String error) {
    QuarantineRequest request = QuarantineRequest.newBuilder()
        .setNamespace(namespace).setKey(key).setClaimToken(token).setError(text(error))
        .build();
    return settle(() -> claims.call(ClaimServiceGrpc.getQuarantineMethod(), request,
        claims.callTimeout(), "Quarantine", key, token).getReceipt());
  }

  /**
   * Stops the heartbeats for good; a lease neither settled nor lost (including one whose
   * settle failed) is given back with Retry. Never throws: a failed give-back leaves the lease
   * to expire.
   */
  @Override
  public void close() {
    synchronized (lock) {
      closed = true;
      beats.stop();
    }
    synchronized (ops) {
      if (lost || isSettled()) {
        return;
      }
      try {
        retry(CLOSED_UNSETTLED, null, true);
      } catch (RuntimeException e) {
        // The claim runs out with its lease instead; nothing here may throw.
      }
    }
  }

  @Override
  public String toString() {
    return "Lease{" + namespace + ", attempt " + receipt.getAttempt()
        + (lost ? ", lost" : "") + (isSettled() ? ", settled" : "") + "}";
  }

  /**
   * One settle call: heartbeats pause while it runs; success or a lost code settles the lease,
   * any other failure leaves it open with heartbeats resumed (unless it was closed).
   */
  private Receipt settle(Supplier<Receipt> call) {
    synchronized (ops) {
      synchronized (lock) {
        if (settled) {
          throw new IllegalStateException("the lease is settled already");
        }
        settling = true;
        beats.stop();
      }
      boolean done = false;
      try {
        Receipt answer = call.get();
        done = true;
        return answer;
      } catch (ClaimdException e) {
        if (LOST_CODES.contains(e.code())) {
          lost = true;
          done = true;
        }
        throw e;
      } finally {
        synchronized (lock) {
          settling = false;
          settled = done;
          if (!done && !lost && !closed) {
            beats.resume();
          }
        }
      }
    }
  }

  /** Marks the claim lost, unless it was settled (or is being settled) already. */
  private void markLost() {
    synchronized (lock) {
      if (settled || settling) {
        return;
      }
      lost = true;
      beats.stop();
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
