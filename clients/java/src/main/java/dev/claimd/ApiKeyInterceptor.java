package dev.claimd;

import io.grpc.CallOptions;
import io.grpc.Channel;
import io.grpc.ClientCall;
import io.grpc.ClientInterceptor;
import io.grpc.ForwardingClientCall;
import io.grpc.Metadata;
import io.grpc.MethodDescriptor;

/** Sends {@code authorization: Bearer <key>} with every call. */
final class ApiKeyInterceptor implements ClientInterceptor {
  private static final Metadata.Key<String> AUTHORIZATION =
      Metadata.Key.of("authorization", Metadata.ASCII_STRING_MARSHALLER);

  private final String header;

  ApiKeyInterceptor(String apiKey) {
    this.header = "Bearer " + apiKey;
  }

  @Override
  public <Q, R> ClientCall<Q, R> interceptCall(
      MethodDescriptor<Q, R> method, CallOptions options, Channel next) {
    return new ForwardingClientCall.SimpleForwardingClientCall<Q, R>(next.newCall(method, options)) {
      @Override
      public void start(Listener<R> listener, Metadata headers) {
        headers.put(AUTHORIZATION, header);
        super.start(listener, headers);
      }
    };
  }

  @Override
  public String toString() {
    return "ApiKeyInterceptor";
  }
}
