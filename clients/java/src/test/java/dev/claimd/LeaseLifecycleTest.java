package dev.claimd;

import static dev.claimd.Env.key;
import static dev.claimd.Env.sha256;
import static dev.claimd.Env.utf8;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.claimd.v1.Receipt;
import dev.claimd.v1.State;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/** Settles that fail, heartbeats racing settles, a closed client, redaction. */
class LeaseLifecycleTest {
  static final String NS = "java-lease-tests";

  @ParameterizedTest
  @EnumSource(Env.Store.class)
  void closeAfterAFailedSettleGivesTheClaimBack(Env.Store store) {
    try (Claims claims = Claims.connect(store.address())) {
      String k = key("failed-settle");
      Lease lease = claims.claim(NS, k, sha256("a")).lease().orElseThrow();
      // Past claimd's 64 KiB limit: INVALID_ARGUMENT, not a lost claim.
      ClaimdException tooLarge =
          assertThrows(ClaimdException.class, () -> lease.complete(new byte[70_000]));
      assertEquals(Status.Code.INVALID_ARGUMENT, tooLarge.code());
      assertFalse(lease.isSettled());
      assertFalse(lease.isLost());
      lease.close();
      Receipt receipt = claims.get(NS, k);
      assertEquals(State.STATE_RETRY_WAIT, receipt.getState());
      assertEquals(Lease.CLOSED_UNSETTLED, receipt.getLastError());
    }
  }

  @ParameterizedTest
  @EnumSource(Env.Store.class)
  void aLeaseWhoseSettleFailedCanStillBeCompleted(Env.Store store) {
    try (Claims claims = Claims.connect(store.address())) {
      String k = key("settle-again");
      try (Lease lease = claims.claim(NS, k, sha256("a")).lease().orElseThrow()) {
        assertThrows(ClaimdException.class, () -> lease.complete(new byte[70_000]));
        lease.complete(utf8("done"));
        assertTrue(lease.isSettled());
      }
      assertEquals(State.STATE_COMPLETED, claims.get(NS, k).getState());
    }
  }

  @ParameterizedTest
  @EnumSource(Env.Store.class)
  void completeWithNullThrowsNullPointerExceptionAndLeavesTheLeaseOpen(Env.Store store) {
    try (Claims claims = Claims.connect(store.address())) {
      String k = key("null-complete");
      try (Lease lease = claims.claim(NS, k, sha256("a")).lease().orElseThrow()) {
        assertThrows(NullPointerException.class, () -> lease.complete(null));
        assertFalse(lease.isSettled());
        lease.complete(utf8("ok"));
      }
      assertEquals(State.STATE_COMPLETED, claims.get(NS, k).getState());
    }
  }

  @ParameterizedTest
  @EnumSource(Env.Store.class)
  void aLeaseIsNeverLostAfterASuccessfulCompleteEvenWithMillisecondHeartbeats(Env.Store store)
      throws Exception {
    try (Claims claims = Claims.connect(store.address())) {
      ClaimOptions fast = ClaimOptions.builder().heartbeatInterval(Duration.ofMillis(1)).build();
      for (int i = 0; i < 10; i++) {
        Lease lease = claims.claim(NS, key("race"), sha256("a"), fast).lease().orElseThrow();
        Thread.sleep(15);
        lease.complete(utf8("done"));
        Thread.sleep(30);
        assertFalse(lease.isLost(), "lost after a successful complete, round " + i);
        assertTrue(lease.isSettled());
        lease.close();
      }
    }
  }

  @ParameterizedTest
  @EnumSource(Env.Store.class)
  void twentyOneSecondLeasesOnOneClientAllOutliveTheirLease(Env.Store store) throws Exception {
    try (Claims claims = Claims.connect(store.address())) {
      ClaimOptions shortLease = ClaimOptions.builder().lease(Duration.ofSeconds(1)).build();
      List<Lease> leases = new ArrayList<>();
      for (int i = 0; i < 20; i++) {
        leases.add(claims.claim(NS, key("many"), sha256("a"), shortLease).lease().orElseThrow());
      }
      Thread.sleep(2500);
      for (Lease lease : leases) {
        assertFalse(lease.isLost());
        lease.complete(utf8("done"));
        lease.close();
      }
    }
  }

  @Test
  void aHeartbeatsDeadlineIsTheIntervalOrTheCallTimeoutWhicheverIsSmaller() {
    try (Claims claims = Claims.builder("127.0.0.1:1").callTimeout(Duration.ofSeconds(2))
        .build()) {
      Object lock = new Object();
      Heartbeats shortBeats = new Heartbeats(claims, Duration.ofMillis(300), null, lock,
          () -> false, code -> { });
      Heartbeats longBeats = new Heartbeats(claims, Duration.ofSeconds(10), null, lock,
          () -> false, code -> { });
      assertEquals(Duration.ofMillis(300), shortBeats.deadline());
      assertEquals(Duration.ofSeconds(2), longBeats.deadline());
    }
  }

  @Test
  void aClaimOnAClosedClientThrowsIllegalStateExceptionWithoutCallingClaimd() {
    Claims claims = Claims.connect("127.0.0.1:1");
    claims.close();
    assertThrows(IllegalStateException.class, () -> claims.claim(NS, "k", sha256("a")));
    assertThrows(IllegalStateException.class, () -> claims.get(NS, "k"));
  }

  @Test
  void aClaimdExceptionMessageNeverHoldsTheSecretsItWasGiven() {
    String key = "order-7f3a-secret-key";
    String token = "tok_9b1c-secret-token";
    StatusRuntimeException cause = Status.FAILED_PRECONDITION
        .withDescription("claim token " + token + " is not current for key " + key)
        .asRuntimeException();
    ClaimdException e = new ClaimdException("Complete", cause, key, token);
    assertFalse(e.getMessage().contains(key), e.getMessage());
    assertFalse(e.getMessage().contains(token), e.getMessage());
    assertTrue(e.getMessage().startsWith("claimd Complete: FAILED_PRECONDITION: claim token "),
        e.getMessage());
    assertEquals(Status.Code.FAILED_PRECONDITION, e.code());
  }
}
