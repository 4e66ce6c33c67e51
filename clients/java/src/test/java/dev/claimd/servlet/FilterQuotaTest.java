package dev.claimd.servlet;

import static dev.claimd.servlet.IdempotencyFilterTest.NS;
import static dev.claimd.servlet.IdempotencyFilterTest.created;
import static dev.claimd.servlet.IdempotencyFilterTest.key;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.claimd.Claims;
import dev.claimd.Env;
import java.net.http.HttpResponse;
import org.junit.jupiter.api.Test;

/**
 * The filter when claimd refuses the Claim by a tenant quota, through a real Jetty on the quota
 * claimd (its one Claim spent first): 503 with Retry-After and the handler does not run.
 */
class FilterQuotaTest {
  @Test
  void aClaimRefusedByTheTenantQuotaIs503WithRetryAfterAndTheHandlerDoesNotRun() throws Exception {
    try (Claims claims = Claims.connect(Env.quotaAddress());
        App app = new App(IdempotencyFilter.builder(claims, NS).build(), created())) {
      Env.spendTheQuota(claims);
      HttpResponse<String> refused = app.post("/orders", key(), "{\"item\":\"lamp\"}");
      assertEquals(503, refused.statusCode(), refused.body());
      assertEquals("application/problem+json",
          refused.headers().firstValue("Content-Type").orElse(""));
      assertTrue(refused.body().contains("\"code\":\"idempotency-quota-exceeded\""),
          refused.body());
      String retryAfter = refused.headers().firstValue("Retry-After").orElse("");
      assertTrue(retryAfter.matches("[1-9][0-9]*"), "Retry-After: " + retryAfter);
      assertEquals(0, app.runs.get());
    }
  }
}
