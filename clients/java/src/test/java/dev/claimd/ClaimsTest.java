package dev.claimd;

import static dev.claimd.Env.key;
import static dev.claimd.Env.sha256;
import static dev.claimd.Env.utf8;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.claimd.v1.Receipt;
import dev.claimd.v1.State;
import java.time.Duration;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/** Every decision Claim answers, and the settles of a lease, on both stores. */
class ClaimsTest {
  private static final String NS = "java-client-tests";

  @ParameterizedTest
  @EnumSource(Env.Store.class)
  void theFirstCallerIsClaimedAndLaterOnesGetTheStoredResponse(Env.Store store) {
    try (Claims claims = Claims.connect(store.address())) {
      String k = key("done");
      ClaimResult first = claims.claim(NS, k, sha256("a"));
      assertEquals(Decision.CLAIMED, first.decision());
      assertEquals(1, first.receipt().getAttempt());
      try (Lease lease = first.lease().orElseThrow()) {
        Receipt done = lease.complete(utf8("the answer"));
        assertEquals(State.STATE_COMPLETED, done.getState());
      }
      ClaimResult again = claims.claim(NS, k, sha256("a"));
      assertEquals(Decision.COMPLETED, again.decision());
      assertTrue(again.lease().isEmpty());
      assertArrayEquals(utf8("the answer"), again.response());
      assertEquals("the answer", again.receipt().getResponse().toStringUtf8());
    }
  }

  @ParameterizedTest
  @EnumSource(Env.Store.class)
  void aSecondCallerIsToldInFlightWhileTheLeaseIsHeld(Env.Store store) {
    try (Claims claims = Claims.connect(store.address())) {
      String k = key("busy");
      try (Lease lease = claims.claim(NS, k, sha256("a")).lease().orElseThrow()) {
        ClaimResult second = claims.claim(NS, k, sha256("a"));
        assertEquals(Decision.IN_FLIGHT, second.decision());
        assertTrue(second.lease().isEmpty());
        assertTrue(second.receipt().hasLeaseExpiresAt());
        lease.complete(new byte[0]);
      }
    }
  }

  @ParameterizedTest
  @EnumSource(Env.Store.class)
  void aRetriedClaimIsScheduledUntilItsRetryIsDue(Env.Store store) {
    try (Claims claims = Claims.connect(store.address())) {
      String k = key("retry");
      try (Lease lease = claims.claim(NS, k, sha256("a")).lease().orElseThrow()) {
        Receipt waiting = lease.retry("upstream 503", Duration.ofSeconds(60));
        assertEquals(State.STATE_RETRY_WAIT, waiting.getState());
      }
      ClaimResult next = claims.claim(NS, k, sha256("a"));
      assertEquals(Decision.RETRY_SCHEDULED, next.decision());
      assertEquals("upstream 503", next.receipt().getLastError());
      assertTrue(next.receipt().hasNextAttemptAt());
    }
  }

  @ParameterizedTest
  @EnumSource(Env.Store.class)
  void aQuarantinedEventIsADeadLetter(Env.Store store) {
    try (Claims claims = Claims.connect(store.address())) {
      String k = key("poison");
      try (Lease lease = claims.claim(NS, k, sha256("a")).lease().orElseThrow()) {
        assertEquals(State.STATE_QUARANTINED, lease.quarantine("bad payload").getState());
      }
      ClaimResult next = claims.claim(NS, k, sha256("a"));
      assertEquals(Decision.QUARANTINED, next.decision());
      assertEquals("bad payload", next.receipt().getLastError());
    }
  }

  @ParameterizedTest
  @EnumSource(Env.Store.class)
  void theSameKeyWithAnotherFingerprintIsAConflict(Env.Store store) {
    try (Claims claims = Claims.connect(store.address())) {
      String k = key("conflict");
      try (Lease lease = claims.claim(NS, k, sha256("a")).lease().orElseThrow()) {
        assertEquals(Decision.CONFLICT, claims.claim(NS, k, sha256("b")).decision());
        lease.complete(new byte[0]);
      }
    }
  }

  @ParameterizedTest
  @EnumSource(Env.Store.class)
  void aLeaseSettlesOnlyOnce(Env.Store store) {
    try (Claims claims = Claims.connect(store.address())) {
      String k = key("once");
      Lease lease = claims.claim(NS, k, sha256("a")).lease().orElseThrow();
      assertFalse(lease.toString().contains(k));
      lease.complete(utf8("first"));
      assertTrue(lease.isSettled());
      IllegalStateException twice =
          org.junit.jupiter.api.Assertions.assertThrows(IllegalStateException.class,
              () -> lease.complete(utf8("second")));
      assertFalse(twice.getMessage().contains(k));
      org.junit.jupiter.api.Assertions.assertThrows(IllegalStateException.class,
          () -> lease.retry("late"));
      org.junit.jupiter.api.Assertions.assertThrows(IllegalStateException.class,
          () -> lease.quarantine("late"));
      lease.close();
      assertArrayEquals(utf8("first"), claims.claim(NS, k, sha256("a")).response());
    }
  }

