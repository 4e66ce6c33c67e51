package dev.claimd.v1;

import static io.grpc.MethodDescriptor.generateFullMethodName;

/**
 * <pre>
 * ClaimService records and answers claims on events.
 * Decisions are answers, not errors: Claim returns OK with a decision for every state.
 * Status codes report what the caller did wrong (INVALID_ARGUMENT, NOT_FOUND, ABORTED,
 * FAILED_PRECONDITION) or what went wrong (UNAVAILABLE when the database cannot be reached).
 * </pre>
 */
@io.grpc.stub.annotations.GrpcGenerated
public final class ClaimServiceGrpc {

  private ClaimServiceGrpc() {}

  public static final java.lang.String SERVICE_NAME = "claimd.v1.ClaimService";

  // Static method descriptors that strictly reflect the proto.
  private static volatile io.grpc.MethodDescriptor<dev.claimd.v1.ClaimRequest,
      dev.claimd.v1.ClaimResponse> getClaimMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "Claim",
      requestType = dev.claimd.v1.ClaimRequest.class,
      responseType = dev.claimd.v1.ClaimResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<dev.claimd.v1.ClaimRequest,
      dev.claimd.v1.ClaimResponse> getClaimMethod() {
    io.grpc.MethodDescriptor<dev.claimd.v1.ClaimRequest, dev.claimd.v1.ClaimResponse> getClaimMethod;
    if ((getClaimMethod = ClaimServiceGrpc.getClaimMethod) == null) {
      synchronized (ClaimServiceGrpc.class) {
        if ((getClaimMethod = ClaimServiceGrpc.getClaimMethod) == null) {
          ClaimServiceGrpc.getClaimMethod = getClaimMethod =
              io.grpc.MethodDescriptor.<dev.claimd.v1.ClaimRequest, dev.claimd.v1.ClaimResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "Claim"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.claimd.v1.ClaimRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.claimd.v1.ClaimResponse.getDefaultInstance()))
              .setSchemaDescriptor(new ClaimServiceMethodDescriptorSupplier("Claim"))
              .build();
        }
      }
    }
    return getClaimMethod;
  }

  private static volatile io.grpc.MethodDescriptor<dev.claimd.v1.CompleteRequest,
      dev.claimd.v1.CompleteResponse> getCompleteMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "Complete",
      requestType = dev.claimd.v1.CompleteRequest.class,
      responseType = dev.claimd.v1.CompleteResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<dev.claimd.v1.CompleteRequest,
      dev.claimd.v1.CompleteResponse> getCompleteMethod() {
    io.grpc.MethodDescriptor<dev.claimd.v1.CompleteRequest, dev.claimd.v1.CompleteResponse> getCompleteMethod;
    if ((getCompleteMethod = ClaimServiceGrpc.getCompleteMethod) == null) {
      synchronized (ClaimServiceGrpc.class) {
        if ((getCompleteMethod = ClaimServiceGrpc.getCompleteMethod) == null) {
          ClaimServiceGrpc.getCompleteMethod = getCompleteMethod =
              io.grpc.MethodDescriptor.<dev.claimd.v1.CompleteRequest, dev.claimd.v1.CompleteResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "Complete"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.claimd.v1.CompleteRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.claimd.v1.CompleteResponse.getDefaultInstance()))
              .setSchemaDescriptor(new ClaimServiceMethodDescriptorSupplier("Complete"))
              .build();
        }
      }
    }
    return getCompleteMethod;
  }

  private static volatile io.grpc.MethodDescriptor<dev.claimd.v1.HeartbeatRequest,
      dev.claimd.v1.HeartbeatResponse> getHeartbeatMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "Heartbeat",
      requestType = dev.claimd.v1.HeartbeatRequest.class,
      responseType = dev.claimd.v1.HeartbeatResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<dev.claimd.v1.HeartbeatRequest,
      dev.claimd.v1.HeartbeatResponse> getHeartbeatMethod() {
    io.grpc.MethodDescriptor<dev.claimd.v1.HeartbeatRequest, dev.claimd.v1.HeartbeatResponse> getHeartbeatMethod;
    if ((getHeartbeatMethod = ClaimServiceGrpc.getHeartbeatMethod) == null) {
      synchronized (ClaimServiceGrpc.class) {
        if ((getHeartbeatMethod = ClaimServiceGrpc.getHeartbeatMethod) == null) {
          ClaimServiceGrpc.getHeartbeatMethod = getHeartbeatMethod =
              io.grpc.MethodDescriptor.<dev.claimd.v1.HeartbeatRequest, dev.claimd.v1.HeartbeatResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "Heartbeat"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.claimd.v1.HeartbeatRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.claimd.v1.HeartbeatResponse.getDefaultInstance()))
              .setSchemaDescriptor(new ClaimServiceMethodDescriptorSupplier("Heartbeat"))
              .build();
        }
      }
    }
    return getHeartbeatMethod;
  }

  private static volatile io.grpc.MethodDescriptor<dev.claimd.v1.RetryRequest,
      dev.claimd.v1.RetryResponse> getRetryMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "Retry",
      requestType = dev.claimd.v1.RetryRequest.class,
      responseType = dev.claimd.v1.RetryResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<dev.claimd.v1.RetryRequest,
      dev.claimd.v1.RetryResponse> getRetryMethod() {
    io.grpc.MethodDescriptor<dev.claimd.v1.RetryRequest, dev.claimd.v1.RetryResponse> getRetryMethod;
    if ((getRetryMethod = ClaimServiceGrpc.getRetryMethod) == null) {
      synchronized (ClaimServiceGrpc.class) {
        if ((getRetryMethod = ClaimServiceGrpc.getRetryMethod) == null) {
          ClaimServiceGrpc.getRetryMethod = getRetryMethod =
              io.grpc.MethodDescriptor.<dev.claimd.v1.RetryRequest, dev.claimd.v1.RetryResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "Retry"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.claimd.v1.RetryRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.claimd.v1.RetryResponse.getDefaultInstance()))
              .setSchemaDescriptor(new ClaimServiceMethodDescriptorSupplier("Retry"))
              .build();
        }
      }
    }
    return getRetryMethod;
  }

  private static volatile io.grpc.MethodDescriptor<dev.claimd.v1.QuarantineRequest,
      dev.claimd.v1.QuarantineResponse> getQuarantineMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "Quarantine",
      requestType = dev.claimd.v1.QuarantineRequest.class,
      responseType = dev.claimd.v1.QuarantineResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<dev.claimd.v1.QuarantineRequest,
      dev.claimd.v1.QuarantineResponse> getQuarantineMethod() {
    io.grpc.MethodDescriptor<dev.claimd.v1.QuarantineRequest, dev.claimd.v1.QuarantineResponse> getQuarantineMethod;
    if ((getQuarantineMethod = ClaimServiceGrpc.getQuarantineMethod) == null) {
      synchronized (ClaimServiceGrpc.class) {
        if ((getQuarantineMethod = ClaimServiceGrpc.getQuarantineMethod) == null) {
          ClaimServiceGrpc.getQuarantineMethod = getQuarantineMethod =
              io.grpc.MethodDescriptor.<dev.claimd.v1.QuarantineRequest, dev.claimd.v1.QuarantineResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "Quarantine"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.claimd.v1.QuarantineRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.claimd.v1.QuarantineResponse.getDefaultInstance()))
              .setSchemaDescriptor(new ClaimServiceMethodDescriptorSupplier("Quarantine"))
              .build();
        }
      }
    }
    return getQuarantineMethod;
  }

  private static volatile io.grpc.MethodDescriptor<dev.claimd.v1.GetRequest,
      dev.claimd.v1.GetResponse> getGetMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "Get",
      requestType = dev.claimd.v1.GetRequest.class,
      responseType = dev.claimd.v1.GetResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<dev.claimd.v1.GetRequest,
      dev.claimd.v1.GetResponse> getGetMethod() {
    io.grpc.MethodDescriptor<dev.claimd.v1.GetRequest, dev.claimd.v1.GetResponse> getGetMethod;
    if ((getGetMethod = ClaimServiceGrpc.getGetMethod) == null) {
      synchronized (ClaimServiceGrpc.class) {
        if ((getGetMethod = ClaimServiceGrpc.getGetMethod) == null) {
          ClaimServiceGrpc.getGetMethod = getGetMethod =
              io.grpc.MethodDescriptor.<dev.claimd.v1.GetRequest, dev.claimd.v1.GetResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "Get"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.claimd.v1.GetRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.claimd.v1.GetResponse.getDefaultInstance()))
              .setSchemaDescriptor(new ClaimServiceMethodDescriptorSupplier("Get"))
              .build();
        }
      }
    }
    return getGetMethod;
  }

  private static volatile io.grpc.MethodDescriptor<dev.claimd.v1.ListOrphanedRequest,
      dev.claimd.v1.ListOrphanedResponse> getListOrphanedMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "ListOrphaned",
      requestType = dev.claimd.v1.ListOrphanedRequest.class,
      responseType = dev.claimd.v1.ListOrphanedResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<dev.claimd.v1.ListOrphanedRequest,
      dev.claimd.v1.ListOrphanedResponse> getListOrphanedMethod() {
    io.grpc.MethodDescriptor<dev.claimd.v1.ListOrphanedRequest, dev.claimd.v1.ListOrphanedResponse> getListOrphanedMethod;
    if ((getListOrphanedMethod = ClaimServiceGrpc.getListOrphanedMethod) == null) {
      synchronized (ClaimServiceGrpc.class) {
        if ((getListOrphanedMethod = ClaimServiceGrpc.getListOrphanedMethod) == null) {
          ClaimServiceGrpc.getListOrphanedMethod = getListOrphanedMethod =
              io.grpc.MethodDescriptor.<dev.claimd.v1.ListOrphanedRequest, dev.claimd.v1.ListOrphanedResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "ListOrphaned"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.claimd.v1.ListOrphanedRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.claimd.v1.ListOrphanedResponse.getDefaultInstance()))
              .setSchemaDescriptor(new ClaimServiceMethodDescriptorSupplier("ListOrphaned"))
              .build();
        }
      }
    }
    return getListOrphanedMethod;
  }

  private static volatile io.grpc.MethodDescriptor<dev.claimd.v1.ListRequest,
      dev.claimd.v1.ListResponse> getListMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "List",
      requestType = dev.claimd.v1.ListRequest.class,
      responseType = dev.claimd.v1.ListResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<dev.claimd.v1.ListRequest,
      dev.claimd.v1.ListResponse> getListMethod() {
    io.grpc.MethodDescriptor<dev.claimd.v1.ListRequest, dev.claimd.v1.ListResponse> getListMethod;
    if ((getListMethod = ClaimServiceGrpc.getListMethod) == null) {
      synchronized (ClaimServiceGrpc.class) {
        if ((getListMethod = ClaimServiceGrpc.getListMethod) == null) {
          ClaimServiceGrpc.getListMethod = getListMethod =
              io.grpc.MethodDescriptor.<dev.claimd.v1.ListRequest, dev.claimd.v1.ListResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "List"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.claimd.v1.ListRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.claimd.v1.ListResponse.getDefaultInstance()))
              .setSchemaDescriptor(new ClaimServiceMethodDescriptorSupplier("List"))
              .build();
        }
      }
    }
    return getListMethod;
  }

  private static volatile io.grpc.MethodDescriptor<dev.claimd.v1.RedriveRequest,
      dev.claimd.v1.RedriveResponse> getRedriveMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "Redrive",
      requestType = dev.claimd.v1.RedriveRequest.class,
      responseType = dev.claimd.v1.RedriveResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<dev.claimd.v1.RedriveRequest,
      dev.claimd.v1.RedriveResponse> getRedriveMethod() {
    io.grpc.MethodDescriptor<dev.claimd.v1.RedriveRequest, dev.claimd.v1.RedriveResponse> getRedriveMethod;
    if ((getRedriveMethod = ClaimServiceGrpc.getRedriveMethod) == null) {
      synchronized (ClaimServiceGrpc.class) {
        if ((getRedriveMethod = ClaimServiceGrpc.getRedriveMethod) == null) {
          ClaimServiceGrpc.getRedriveMethod = getRedriveMethod =
              io.grpc.MethodDescriptor.<dev.claimd.v1.RedriveRequest, dev.claimd.v1.RedriveResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "Redrive"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.claimd.v1.RedriveRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.claimd.v1.RedriveResponse.getDefaultInstance()))
              .setSchemaDescriptor(new ClaimServiceMethodDescriptorSupplier("Redrive"))
              .build();
        }
      }
    }
    return getRedriveMethod;
  }

  /**
   * Creates a new async stub that supports all call types for the service
   */
  public static ClaimServiceStub newStub(io.grpc.Channel channel) {
    io.grpc.stub.AbstractStub.StubFactory<ClaimServiceStub> factory =
      new io.grpc.stub.AbstractStub.StubFactory<ClaimServiceStub>() {
        @java.lang.Override
        public ClaimServiceStub newStub(io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
          return new ClaimServiceStub(channel, callOptions);
        }
      };
    return ClaimServiceStub.newStub(factory, channel);
  }

  /**
   * Creates a new blocking-style stub that supports all types of calls on the service
   */
  public static ClaimServiceBlockingV2Stub newBlockingV2Stub(
      io.grpc.Channel channel) {
    io.grpc.stub.AbstractStub.StubFactory<ClaimServiceBlockingV2Stub> factory =
      new io.grpc.stub.AbstractStub.StubFactory<ClaimServiceBlockingV2Stub>() {
        @java.lang.Override
        public ClaimServiceBlockingV2Stub newStub(io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
          return new ClaimServiceBlockingV2Stub(channel, callOptions);
        }
      };
    return ClaimServiceBlockingV2Stub.newStub(factory, channel);
  }

  /**
   * Creates a new blocking-style stub that supports unary and streaming output calls on the service
   */
  public static ClaimServiceBlockingStub newBlockingStub(
      io.grpc.Channel channel) {
    io.grpc.stub.AbstractStub.StubFactory<ClaimServiceBlockingStub> factory =
      new io.grpc.stub.AbstractStub.StubFactory<ClaimServiceBlockingStub>() {
        @java.lang.Override
        public ClaimServiceBlockingStub newStub(io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
          return new ClaimServiceBlockingStub(channel, callOptions);
        }
      };
    return ClaimServiceBlockingStub.newStub(factory, channel);
  }

  /**
   * Creates a new ListenableFuture-style stub that supports unary calls on the service
   */
  public static ClaimServiceFutureStub newFutureStub(
      io.grpc.Channel channel) {
    io.grpc.stub.AbstractStub.StubFactory<ClaimServiceFutureStub> factory =
      new io.grpc.stub.AbstractStub.StubFactory<ClaimServiceFutureStub>() {
        @java.lang.Override
        public ClaimServiceFutureStub newStub(io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
          return new ClaimServiceFutureStub(channel, callOptions);
        }
      };
    return ClaimServiceFutureStub.newStub(factory, channel);
  }

  /**
   * <pre>
   * ClaimService records and answers claims on events.
   * Decisions are answers, not errors: Claim returns OK with a decision for every state.
   * Status codes report what the caller did wrong (INVALID_ARGUMENT, NOT_FOUND, ABORTED,
   * FAILED_PRECONDITION) or what went wrong (UNAVAILABLE when the database cannot be reached).
   * </pre>
   */
  public interface AsyncService {

    /**
     * <pre>
     * Claim asks whether the caller may do the work for an event. Exactly one caller per
     * attempt is told DECISION_CLAIMED and receives a claim token; a duplicate delivery is a
     * read and changes nothing.
     * </pre>
     */
    default void claim(dev.claimd.v1.ClaimRequest request,
        io.grpc.stub.StreamObserver<dev.claimd.v1.ClaimResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getClaimMethod(), responseObserver);
    }

    /**
     * <pre>
     * Complete marks the claimed work done and stores the response to replay to duplicates.
     * Completing again with the same token succeeds and changes nothing.
     * </pre>
     */
    default void complete(dev.claimd.v1.CompleteRequest request,
        io.grpc.stub.StreamObserver<dev.claimd.v1.CompleteResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getCompleteMethod(), responseObserver);
    }

    /**
     * <pre>
     * Heartbeat extends the holder's lease and optionally stores a checkpoint.
     * </pre>
     */
    default void heartbeat(dev.claimd.v1.HeartbeatRequest request,
        io.grpc.stub.StreamObserver<dev.claimd.v1.HeartbeatResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getHeartbeatMethod(), responseObserver);
    }

    /**
     * <pre>
     * Retry gives the work back to be claimed again after a backoff (or retry_after).
     * </pre>
     */
    default void retry(dev.claimd.v1.RetryRequest request,
        io.grpc.stub.StreamObserver<dev.claimd.v1.RetryResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getRetryMethod(), responseObserver);
    }

    /**
     * <pre>
     * Quarantine moves the receipt to the dead letter state at once (a permanent failure).
     * </pre>
     */
    default void quarantine(dev.claimd.v1.QuarantineRequest request,
        io.grpc.stub.StreamObserver<dev.claimd.v1.QuarantineResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getQuarantineMethod(), responseObserver);
    }

    /**
     * <pre>
     * Get returns the receipt as the caller's tenant sees it.
     * </pre>
     */
    default void get(dev.claimd.v1.GetRequest request,
        io.grpc.stub.StreamObserver<dev.claimd.v1.GetResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getGetMethod(), responseObserver);
    }

    /**
     * <pre>
     * ListOrphaned lists receipts nobody is working on although they are not done: leases
     * that expired and retries that are due, oldest due first.
     * </pre>
     */
    default void listOrphaned(dev.claimd.v1.ListOrphanedRequest request,
        io.grpc.stub.StreamObserver<dev.claimd.v1.ListOrphanedResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getListOrphanedMethod(), responseObserver);
    }

    /**
     * <pre>
     * List pages through the caller's receipts, optionally only some states and one
     * namespace, ordered by (namespace, key) compared bytewise. With states =
     * [STATE_QUARANTINED] it lists the dead letters.
     * </pre>
     */
    default void list(dev.claimd.v1.ListRequest request,
        io.grpc.stub.StreamObserver<dev.claimd.v1.ListResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getListMethod(), responseObserver);
    }

    /**
     * <pre>
     * Redrive gives a dead letter (a QUARANTINED receipt) another full attempt budget: it
     * becomes RETRY_WAIT, due at once, so the next Claim (or a recovery worker that finds it
     * with ListOrphaned) takes it over. The attempt number keeps rising at that claim; the
     * old holder's claim token is no longer current (ABORTED); the recovery payload,
     * checkpoint and last_error are kept. FAILED_PRECONDITION for a receipt that is not
     * QUARANTINED, NOT_FOUND for an unknown one.
     * </pre>
     */
    default void redrive(dev.claimd.v1.RedriveRequest request,
        io.grpc.stub.StreamObserver<dev.claimd.v1.RedriveResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getRedriveMethod(), responseObserver);
    }
  }

  /**
   * Base class for the server implementation of the service ClaimService.
   * <pre>
   * ClaimService records and answers claims on events.
   * Decisions are answers, not errors: Claim returns OK with a decision for every state.
   * Status codes report what the caller did wrong (INVALID_ARGUMENT, NOT_FOUND, ABORTED,
   * FAILED_PRECONDITION) or what went wrong (UNAVAILABLE when the database cannot be reached).
   * </pre>
   */
  public static abstract class ClaimServiceImplBase
      implements io.grpc.BindableService, AsyncService {

    @java.lang.Override public final io.grpc.ServerServiceDefinition bindService() {
      return ClaimServiceGrpc.bindService(this);
    }
  }

  /**
   * A stub to allow clients to do asynchronous rpc calls to service ClaimService.
   * <pre>
   * ClaimService records and answers claims on events.
   * Decisions are answers, not errors: Claim returns OK with a decision for every state.
   * Status codes report what the caller did wrong (INVALID_ARGUMENT, NOT_FOUND, ABORTED,
   * FAILED_PRECONDITION) or what went wrong (UNAVAILABLE when the database cannot be reached).
   * </pre>
   */
  public static final class ClaimServiceStub
      extends io.grpc.stub.AbstractAsyncStub<ClaimServiceStub> {
    private ClaimServiceStub(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      super(channel, callOptions);
    }

    @java.lang.Override
    protected ClaimServiceStub build(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      return new ClaimServiceStub(channel, callOptions);
    }

    /**
     * <pre>
     * Claim asks whether the caller may do the work for an event. Exactly one caller per
     * attempt is told DECISION_CLAIMED and receives a claim token; a duplicate delivery is a
     * read and changes nothing.
     * </pre>
     */
    public void claim(dev.claimd.v1.ClaimRequest request,
        io.grpc.stub.StreamObserver<dev.claimd.v1.ClaimResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getClaimMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Complete marks the claimed work done and stores the response to replay to duplicates.
     * Completing again with the same token succeeds and changes nothing.
     * </pre>
     */
    public void complete(dev.claimd.v1.CompleteRequest request,
        io.grpc.stub.StreamObserver<dev.claimd.v1.CompleteResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getCompleteMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Heartbeat extends the holder's lease and optionally stores a checkpoint.
     * </pre>
     */
    public void heartbeat(dev.claimd.v1.HeartbeatRequest request,
        io.grpc.stub.StreamObserver<dev.claimd.v1.HeartbeatResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getHeartbeatMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Retry gives the work back to be claimed again after a backoff (or retry_after).
     * </pre>
     */
    public void retry(dev.claimd.v1.RetryRequest request,
        io.grpc.stub.StreamObserver<dev.claimd.v1.RetryResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getRetryMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Quarantine moves the receipt to the dead letter state at once (a permanent failure).
     * </pre>
     */
    public void quarantine(dev.claimd.v1.QuarantineRequest request,
        io.grpc.stub.StreamObserver<dev.claimd.v1.QuarantineResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getQuarantineMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Get returns the receipt as the caller's tenant sees it.
     * </pre>
     */
    public void get(dev.claimd.v1.GetRequest request,
        io.grpc.stub.StreamObserver<dev.claimd.v1.GetResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getGetMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * ListOrphaned lists receipts nobody is working on although they are not done: leases
     * that expired and retries that are due, oldest due first.
     * </pre>
     */
    public void listOrphaned(dev.claimd.v1.ListOrphanedRequest request,
        io.grpc.stub.StreamObserver<dev.claimd.v1.ListOrphanedResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getListOrphanedMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * List pages through the caller's receipts, optionally only some states and one
     * namespace, ordered by (namespace, key) compared bytewise. With states =
     * [STATE_QUARANTINED] it lists the dead letters.
     * </pre>
     */
    public void list(dev.claimd.v1.ListRequest request,
        io.grpc.stub.StreamObserver<dev.claimd.v1.ListResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getListMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Redrive gives a dead letter (a QUARANTINED receipt) another full attempt budget: it
     * becomes RETRY_WAIT, due at once, so the next Claim (or a recovery worker that finds it
     * with ListOrphaned) takes it over. The attempt number keeps rising at that claim; the
     * old holder's claim token is no longer current (ABORTED); the recovery payload,
     * checkpoint and last_error are kept. FAILED_PRECONDITION for a receipt that is not
     * QUARANTINED, NOT_FOUND for an unknown one.
     * </pre>
     */
    public void redrive(dev.claimd.v1.RedriveRequest request,
        io.grpc.stub.StreamObserver<dev.claimd.v1.RedriveResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getRedriveMethod(), getCallOptions()), request, responseObserver);
    }
  }

  /**
   * A stub to allow clients to do synchronous rpc calls to service ClaimService.
   * <pre>
   * ClaimService records and answers claims on events.
   * Decisions are answers, not errors: Claim returns OK with a decision for every state.
   * Status codes report what the caller did wrong (INVALID_ARGUMENT, NOT_FOUND, ABORTED,
   * FAILED_PRECONDITION) or what went wrong (UNAVAILABLE when the database cannot be reached).
   * </pre>
   */
  public static final class ClaimServiceBlockingV2Stub
      extends io.grpc.stub.AbstractBlockingStub<ClaimServiceBlockingV2Stub> {
    private ClaimServiceBlockingV2Stub(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      super(channel, callOptions);
    }

    @java.lang.Override
    protected ClaimServiceBlockingV2Stub build(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      return new ClaimServiceBlockingV2Stub(channel, callOptions);
    }

    /**
     * <pre>
     * Claim asks whether the caller may do the work for an event. Exactly one caller per
     * attempt is told DECISION_CLAIMED and receives a claim token; a duplicate delivery is a
     * read and changes nothing.
     * </pre>
     */
    public dev.claimd.v1.ClaimResponse claim(dev.claimd.v1.ClaimRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getClaimMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Complete marks the claimed work done and stores the response to replay to duplicates.
     * Completing again with the same token succeeds and changes nothing.
     * </pre>
     */
    public dev.claimd.v1.CompleteResponse complete(dev.claimd.v1.CompleteRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getCompleteMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Heartbeat extends the holder's lease and optionally stores a checkpoint.
     * </pre>
     */
    public dev.claimd.v1.HeartbeatResponse heartbeat(dev.claimd.v1.HeartbeatRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getHeartbeatMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Retry gives the work back to be claimed again after a backoff (or retry_after).
     * </pre>
     */
    public dev.claimd.v1.RetryResponse retry(dev.claimd.v1.RetryRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getRetryMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Quarantine moves the receipt to the dead letter state at once (a permanent failure).
     * </pre>
     */
    public dev.claimd.v1.QuarantineResponse quarantine(dev.claimd.v1.QuarantineRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getQuarantineMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Get returns the receipt as the caller's tenant sees it.
     * </pre>
     */
    public dev.claimd.v1.GetResponse get(dev.claimd.v1.GetRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getGetMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * ListOrphaned lists receipts nobody is working on although they are not done: leases
     * that expired and retries that are due, oldest due first.
     * </pre>
     */
    public dev.claimd.v1.ListOrphanedResponse listOrphaned(dev.claimd.v1.ListOrphanedRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getListOrphanedMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * List pages through the caller's receipts, optionally only some states and one
     * namespace, ordered by (namespace, key) compared bytewise. With states =
     * [STATE_QUARANTINED] it lists the dead letters.
     * </pre>
     */
    public dev.claimd.v1.ListResponse list(dev.claimd.v1.ListRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getListMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Redrive gives a dead letter (a QUARANTINED receipt) another full attempt budget: it
     * becomes RETRY_WAIT, due at once, so the next Claim (or a recovery worker that finds it
     * with ListOrphaned) takes it over. The attempt number keeps rising at that claim; the
     * old holder's claim token is no longer current (ABORTED); the recovery payload,
     * checkpoint and last_error are kept. FAILED_PRECONDITION for a receipt that is not
     * QUARANTINED, NOT_FOUND for an unknown one.
     * </pre>
     */
    public dev.claimd.v1.RedriveResponse redrive(dev.claimd.v1.RedriveRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getRedriveMethod(), getCallOptions(), request);
    }
  }

  /**
   * A stub to allow clients to do limited synchronous rpc calls to service ClaimService.
   * <pre>
   * ClaimService records and answers claims on events.
   * Decisions are answers, not errors: Claim returns OK with a decision for every state.
   * Status codes report what the caller did wrong (INVALID_ARGUMENT, NOT_FOUND, ABORTED,
   * FAILED_PRECONDITION) or what went wrong (UNAVAILABLE when the database cannot be reached).
   * </pre>
   */
  public static final class ClaimServiceBlockingStub
      extends io.grpc.stub.AbstractBlockingStub<ClaimServiceBlockingStub> {
    private ClaimServiceBlockingStub(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      super(channel, callOptions);
    }

    @java.lang.Override
    protected ClaimServiceBlockingStub build(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      return new ClaimServiceBlockingStub(channel, callOptions);
    }

    /**
     * <pre>
     * Claim asks whether the caller may do the work for an event. Exactly one caller per
     * attempt is told DECISION_CLAIMED and receives a claim token; a duplicate delivery is a
     * read and changes nothing.
     * </pre>
     */
    public dev.claimd.v1.ClaimResponse claim(dev.claimd.v1.ClaimRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getClaimMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Complete marks the claimed work done and stores the response to replay to duplicates.
     * Completing again with the same token succeeds and changes nothing.
     * </pre>
     */
    public dev.claimd.v1.CompleteResponse complete(dev.claimd.v1.CompleteRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getCompleteMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Heartbeat extends the holder's lease and optionally stores a checkpoint.
     * </pre>
     */
    public dev.claimd.v1.HeartbeatResponse heartbeat(dev.claimd.v1.HeartbeatRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getHeartbeatMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Retry gives the work back to be claimed again after a backoff (or retry_after).
     * </pre>
     */
    public dev.claimd.v1.RetryResponse retry(dev.claimd.v1.RetryRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getRetryMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Quarantine moves the receipt to the dead letter state at once (a permanent failure).
     * </pre>
     */
    public dev.claimd.v1.QuarantineResponse quarantine(dev.claimd.v1.QuarantineRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getQuarantineMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Get returns the receipt as the caller's tenant sees it.
     * </pre>
     */
    public dev.claimd.v1.GetResponse get(dev.claimd.v1.GetRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getGetMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * ListOrphaned lists receipts nobody is working on although they are not done: leases
     * that expired and retries that are due, oldest due first.
     * </pre>
     */
    public dev.claimd.v1.ListOrphanedResponse listOrphaned(dev.claimd.v1.ListOrphanedRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getListOrphanedMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * List pages through the caller's receipts, optionally only some states and one
     * namespace, ordered by (namespace, key) compared bytewise. With states =
     * [STATE_QUARANTINED] it lists the dead letters.
     * </pre>
     */
    public dev.claimd.v1.ListResponse list(dev.claimd.v1.ListRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getListMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Redrive gives a dead letter (a QUARANTINED receipt) another full attempt budget: it
     * becomes RETRY_WAIT, due at once, so the next Claim (or a recovery worker that finds it
     * with ListOrphaned) takes it over. The attempt number keeps rising at that claim; the
     * old holder's claim token is no longer current (ABORTED); the recovery payload,
     * checkpoint and last_error are kept. FAILED_PRECONDITION for a receipt that is not
     * QUARANTINED, NOT_FOUND for an unknown one.
     * </pre>
     */
    public dev.claimd.v1.RedriveResponse redrive(dev.claimd.v1.RedriveRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getRedriveMethod(), getCallOptions(), request);
    }
  }

  /**
   * A stub to allow clients to do ListenableFuture-style rpc calls to service ClaimService.
   * <pre>
   * ClaimService records and answers claims on events.
   * Decisions are answers, not errors: Claim returns OK with a decision for every state.
   * Status codes report what the caller did wrong (INVALID_ARGUMENT, NOT_FOUND, ABORTED,
   * FAILED_PRECONDITION) or what went wrong (UNAVAILABLE when the database cannot be reached).
   * </pre>
   */
  public static final class ClaimServiceFutureStub
      extends io.grpc.stub.AbstractFutureStub<ClaimServiceFutureStub> {
    private ClaimServiceFutureStub(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      super(channel, callOptions);
    }

    @java.lang.Override
    protected ClaimServiceFutureStub build(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      return new ClaimServiceFutureStub(channel, callOptions);
    }

    /**
     * <pre>
     * Claim asks whether the caller may do the work for an event. Exactly one caller per
     * attempt is told DECISION_CLAIMED and receives a claim token; a duplicate delivery is a
     * read and changes nothing.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<dev.claimd.v1.ClaimResponse> claim(
        dev.claimd.v1.ClaimRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getClaimMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Complete marks the claimed work done and stores the response to replay to duplicates.
     * Completing again with the same token succeeds and changes nothing.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<dev.claimd.v1.CompleteResponse> complete(
        dev.claimd.v1.CompleteRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getCompleteMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Heartbeat extends the holder's lease and optionally stores a checkpoint.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<dev.claimd.v1.HeartbeatResponse> heartbeat(
        dev.claimd.v1.HeartbeatRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getHeartbeatMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Retry gives the work back to be claimed again after a backoff (or retry_after).
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<dev.claimd.v1.RetryResponse> retry(
        dev.claimd.v1.RetryRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getRetryMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Quarantine moves the receipt to the dead letter state at once (a permanent failure).
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<dev.claimd.v1.QuarantineResponse> quarantine(
        dev.claimd.v1.QuarantineRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getQuarantineMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Get returns the receipt as the caller's tenant sees it.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<dev.claimd.v1.GetResponse> get(
        dev.claimd.v1.GetRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getGetMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * ListOrphaned lists receipts nobody is working on although they are not done: leases
     * that expired and retries that are due, oldest due first.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<dev.claimd.v1.ListOrphanedResponse> listOrphaned(
        dev.claimd.v1.ListOrphanedRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getListOrphanedMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * List pages through the caller's receipts, optionally only some states and one
     * namespace, ordered by (namespace, key) compared bytewise. With states =
     * [STATE_QUARANTINED] it lists the dead letters.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<dev.claimd.v1.ListResponse> list(
        dev.claimd.v1.ListRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getListMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Redrive gives a dead letter (a QUARANTINED receipt) another full attempt budget: it
     * becomes RETRY_WAIT, due at once, so the next Claim (or a recovery worker that finds it
     * with ListOrphaned) takes it over. The attempt number keeps rising at that claim; the
     * old holder's claim token is no longer current (ABORTED); the recovery payload,
     * checkpoint and last_error are kept. FAILED_PRECONDITION for a receipt that is not
     * QUARANTINED, NOT_FOUND for an unknown one.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<dev.claimd.v1.RedriveResponse> redrive(
        dev.claimd.v1.RedriveRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getRedriveMethod(), getCallOptions()), request);
    }
  }

  private static final int METHODID_CLAIM = 0;
  private static final int METHODID_COMPLETE = 1;
  private static final int METHODID_HEARTBEAT = 2;
  private static final int METHODID_RETRY = 3;
  private static final int METHODID_QUARANTINE = 4;
  private static final int METHODID_GET = 5;
  private static final int METHODID_LIST_ORPHANED = 6;
  private static final int METHODID_LIST = 7;
  private static final int METHODID_REDRIVE = 8;

  private static final class MethodHandlers<Req, Resp> implements
      io.grpc.stub.ServerCalls.UnaryMethod<Req, Resp>,
      io.grpc.stub.ServerCalls.ServerStreamingMethod<Req, Resp>,
      io.grpc.stub.ServerCalls.ClientStreamingMethod<Req, Resp>,
      io.grpc.stub.ServerCalls.BidiStreamingMethod<Req, Resp> {
    private final AsyncService serviceImpl;
    private final int methodId;

    MethodHandlers(AsyncService serviceImpl, int methodId) {
      this.serviceImpl = serviceImpl;
      this.methodId = methodId;
    }

    @java.lang.Override
    @java.lang.SuppressWarnings("unchecked")
    public void invoke(Req request, io.grpc.stub.StreamObserver<Resp> responseObserver) {
      switch (methodId) {
        case METHODID_CLAIM:
          serviceImpl.claim((dev.claimd.v1.ClaimRequest) request,
              (io.grpc.stub.StreamObserver<dev.claimd.v1.ClaimResponse>) responseObserver);
          break;
        case METHODID_COMPLETE:
          serviceImpl.complete((dev.claimd.v1.CompleteRequest) request,
              (io.grpc.stub.StreamObserver<dev.claimd.v1.CompleteResponse>) responseObserver);
          break;
        case METHODID_HEARTBEAT:
          serviceImpl.heartbeat((dev.claimd.v1.HeartbeatRequest) request,
              (io.grpc.stub.StreamObserver<dev.claimd.v1.HeartbeatResponse>) responseObserver);
          break;
        case METHODID_RETRY:
          serviceImpl.retry((dev.claimd.v1.RetryRequest) request,
              (io.grpc.stub.StreamObserver<dev.claimd.v1.RetryResponse>) responseObserver);
          break;
        case METHODID_QUARANTINE:
          serviceImpl.quarantine((dev.claimd.v1.QuarantineRequest) request,
              (io.grpc.stub.StreamObserver<dev.claimd.v1.QuarantineResponse>) responseObserver);
          break;
        case METHODID_GET:
          serviceImpl.get((dev.claimd.v1.GetRequest) request,
              (io.grpc.stub.StreamObserver<dev.claimd.v1.GetResponse>) responseObserver);
          break;
        case METHODID_LIST_ORPHANED:
          serviceImpl.listOrphaned((dev.claimd.v1.ListOrphanedRequest) request,
              (io.grpc.stub.StreamObserver<dev.claimd.v1.ListOrphanedResponse>) responseObserver);
          break;
        case METHODID_LIST:
          serviceImpl.list((dev.claimd.v1.ListRequest) request,
              (io.grpc.stub.StreamObserver<dev.claimd.v1.ListResponse>) responseObserver);
          break;
        case METHODID_REDRIVE:
          serviceImpl.redrive((dev.claimd.v1.RedriveRequest) request,
              (io.grpc.stub.StreamObserver<dev.claimd.v1.RedriveResponse>) responseObserver);
          break;
        default:
          throw new AssertionError();
      }
    }

    @java.lang.Override
    @java.lang.SuppressWarnings("unchecked")
    public io.grpc.stub.StreamObserver<Req> invoke(
        io.grpc.stub.StreamObserver<Resp> responseObserver) {
      switch (methodId) {
        default:
          throw new AssertionError();
      }
    }
  }

  public static final io.grpc.ServerServiceDefinition bindService(AsyncService service) {
    return io.grpc.ServerServiceDefinition.builder(getServiceDescriptor())
        .addMethod(
          getClaimMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              dev.claimd.v1.ClaimRequest,
              dev.claimd.v1.ClaimResponse>(
                service, METHODID_CLAIM)))
        .addMethod(
          getCompleteMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              dev.claimd.v1.CompleteRequest,
              dev.claimd.v1.CompleteResponse>(
                service, METHODID_COMPLETE)))
        .addMethod(
          getHeartbeatMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              dev.claimd.v1.HeartbeatRequest,
              dev.claimd.v1.HeartbeatResponse>(
                service, METHODID_HEARTBEAT)))
        .addMethod(
          getRetryMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              dev.claimd.v1.RetryRequest,
              dev.claimd.v1.RetryResponse>(
                service, METHODID_RETRY)))
        .addMethod(
          getQuarantineMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              dev.claimd.v1.QuarantineRequest,
              dev.claimd.v1.QuarantineResponse>(
                service, METHODID_QUARANTINE)))
        .addMethod(
          getGetMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              dev.claimd.v1.GetRequest,
              dev.claimd.v1.GetResponse>(
                service, METHODID_GET)))
        .addMethod(
          getListOrphanedMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              dev.claimd.v1.ListOrphanedRequest,
              dev.claimd.v1.ListOrphanedResponse>(
                service, METHODID_LIST_ORPHANED)))
        .addMethod(
          getListMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              dev.claimd.v1.ListRequest,
              dev.claimd.v1.ListResponse>(
                service, METHODID_LIST)))
        .addMethod(
          getRedriveMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              dev.claimd.v1.RedriveRequest,
              dev.claimd.v1.RedriveResponse>(
                service, METHODID_REDRIVE)))
        .build();
  }

  private static abstract class ClaimServiceBaseDescriptorSupplier
      implements io.grpc.protobuf.ProtoFileDescriptorSupplier, io.grpc.protobuf.ProtoServiceDescriptorSupplier {
    ClaimServiceBaseDescriptorSupplier() {}

    @java.lang.Override
    public com.google.protobuf.Descriptors.FileDescriptor getFileDescriptor() {
      return dev.claimd.v1.ClaimsProto.getDescriptor();
    }

    @java.lang.Override
    public com.google.protobuf.Descriptors.ServiceDescriptor getServiceDescriptor() {
      return getFileDescriptor().findServiceByName("ClaimService");
    }
  }

  private static final class ClaimServiceFileDescriptorSupplier
      extends ClaimServiceBaseDescriptorSupplier {
    ClaimServiceFileDescriptorSupplier() {}
  }

  private static final class ClaimServiceMethodDescriptorSupplier
      extends ClaimServiceBaseDescriptorSupplier
      implements io.grpc.protobuf.ProtoMethodDescriptorSupplier {
    private final java.lang.String methodName;

    ClaimServiceMethodDescriptorSupplier(java.lang.String methodName) {
      this.methodName = methodName;
    }

    @java.lang.Override
    public com.google.protobuf.Descriptors.MethodDescriptor getMethodDescriptor() {
      return getServiceDescriptor().findMethodByName(methodName);
    }
  }

  private static volatile io.grpc.ServiceDescriptor serviceDescriptor;

  public static io.grpc.ServiceDescriptor getServiceDescriptor() {
    io.grpc.ServiceDescriptor result = serviceDescriptor;
    if (result == null) {
      synchronized (ClaimServiceGrpc.class) {
        result = serviceDescriptor;
        if (result == null) {
          serviceDescriptor = result = io.grpc.ServiceDescriptor.newBuilder(SERVICE_NAME)
              .setSchemaDescriptor(new ClaimServiceFileDescriptorSupplier())
              .addMethod(getClaimMethod())
              .addMethod(getCompleteMethod())
              .addMethod(getHeartbeatMethod())
              .addMethod(getRetryMethod())
              .addMethod(getQuarantineMethod())
              .addMethod(getGetMethod())
              .addMethod(getListOrphanedMethod())
              .addMethod(getListMethod())
              .addMethod(getRedriveMethod())
              .build();
        }
      }
    }
    return result;
  }
}
