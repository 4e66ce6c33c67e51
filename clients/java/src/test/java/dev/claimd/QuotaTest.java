package dev.claimd;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.grpc.Status;
import java.time.Duration;
import org.junit.jupiter.api.Test;

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
}
