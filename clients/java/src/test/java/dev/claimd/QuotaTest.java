package dev.claimd;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.protobuf.StatusProto;
import java.time.Duration;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/** A tenant quota of claimd (docs/DESIGN.md §5.15) through the client, on the quota claimd. */
class QuotaTest {
  @Test
  void aClaimOverTheTenantQuotaIsAQuotaExceptionWithTheQuotaAndAPositiveRetryDelay() {
    try (Claims claims = Claims.connect(Env.quotaAddress())) {
      QuotaException refused = Env.spendTheQuota(claims);
      assertEquals("claims_per_second", refused.quota());
      assertTrue(refused.retryAfter().compareTo(Duration.ZERO) > 0, refused.retryAfter()::toString);
      assertInstanceOf(ClaimdException.class, refused);
      assertEquals(Status.Code.RESOURCE_EXHAUSTED, refused.code());
      assertEquals("Claim", refused.rpc());
      // The next Claim too, as any ClaimdException a caller already catches.
      ClaimdException again = assertThrows(ClaimdException.class,
          () -> claims.claim("java-quota-tests", Env.key("again"), Env.sha256("again")));
      assertInstanceOf(QuotaException.class, again);
    }
  }

  @Test
  void aResourceExhaustedWithoutQuotaDetailsIsAPlainClaimdException() {
    ClaimdException tooLarge = ClaimdException.of("Claim",
        Status.RESOURCE_EXHAUSTED.withDescription("message larger than max").asRuntimeException());
    assertFalse(tooLarge instanceof QuotaException, tooLarge::toString);
    assertEquals(Status.Code.RESOURCE_EXHAUSTED, tooLarge.code());
  }

  /**
   * A RESOURCE_EXHAUSTED that is not a quota, answered by a real claimd: a Claim whose request is
   * over claimd's request limit (256 KiB, docs/DESIGN.md §2.8; here a 300 KiB recovery payload)
   * is refused from its length prefix with no details. It stays a plain ClaimdException.
   */
  @ParameterizedTest
  @EnumSource(Env.Store.class)
  void aRequestOverClaimdsSizeLimitIsAPlainClaimdExceptionNotAQuotaException(Env.Store store) {
    try (Claims claims = Claims.connect(store.address())) {
      assertRefusedPlain(claims);
    }
  }

  /** The same on the quota claimd once its tenant is over its Claims quota. */
  @Test
  void aRequestOverClaimdsSizeLimitIsPlainEvenForATenantOverItsQuota() {
    try (Claims claims = Claims.connect(Env.quotaAddress())) {
      Env.spendTheQuota(claims);
      assertRefusedPlain(claims);
    }
  }

  private static void assertRefusedPlain(Claims claims) {
    ClaimOptions tooLarge = ClaimOptions.builder().recoveryPayload(new byte[300 * 1024]).build();
    ClaimdException e = assertThrows(ClaimdException.class,
        () -> claims.claim("java-quota-tests", Env.key("too-large"), Env.sha256("b"), tooLarge));
    assertFalse(e instanceof QuotaException, e::toString);
    assertEquals(Status.Code.RESOURCE_EXHAUSTED, e.code());
    assertEquals("Claim", e.rpc());
    StatusRuntimeException cause = assertInstanceOf(StatusRuntimeException.class, e.getCause());
    com.google.rpc.Status details = StatusProto.fromThrowable(cause);
    assertTrue(details == null || details.getDetailsCount() == 0,
        () -> "claimd sent details with the size refusal: " + details);
  }
}
