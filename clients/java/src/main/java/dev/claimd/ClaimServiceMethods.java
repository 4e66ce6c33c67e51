package dev.claimd;

import com.google.protobuf.Message;
import dev.claimd.v1.ClaimRequest;
import dev.claimd.v1.ClaimResponse;
import dev.claimd.v1.CompleteRequest;
import dev.claimd.v1.CompleteResponse;
import dev.claimd.v1.GetRequest;
import dev.claimd.v1.GetResponse;
import dev.claimd.v1.HeartbeatRequest;
import dev.claimd.v1.HeartbeatResponse;
import dev.claimd.v1.QuarantineRequest;
import dev.claimd.v1.QuarantineResponse;
import dev.claimd.v1.RetryRequest;
import dev.claimd.v1.RetryResponse;
import io.grpc.MethodDescriptor;
import io.grpc.protobuf.ProtoUtils;

/**
 * The claimd.v1.ClaimService methods this client calls, as gRPC method descriptors over the
 * generated messages (what a grpc-java stub would hold; MethodsTest checks them against the
 * service in the proto's descriptor).
 */
final class ClaimServiceMethods {
  static final String SERVICE = "claimd.v1.ClaimService";

  static final MethodDescriptor<ClaimRequest, ClaimResponse> CLAIM =
      unary("Claim", ClaimRequest.getDefaultInstance(), ClaimResponse.getDefaultInstance());
  static final MethodDescriptor<CompleteRequest, CompleteResponse> COMPLETE =
      unary("Complete", CompleteRequest.getDefaultInstance(), CompleteResponse.getDefaultInstance());
  static final MethodDescriptor<HeartbeatRequest, HeartbeatResponse> HEARTBEAT =
      unary("Heartbeat", HeartbeatRequest.getDefaultInstance(),
          HeartbeatResponse.getDefaultInstance());
  static final MethodDescriptor<RetryRequest, RetryResponse> RETRY =
      unary("Retry", RetryRequest.getDefaultInstance(), RetryResponse.getDefaultInstance());
  static final MethodDescriptor<QuarantineRequest, QuarantineResponse> QUARANTINE =
      unary("Quarantine", QuarantineRequest.getDefaultInstance(),
          QuarantineResponse.getDefaultInstance());
  static final MethodDescriptor<GetRequest, GetResponse> GET =
      unary("Get", GetRequest.getDefaultInstance(), GetResponse.getDefaultInstance());

  private ClaimServiceMethods() {}

  private static <Q extends Message, R extends Message> MethodDescriptor<Q, R> unary(
      String name, Q request, R response) {
    return MethodDescriptor.<Q, R>newBuilder()
        .setType(MethodDescriptor.MethodType.UNARY)
        .setFullMethodName(MethodDescriptor.generateFullMethodName(SERVICE, name))
        .setRequestMarshaller(ProtoUtils.marshaller(request))
        .setResponseMarshaller(ProtoUtils.marshaller(response))
        .setSampledToLocalTracing(true)
        .build();
  }
}
