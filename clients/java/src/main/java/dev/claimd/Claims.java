package dev.claimd;

import com.google.protobuf.ByteString;
import dev.claimd.v1.ClaimRequest;
import dev.claimd.v1.ClaimResponse;
import dev.claimd.v1.ClaimServiceGrpc;
import dev.claimd.v1.GetRequest;
import dev.claimd.v1.Receipt;
import io.grpc.CallOptions;
import io.grpc.Channel;
import io.grpc.ManagedChannel;
import io.grpc.MethodDescriptor;
import io.grpc.StatusRuntimeException;
import io.grpc.stub.ClientCalls;
import io.grpc.stub.StreamObserver;
import java.time.Duration;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * A client of claimd's ClaimService. Thread-safe; make one per process and close it at the
 * end. {@code Claims.connect("127.0.0.1:50051")} is plaintext without an API key; {@link
 * #builder(String)} adds an API key (sent as {@code authorization: Bearer <key>} on every call),
 * TLS (optionally with a client certificate) and the per-call timeout.
 */
public final class Claims implements AutoCloseable {
  /** The per-call timeout unless the builder sets one. */
  public static final Duration DEFAULT_CALL_TIMEOUT = Duration.ofSeconds(5);

  private final String target;
  private final boolean tls;
  private final ManagedChannel managed;
  private final Channel channel;
  private final Duration callTimeout;
  private final ScheduledExecutorService scheduler;
  private volatile boolean closed;

  Claims(String target, boolean tls, ManagedChannel managed, Channel channel, Duration timeout) {
    this.target = target;
    this.tls = tls;
    this.managed = managed;
    this.channel = channel;
    this.callTimeout = timeout;
    // The scheduler only starts asynchronous Heartbeats: one thread serves every lease.
    ScheduledThreadPoolExecutor pool = new ScheduledThreadPoolExecutor(1, daemonThreads());
    pool.setRemoveOnCancelPolicy(true);
    this.scheduler = pool;
  }

  /**
   * A plaintext client of the claimd at {@code target} ({@code host:port}), without an API key.
   *
   * @param target claimd's address, e.g. {@code "127.0.0.1:50051"}
   * @return the client
   */
  public static Claims connect(String target) {
    return builder(target).build();
  }

  /**
   * A builder of a client of the claimd at {@code target} ({@code host:port}).
   *
   * @param target claimd's address
   * @return the builder
   */
  public static ClaimsBuilder builder(String target) {
    return new ClaimsBuilder(target);
  }

  /**
   * Claim without options: may this caller do the work for (namespace, key)?
   *
   * @param namespace the namespace, e.g. {@code "orders-api"}
   * @param key the event's key
   * @param fingerprint the caller's digest of the payload (at most 64 bytes)
   * @return the decision, the receipt and, when CLAIMED, the lease (close it)
   * @throws ClaimdException when the call fails
   */
  public ClaimResult claim(String namespace, String key, byte[] fingerprint) {
    return claim(namespace, key, fingerprint, ClaimOptions.defaults());
  }

  /**
   * Claim: may this caller do the work for (namespace, key)? Exactly one caller per attempt is
   * told CLAIMED and gets a {@link Lease}, which heartbeats until it is settled or closed.
   *
   * @param namespace the namespace
   * @param key the event's key
   * @param fingerprint the caller's digest of the payload (at most 64 bytes)
   * @param options the lease, wait, recovery payload, delivery attempt and heartbeat interval
   * @return the decision, the receipt and, when CLAIMED, the lease (close it)
   * @throws ClaimdException when the call fails
   * @throws IllegalStateException when the client was closed (nothing is sent)
   */
  public ClaimResult claim(String namespace, String key, byte[] fingerprint, ClaimOptions options) {
    ensureOpen();
    ClaimRequest.Builder request = ClaimRequest.newBuilder()
        .setNamespace(namespace)
        .setKey(key)
        .setFingerprint(ByteString.copyFrom(fingerprint))
        .setRecoveryPayload(ByteString.copyFrom(options.recoveryPayloadUnsafe()))
        .setDeliveryAttempt(options.deliveryAttempt());
    options.lease().ifPresent(lease -> request.setLeaseTtl(proto(lease)));
    Duration timeout = callTimeout;
    if (!options.waitTime().isZero()) {
      request.setWait(proto(options.waitTime()));
      timeout = callTimeout.plus(options.waitTime());
    }
    ClaimResponse answer =
        call(ClaimServiceGrpc.getClaimMethod(), request.build(), timeout, "Claim", key);
    Decision decision = Decision.of(answer.getDecision());
    Receipt receipt = answer.getReceipt();
    if (decision != Decision.CLAIMED) {
      return new ClaimResult(decision, receipt, null);
    }
    Duration length = options.lease().orElseGet(() -> leaseOf(receipt));
    Duration interval = options.heartbeatInterval()
        .orElseGet(() -> Duration.ofMillis(Math.max(1, length.toMillis() / 3)));
    Lease lease = new Lease(this, namespace, key, answer.getClaimToken(), receipt,
        options.lease().orElse(null), interval);
    lease.start(scheduler);
    return new ClaimResult(decision, receipt, lease);
  }

  /**
   * Get: the receipt as this caller's tenant sees it (NOT_FOUND when there is none).
   *
   * @param namespace the namespace
   * @param key the event's key
   * @return the receipt
   * @throws ClaimdException when the call fails
   */
  public Receipt get(String namespace, String key) {
    ensureOpen();
    GetRequest request = GetRequest.newBuilder().setNamespace(namespace).setKey(key).build();
    return call(ClaimServiceGrpc.getGetMethod(), request, callTimeout, "Get", key).getReceipt();
  }

  /** The per-call timeout. */
  Duration callTimeout() {
    return callTimeout;
  }

  /** One unary call with the timeout; a failure is a ClaimdException free of the secrets. */
  <Q, R> R call(MethodDescriptor<Q, R> method, Q request, Duration timeout, String rpc,
      String... secrets) {
    CallOptions options = CallOptions.DEFAULT
        .withDeadlineAfter(Math.max(1, timeout.toMillis()), TimeUnit.MILLISECONDS);
    try {
      return ClientCalls.blockingUnaryCall(channel, method, options, request);
    } catch (StatusRuntimeException e) {
      throw ClaimdException.of(rpc, e, secrets);
    }
  }

  /**
   * One asynchronous unary call with the timeout (a heartbeat): the observer gets the answer on
   * a gRPC thread; nothing here blocks.
   */
  <Q, R> void callAsync(MethodDescriptor<Q, R> method, Q request, Duration timeout,
      StreamObserver<R> observer) {
    CallOptions options = CallOptions.DEFAULT
        .withDeadlineAfter(Math.max(1, timeout.toMillis()), TimeUnit.MILLISECONDS);
    ClientCalls.asyncUnaryCall(channel.newCall(method, options), request, observer);
  }

  private void ensureOpen() {
    if (closed) {
      throw new IllegalStateException("the Claims client is closed");
    }
  }

  /**
   * Stops the heartbeats of open leases and closes the channel; a later claim or get throws
   * {@link IllegalStateException} without calling claimd.
   */
  @Override
  public void close() {
    closed = true;
    scheduler.shutdownNow();
    managed.shutdown();
    try {
      if (!managed.awaitTermination(5, TimeUnit.SECONDS)) {
        managed.shutdownNow();
      }
    } catch (InterruptedException e) {
      managed.shutdownNow();
      Thread.currentThread().interrupt();
    }
  }

  @Override
  public String toString() {
    return "Claims{" + target + (tls ? ", tls" : ", plaintext") + "}";
  }

  static com.google.protobuf.Duration proto(Duration d) {
    return com.google.protobuf.Duration.newBuilder()
        .setSeconds(d.getSeconds())
        .setNanos(d.getNano())
        .build();
  }

  /** The lease a claim granted, on claimd's clock; 30 s when the receipt cannot tell. */
  static Duration leaseOf(Receipt receipt) {
    if (receipt.hasLeaseExpiresAt() && receipt.hasUpdatedAt()) {
      long expires = millis(receipt.getLeaseExpiresAt());
      long since = millis(receipt.getUpdatedAt());
      if (expires > since) {
        return Duration.ofMillis(expires - since);
      }
    }
    return Duration.ofSeconds(30);
  }

  /**
   * Milliseconds since the epoch of a timestamp.
   *
   * @param ts the timestamp
   * @return its milliseconds since the epoch
   */
  public static long millis(com.google.protobuf.Timestamp ts) {
    return ts.getSeconds() * 1000 + ts.getNanos() / 1_000_000;
  }

  private static ThreadFactory daemonThreads() {
    AtomicInteger n = new AtomicInteger();
    return runnable -> {
      Thread thread = new Thread(runnable, "claimd-heartbeat-" + n.incrementAndGet());
      thread.setDaemon(true);
      return thread;
    };
  }
}