  @ParameterizedTest
  @EnumSource(Env.Store.class)
  void closingAnUnsettledLeaseGivesTheClaimBack(Env.Store store) {
    try (Claims claims = Claims.connect(store.address())) {
      String k = key("closed");
      try (Lease lease = claims.claim(NS, k, sha256("a")).lease().orElseThrow()) {
        assertFalse(lease.isSettled());
      }
      Receipt receipt = claims.get(NS, k);
      assertEquals(State.STATE_RETRY_WAIT, receipt.getState());
      assertEquals(Lease.CLOSED_UNSETTLED, receipt.getLastError());
    }
  }

  @ParameterizedTest
  @EnumSource(Env.Store.class)
  void aCheckpointIsKeptWithTheReceipt(Env.Store store) {
    try (Claims claims = Claims.connect(store.address())) {
      String k = key("checkpoint");
      try (Lease lease = claims.claim(NS, k, sha256("a")).lease().orElseThrow()) {
        assertEquals("page 3", lease.checkpoint(utf8("page 3")).getCheckpoint().toStringUtf8());
        lease.complete(new byte[0]);
      }
    }
  }

  @ParameterizedTest
  @EnumSource(Env.Store.class)
  void heartbeatsKeepAShortLeaseAlivePastItsLength(Env.Store store) throws Exception {
    try (Claims claims = Claims.connect(store.address())) {
      String k = key("heartbeat");
      ClaimOptions oneSecond = ClaimOptions.builder().lease(Duration.ofSeconds(1)).build();
      try (Lease lease = claims.claim(NS, k, sha256("a"), oneSecond).lease().orElseThrow()) {
        Thread.sleep(2_500);
        assertEquals(Decision.IN_FLIGHT, claims.claim(NS, k, sha256("a")).decision());
        assertFalse(lease.isLost());
        lease.complete(utf8("kept"));
      }
    }
  }

  @ParameterizedTest
  @EnumSource(Env.Store.class)
  void aTakeoverIsReportedThroughIsLost(Env.Store store) throws Exception {
    try (Claims claims = Claims.connect(store.address())) {
      String k = key("takeover");
      ClaimOptions slowBeats = ClaimOptions.builder()
          .lease(Duration.ofSeconds(1)).heartbeatInterval(Duration.ofMillis(2_000)).build();
      try (Lease lease = claims.claim(NS, k, sha256("a"), slowBeats).lease().orElseThrow()) {
        Thread.sleep(1_300);
        ClaimResult taker = claims.claim(NS, k, sha256("a"));
        assertEquals(Decision.CLAIMED, taker.decision());
        assertEquals(2, taker.receipt().getAttempt());
        long until = System.nanoTime() + Duration.ofSeconds(10).toNanos();
        while (!lease.isLost() && System.nanoTime() < until) {
          Thread.sleep(50);
        }
        assertTrue(lease.isLost());
        ClaimdException late = org.junit.jupiter.api.Assertions.assertThrows(
            ClaimdException.class, () -> lease.complete(utf8("too late")));
        assertTrue(late.code() == io.grpc.Status.Code.ABORTED
            || late.code() == io.grpc.Status.Code.FAILED_PRECONDITION, late.code().toString());
        assertFalse(late.getMessage().contains(k));
        taker.lease().orElseThrow().complete(utf8("the taker's"));
      }
    }
  }

  @ParameterizedTest
  @EnumSource(Env.Store.class)
  void aWaitingClaimGetsTheResponseOnceTheHolderCompletes(Env.Store store) throws Exception {
    try (Claims claims = Claims.connect(store.address())) {
      String k = key("wait");
      Lease lease = claims.claim(NS, k, sha256("a")).lease().orElseThrow();
      Thread holder = new Thread(() -> {
        try {
          Thread.sleep(500);
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
        }
        lease.complete(utf8("worth the wait"));
      });
      holder.start();
      ClaimOptions wait = ClaimOptions.builder().wait(Duration.ofSeconds(10)).build();
      ClaimResult waited = claims.claim(NS, k, sha256("a"), wait);
      holder.join();
      assertEquals(Decision.COMPLETED, waited.decision());
      assertArrayEquals(utf8("worth the wait"), waited.response());
    }
  }
}
