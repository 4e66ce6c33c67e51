package dev.claimd.servlet;

import static dev.claimd.servlet.IdempotencyFilterTest.NS;
import static dev.claimd.servlet.IdempotencyFilterTest.created;
import static dev.claimd.servlet.IdempotencyFilterTest.key;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.claimd.Claims;
import dev.claimd.Decision;
import dev.claimd.Env;
import dev.claimd.Lease;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * How the filter answers receipts another process left behind (claimed here through the
 * client under the filter's own claim key and fingerprint), on both stores.
 */
class FilterDecisionsTest {
  /** Claims the receipt the filter would claim for {@code POST /orders {}} with {@code key}. */
  private static Lease claimAsTheFilter(Claims claims, String key) {
    byte[] fingerprint = RequestIdentity.fingerprint("POST", "/orders",
        "{}".getBytes(StandardCharsets.UTF_8), "application/json", true);
    var result = claims.claim(NS, RequestIdentity.claimKey(DefaultScope.ANONYMOUS, key),
        fingerprint);
    assertEquals(Decision.CLAIMED, result.decision());
    return result.lease().orElseThrow();
  }

  @ParameterizedTest
  @EnumSource(Env.Store.class)
  void aRetryNotDueWithinTheWaitIs503WithRetryAfter(Env.Store store) throws Exception {
    try (Claims claims = Claims.connect(store.address());
        App app = new App(IdempotencyFilter.builder(claims, NS).build(), created())) {
      String key = key();
      try (Lease lease = claimAsTheFilter(claims, key)) {
        lease.retry("failed elsewhere"); // the namespace's backoff: a minute
      }
      HttpResponse<String> r = app.post("/orders", key, "{}");
      assertEquals(503, r.statusCode());
      assertTrue(r.body().contains("idempotency-retry-scheduled"));
      assertTrue(Integer.parseInt(r.headers().firstValue("Retry-After").orElse("0")) > 10);
      assertEquals(0, app.runs.get());
    }
  }

  @ParameterizedTest
  @EnumSource(Env.Store.class)
  void aQuarantinedKeyIs422UsedUp(Env.Store store) throws Exception {
    try (Claims claims = Claims.connect(store.address());
        App app = new App(IdempotencyFilter.builder(claims, NS).build(), created())) {
      String key = key();
      try (Lease lease = claimAsTheFilter(claims, key)) {
        lease.quarantine("poison");
      }
      HttpResponse<String> r = app.post("/orders", key, "{}");
      assertEquals(422, r.statusCode());
      assertTrue(r.body().contains("idempotency-key-expired"));
      assertEquals(0, app.runs.get());
    }
  }

  @ParameterizedTest
  @EnumSource(Env.Store.class)
  void aKeyCompletedWithoutAResponseIs422UsedUp(Env.Store store) throws Exception {
    try (Claims claims = Claims.connect(store.address());
        App app = new App(IdempotencyFilter.builder(claims, NS).build(), created())) {
      String key = key();
      try (Lease lease = claimAsTheFilter(claims, key)) {
        lease.complete(new byte[0]);
      }
      HttpResponse<String> r = app.post("/orders", key, "{}");
      assertEquals(422, r.statusCode());
      assertTrue(r.body().contains("idempotency-key-expired"));
      assertEquals(0, app.runs.get());
    }
  }

  @ParameterizedTest
  @EnumSource(Env.Store.class)
  void aResponseStoredByAnotherProcessIsReplayed(Env.Store store) throws Exception {
    try (Claims claims = Claims.connect(store.address());
        App app = new App(IdempotencyFilter.builder(claims, NS).build(), created())) {
      String key = key();
      byte[] stored = new StoredResponse(202, java.util.List.of(
          java.util.Map.entry("content-type", "text/plain"), java.util.Map.entry("x-by", "node")),
          "accepted".getBytes(StandardCharsets.UTF_8), 0).encode();
      try (Lease lease = claimAsTheFilter(claims, key)) {
        lease.complete(stored);
      }
      HttpResponse<String> r = app.post("/orders", key, "{}");
      assertEquals(202, r.statusCode());
      assertEquals("accepted", r.body());
      assertEquals("node", r.headers().firstValue("X-By").orElse(""));
      assertEquals("true", r.headers().firstValue(IdempotencyFilter.REPLAYED).orElse(""));
      assertEquals(0, app.runs.get());
    }
  }
}
