package dev.claimd;

import com.google.protobuf.Any;
import com.google.protobuf.InvalidProtocolBufferException;
import com.google.rpc.QuotaFailure;
import com.google.rpc.RetryInfo;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.protobuf.StatusProto;
import java.time.Duration;

/**
 * A call claimd refused because the tenant is over one of its quotas (docs/DESIGN.md §5.15):
 * RESOURCE_EXHAUSTED with a {@code google.rpc.RetryInfo} and a {@code google.rpc.QuotaFailure}
 * in its status details. Nothing was written and no attempt was spent. {@link #quota()} is the
 * quota's key, {@link #retryAfter()} when claimd expects to take the call. A RESOURCE_EXHAUSTED
 * without both details (a message over a size limit) is a plain {@link ClaimdException}.
 */
public final class QuotaException extends ClaimdException {
  private static final long serialVersionUID = 1L;

  /** What the status details say: the quota and the delay. */
  record Refusal(String quota, Duration retryAfter) {}

  private final String quota;
  private final Duration retryAfter;

  QuotaException(String rpc, StatusRuntimeException cause, Refusal refusal, String... secrets) {
    super(rpc, cause, secrets);
    this.quota = refusal.quota();
    this.retryAfter = refusal.retryAfter();
  }

  /**
   * The quota's key, the QuotaFailure's violation subject: {@code "claims_per_second"},
   * {@code "writes_per_second"} or {@code "max_waiting"}.
   */
  public String quota() {
    return quota;
  }

  /** The RetryInfo's delay: when claimd expects to take the call. */
  public Duration retryAfter() {
    return retryAfter;
  }

  /**
   * The refusal in {@code cause}'s status details (decoded with {@link StatusProto}) when it is
   * RESOURCE_EXHAUSTED with both a RetryInfo delay and a QuotaFailure naming a quota; null
   * otherwise.
   */
  static Refusal refusalOf(StatusRuntimeException cause) {
    if (cause.getStatus().getCode() != Status.Code.RESOURCE_EXHAUSTED) {
      return null;
    }
    com.google.rpc.Status status = StatusProto.fromThrowable(cause);
    if (status == null) {
      return null;
    }
    String quota = null;
    Duration retryAfter = null;
    try {
      for (Any detail : status.getDetailsList()) {
        if (detail.is(RetryInfo.class)) {
          RetryInfo info = detail.unpack(RetryInfo.class);
          if (info.hasRetryDelay()) {
            com.google.protobuf.Duration delay = info.getRetryDelay();
            retryAfter = Duration.ofSeconds(delay.getSeconds(), delay.getNanos());
          }
        } else if (detail.is(QuotaFailure.class)) {
          for (QuotaFailure.Violation v : detail.unpack(QuotaFailure.class).getViolationsList()) {
            if (quota == null && !v.getSubject().isEmpty()) {
              quota = v.getSubject();
            }
          }
        }
      }
    } catch (InvalidProtocolBufferException | ArithmeticException e) {
      return null;
    }
    return quota == null || retryAfter == null ? null : new Refusal(quota, retryAfter);
  }
}
