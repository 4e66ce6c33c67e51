package dev.claimd.spring;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.claimd.Claims;
import dev.claimd.Env;
import dev.claimd.servlet.IdempotencyFilter;
import java.net.http.HttpResponse;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * A Spring Boot app that has only {@code claimd.*} properties (no filter bean of its own) keeps
 * the Idempotency-Key rules, through Tomcat and real HTTP against the real claimd on both
 * stores.
 */
class SpringBootRulesTest {
  static String key() {
    return "order-" + UUID.randomUUID();
  }

  static boolean replayed(HttpResponse<String> r) {
    return r.headers().firstValue(IdempotencyFilter.REPLAYED).isPresent();
  }

  @ParameterizedTest
  @EnumSource(Env.Store.class)
  void twentyConcurrentRequestsWithOneKeyRunTheHandlerOnce(Env.Store store) throws Exception {
    BootApps.App app = BootApps.on(store);
    String key = key();
    ExecutorService pool = Executors.newFixedThreadPool(20);
    try {
      List<Future<HttpResponse<String>>> answers = new ArrayList<>();
      for (int i = 0; i < 20; i++) {
        answers.add(pool.submit(() -> app.post("/orders/slow", key, "{\"qty\":2}")));
      }
      List<String> bodies = new ArrayList<>();
      int replays = 0;
      for (Future<HttpResponse<String>> answer : answers) {
        HttpResponse<String> r = answer.get();
        assertEquals(201, r.statusCode(), r.body());
        bodies.add(r.body());
        replays += replayed(r) ? 1 : 0;
      }
      assertEquals(1, app.runs(key));
      assertEquals(19, replays);
      assertEquals(1, bodies.stream().distinct().count(), "one order for all: " + bodies);
    } finally {
      pool.shutdownNow();
    }
  }

  @ParameterizedTest
  @EnumSource(Env.Store.class)
  void aServerErrorIsStoredAndReplayed(Env.Store store) throws Exception {
    BootApps.App app = BootApps.on(store);
    String key = key();
    HttpResponse<String> first = app.post("/orders/fail", key, "{}");
    assertEquals(503, first.statusCode());
    HttpResponse<String> again = app.post("/orders/fail", key, "{}");
    assertEquals(503, again.statusCode());
    assertEquals("upstream down", again.body());
    assertTrue(replayed(again));
    assertEquals(1, app.runs(key));
  }

  @ParameterizedTest
  @EnumSource(Env.Store.class)
  void theSameKeyWithAnotherBodyOrRouteIs422(Env.Store store) throws Exception {
    BootApps.App app = BootApps.on(store);
    String key = key();
    assertEquals(201, app.post("/orders", key, "{\"qty\":1}").statusCode());
    HttpResponse<String> body = app.post("/orders", key, "{\"qty\":2}");
    assertEquals(422, body.statusCode());
    assertEquals("application/problem+json",
        body.headers().firstValue("Content-Type").orElse(""));
    assertTrue(body.body().contains("\"code\":\"idempotency-key-reused\""), body.body());
    HttpResponse<String> route = app.post("/orders/refunds", key, "{\"qty\":1}");
    assertEquals(422, route.statusCode());
    assertTrue(route.body().contains("idempotency-key-reused"));
    assertFalse(route.body().contains(key));
    assertEquals(1, app.runs(key));
  }

  @ParameterizedTest
  @EnumSource(Env.Store.class)
  void aMissingKeyIs400AndRoutesOutsideTheUrlPatternsAreNotClaimed(Env.Store store)
      throws Exception {
    BootApps.App app = BootApps.on(store);
    int before = app.runs();
    HttpResponse<String> missing = app.send(app.request("/orders", "{}"));
    assertEquals(400, missing.statusCode());
    assertTrue(missing.body().contains("\"code\":\"idempotency-key-missing\""), missing.body());
    assertEquals(before, app.runs());
    HttpResponse<String> health = app.send(app.request("/health", "{}"));
    assertEquals(200, health.statusCode());
    assertEquals("ok", health.body());
    assertEquals(before + 1, app.runs());
    // GET is not among the methods: it passes unclaimed (and this app has no GET route).
    assertEquals(405, app.send(app.request("/orders", "{}").GET()).statusCode());
  }

  @ParameterizedTest
  @EnumSource(Env.Store.class)
  void anUnreachableClaimdIs503WithRetryAfterAndTheHandlerDoesNotRun(Env.Store store)
      throws Exception {
    assertFalse(store.address().isEmpty());
    BootApps.App app = BootApps.unreachable();
    String key = key();
    HttpResponse<String> down = app.post("/orders", key, "{}");
    assertEquals(503, down.statusCode());
    assertEquals("1", down.headers().firstValue("Retry-After").orElse(""));
    assertTrue(down.body().contains("idempotency-store-unavailable"), down.body());
    assertEquals(0, app.runs(key));
  }

  @Test
  void aClaimRefusedByTheTenantQuotaIs503WithRetryAfterAndTheHandlerDoesNotRun()
      throws Exception {
    BootApps.App app = BootApps.quota();
    try (Claims claims = Claims.connect(Env.quotaAddress())) {
      Env.spendTheQuota(claims);
    }
    String key = key();
    HttpResponse<String> refused = app.post("/orders", key, "{}");
    assertEquals(503, refused.statusCode(), refused.body());
    String retryAfter = refused.headers().firstValue("Retry-After").orElse("");
    assertTrue(retryAfter.matches("[1-9][0-9]*"), "Retry-After: " + retryAfter);
    assertTrue(refused.body().contains("idempotency-quota-exceeded"), refused.body());
    assertEquals(0, app.runs(key));
  }
}
