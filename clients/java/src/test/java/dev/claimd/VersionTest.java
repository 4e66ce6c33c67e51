package dev.claimd;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;

import com.google.protobuf.Descriptors.ServiceDescriptor;
import dev.claimd.v1.ClaimServiceGrpc;
import dev.claimd.v1.ClaimsProto;
import io.grpc.MethodDescriptor;
import io.grpc.protobuf.ProtoServiceDescriptorSupplier;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.stream.Collectors;
import org.junit.jupiter.api.Test;

/** The package follows the proto it ships; the generated stub is the service in it. */
class VersionTest {
  @Test
  void theVersionIsTheProtosVersion() throws Exception {
    String proto = Files.readString(Path.of("../../proto/VERSION"), StandardCharsets.UTF_8).trim();
    assertEquals(proto, Version.VERSION);
    assertEquals(proto, System.getProperty("claimd.pom.version"));
  }

  @Test
  void theGeneratedStubIsClaimdV1ClaimService() {
    io.grpc.ServiceDescriptor stub = ClaimServiceGrpc.getServiceDescriptor();
    assertEquals("claimd.v1.ClaimService", ClaimServiceGrpc.SERVICE_NAME);
    assertEquals("claimd.v1.ClaimService", stub.getName());
    // Generated from the same proto as the committed messages: its schema is their service.
    ServiceDescriptor proto = ClaimsProto.getDescriptor().findServiceByName("ClaimService");
    assertSame(proto,
        ((ProtoServiceDescriptorSupplier) stub.getSchemaDescriptor()).getServiceDescriptor());
    assertEquals(
        proto.getMethods().stream()
            .map(m -> MethodDescriptor.generateFullMethodName(proto.getFullName(), m.getName()))
            .collect(Collectors.toSet()),
        stub.getMethods().stream().map(MethodDescriptor::getFullMethodName)
            .collect(Collectors.toSet()));
    // The methods the client calls are unary.
    for (MethodDescriptor<?, ?> method : List.of(ClaimServiceGrpc.getClaimMethod(),
        ClaimServiceGrpc.getCompleteMethod(), ClaimServiceGrpc.getHeartbeatMethod(),
        ClaimServiceGrpc.getRetryMethod(), ClaimServiceGrpc.getQuarantineMethod(),
        ClaimServiceGrpc.getGetMethod())) {
      assertEquals(MethodDescriptor.MethodType.UNARY, method.getType(), method.getFullMethodName());
    }
  }
}
