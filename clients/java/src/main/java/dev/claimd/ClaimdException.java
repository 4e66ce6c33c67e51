package dev.claimd;

import com.google.protobuf.Any;
import com.google.protobuf.InvalidProtocolBufferException;
import com.google.rpc.BadRequest;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.protobuf.StatusProto;
import java.util.Optional;

/**
 * A failed call to claimd. {@link #code()} is the gRPC status code (UNAVAILABLE: claimd or its
 * database cannot be reached; ABORTED, FAILED_PRECONDITION, NOT_FOUND on a settle: the claim is
 * no longer this caller's); {@link #field()} names the request field an INVALID_ARGUMENT is
 * about. The cause is the {@link StatusRuntimeException}. The message never holds a key, a
 * claim token or an API key. A call a tenant quota refused is a {@link QuotaException}, with
 * the quota and its retry delay.
 */
public sealed class ClaimdException extends RuntimeException permits QuotaException {
  private static final long serialVersionUID = 1L;

  private final Status.Code code;
  private final String rpc;
  private final String field;

  ClaimdException(String rpc, StatusRuntimeException cause, String... secrets) {
    super(message(rpc, cause, secrets), cause);
    this.code = cause.getStatus().getCode();
    this.rpc = rpc;
    this.field = fieldOf(cause);
  }

  /**
   * The exception for a failed call of {@code rpc}: a {@link QuotaException} when it is a
   * tenant quota's refusal, a ClaimdException otherwise.
   */
  static ClaimdException of(String rpc, StatusRuntimeException cause, String... secrets) {
    QuotaException.Refusal refusal = QuotaException.refusalOf(cause);
    return refusal == null
        ? new ClaimdException(rpc, cause, secrets)
        : new QuotaException(rpc, cause, refusal, secrets);
  }

  /** The gRPC status code claimd (or the channel) answered. */
  public Status.Code code() {
    return code;
  }

  /** The method that failed, e.g. {@code "Claim"}. */
  public String rpc() {
    return rpc;
  }

  /**
   * The first field named by the google.rpc.BadRequest detail of the error (e.g. {@code
   * "namespace"}, {@code "lease_ttl"}), or empty.
   */
  public Optional<String> field() {
    return Optional.ofNullable(field);
  }

  private static String message(String rpc, StatusRuntimeException cause, String... secrets) {
    Status status = cause.getStatus();
    String text = "claimd " + rpc + ": " + status.getCode();
    String description = status.getDescription();
    if (description != null && !description.isEmpty()) {
      for (String secret : secrets) {
        if (secret != null && !secret.isEmpty()) {
          description = description.replace(secret, "…");
        }
      }
      text += ": " + description;
    }
    return text;
  }

  private static String fieldOf(StatusRuntimeException cause) {
    com.google.rpc.Status status = StatusProto.fromThrowable(cause);
    if (status == null) {
      return null;
    }
    for (Any detail : status.getDetailsList()) {
      if (!detail.is(BadRequest.class)) {
        continue;
      }
      try {
        BadRequest bad = detail.unpack(BadRequest.class);
        if (bad.getFieldViolationsCount() > 0) {
          return bad.getFieldViolations(0).getField();
        }
      } catch (InvalidProtocolBufferException e) {
        return null;
      }
    }
    return null;
  }
}
