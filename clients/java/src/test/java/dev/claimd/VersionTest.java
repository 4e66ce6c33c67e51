package dev.claimd;

import static org.junit.jupiter.api.Assertions.assertEquals;

import com.google.protobuf.Descriptors.MethodDescriptor;
import com.google.protobuf.Descriptors.ServiceDescriptor;
import dev.claimd.v1.ClaimsProto;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;

/** The package follows the proto it ships; its method descriptors follow the service. */
class VersionTest {
  @Test
  void theVersionIsTheProtosVersion() throws Exception {
    String proto = Files.readString(Path.of("../../proto/VERSION"), StandardCharsets.UTF_8).trim();
    assertEquals(proto, Version.VERSION);
    assertEquals(proto, System.getProperty("claimd.pom.version"));
  }

  @Test
  void theMethodDescriptorsMatchTheServiceInTheProto() {
    ServiceDescriptor service = ClaimsProto.getDescriptor().findServiceByName("ClaimService");
    assertEquals(ClaimServiceMethods.SERVICE, service.getFullName());
    for (io.grpc.MethodDescriptor<?, ?> method : List.of(ClaimServiceMethods.CLAIM,
        ClaimServiceMethods.COMPLETE, ClaimServiceMethods.HEARTBEAT, ClaimServiceMethods.RETRY,
        ClaimServiceMethods.QUARANTINE, ClaimServiceMethods.GET)) {
      MethodDescriptor proto = service.findMethodByName(method.getBareMethodName());
      assertEquals(proto.getInputType().getFullName(),
          ((io.grpc.MethodDescriptor.ReflectableMarshaller<?>) method.getRequestMarshaller())
              .getMessageClass().getSimpleName().replaceFirst("^", "claimd.v1."));
      assertEquals(proto.getOutputType().getFullName(),
          ((io.grpc.MethodDescriptor.ReflectableMarshaller<?>) method.getResponseMarshaller())
              .getMessageClass().getSimpleName().replaceFirst("^", "claimd.v1."));
    }
  }
}
