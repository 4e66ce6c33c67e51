package dev.claimd;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.claimd.v1.ClaimRequest;
import dev.claimd.v1.ClaimResponse;
import dev.claimd.v1.ClaimServiceGrpc;
import dev.claimd.v1.HeartbeatRequest;
import dev.claimd.v1.HeartbeatResponse;
import io.grpc.Grpc;
import io.grpc.InsecureServerCredentials;
import io.grpc.Server;
import io.grpc.stub.StreamObserver;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

/** A stand-in claimd whose Heartbeats take 2 s: the leases of one client must not starve. */
class SlowClaimdTest {
  /** Answers every Claim CLAIMED; counts Heartbeats per key and answers each after 2 s. */
  static final class SlowHeartbeats extends ClaimServiceGrpc.ClaimServiceImplBase {
    final Map<String, AtomicInteger> beats = new ConcurrentHashMap<>();

    @Override
    public void claim(ClaimRequest request, StreamObserver<ClaimResponse> answer) {
      answer.onNext(ClaimResponse.newBuilder()
          .setDecision(dev.claimd.v1.Decision.DECISION_CLAIMED)
          .setClaimToken("token-" + request.getKey()).build());
      answer.onCompleted();
    }

    @Override
    public void heartbeat(HeartbeatRequest request, StreamObserver<HeartbeatResponse> answer) {
      beats.computeIfAbsent(request.getKey(), k -> new AtomicInteger()).incrementAndGet();
      try {
        Thread.sleep(2000);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
      answer.onNext(HeartbeatResponse.getDefaultInstance());
      answer.onCompleted();
    }
  }

  @Test
  void twentyLeasesOnASlowClaimdEachKeepHeartbeatingWithoutWaitingForTheOthers()
      throws Exception {
    SlowHeartbeats service = new SlowHeartbeats();
    Server server = Grpc.newServerBuilderForPort(0, InsecureServerCredentials.create())
        .addService(service).build().start();
    try (Claims claims = Claims.connect("127.0.0.1:" + server.getPort())) {
      ClaimOptions options = ClaimOptions.builder().lease(Duration.ofSeconds(1))
          .heartbeatInterval(Duration.ofMillis(200)).build();
      List<Lease> leases = new ArrayList<>();
      for (int i = 0; i < 20; i++) {
        leases.add(claims.claim("ns", "key-" + i, new byte[32], options).lease().orElseThrow());
      }
      Thread.sleep(1500);
      assertEquals(20, service.beats.size(), "leases that sent a heartbeat: " + service.beats);
      for (Map.Entry<String, AtomicInteger> e : service.beats.entrySet()) {
        // Each beat gives up after its 200 ms deadline; the next one starts at the next tick.
        assertTrue(e.getValue().get() >= 2, e.getKey() + " sent " + e.getValue() + " beats");
      }
      for (Lease lease : leases) {
        assertFalse(lease.isLost());
      }
    } finally {
      server.shutdownNow();
    }
  }
}
