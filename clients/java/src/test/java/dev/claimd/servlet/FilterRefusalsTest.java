package dev.claimd.servlet;

import static dev.claimd.servlet.IdempotencyFilterTest.NS;
import static dev.claimd.servlet.IdempotencyFilterTest.created;
import static dev.claimd.servlet.IdempotencyFilterTest.key;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.claimd.Claims;
import dev.claimd.Env;
import java.net.ServerSocket;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/** What the filter refuses, gives back or cannot store, through a real Jetty, on both stores. */
class FilterRefusalsTest {
  @ParameterizedTest
  @EnumSource(Env.Store.class)
  void aRequestWithoutAKeyOrWithAnInvalidOneIs400(Env.Store store) throws Exception {
    try (Claims claims = Claims.connect(store.address());
        App app = new App(IdempotencyFilter.builder(claims, NS).build(), created())) {
      HttpResponse<String> missing = app.send(app.request("POST", "/orders", "{}"));
      assertEquals(400, missing.statusCode());
      assertEquals("application/problem+json",
          missing.headers().firstValue("Content-Type").orElse(""));
      assertEquals("{\"type\":\"about:blank\",\"title\":\"Idempotency-Key is missing\","
          + "\"status\":400,\"detail\":\"This operation is idempotent and requires an "
          + "Idempotency-Key header.\",\"code\":\"idempotency-key-missing\"}", missing.body());
      HttpResponse<String> invalid = app.post("/orders", "\"unterminated", "{}");
      assertEquals(400, invalid.statusCode());
      assertTrue(invalid.body().contains("\"code\":\"idempotency-key-invalid\""));
      assertTrue(invalid.body().contains(RequestIdentity.KEY_RULE));
      assertEquals(0, app.runs.get());
      assertEquals(201, app.send(app.request("PUT", "/orders", "{}")).statusCode());
      assertEquals(1, app.runs.get());
    }
  }

  @ParameterizedTest
  @EnumSource(Env.Store.class)
  void withoutRequiredARequestWithoutAKeyRunsUnclaimed(Env.Store store) throws Exception {
    try (Claims claims = Claims.connect(store.address());
        App app = new App(IdempotencyFilter.builder(claims, NS).required(false).build(),
            created())) {
      assertEquals(201, app.send(app.request("POST", "/orders", "{}")).statusCode());
      assertEquals(201, app.send(app.request("POST", "/orders", "{}")).statusCode());
      assertEquals(2, app.runs.get());
    }
  }

  @ParameterizedTest
  @EnumSource(Env.Store.class)
  void aRetryPastTheWaitIs409WithRetryAfter(Env.Store store) throws Exception {
    CountDownLatch release = new CountDownLatch(1);
    App.Handler stuck = (req, res) -> {
      release.await(20, TimeUnit.SECONDS);
      created().handle(req, res);
    };
    try (Claims claims = Claims.connect(store.address());
        App app = new App(IdempotencyFilter.builder(claims, NS)
            .wait(Duration.ofMillis(300)).build(), stuck)) {
      String key = key();
      CompletableFuture<HttpResponse<String>> first =
          CompletableFuture.supplyAsync(() -> {
            try {
              return app.post("/orders", key, "{}");
            } catch (Exception e) {
              throw new IllegalStateException(e);
            }
          });
      long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
      while (app.runs.get() == 0 && System.nanoTime() < until) {
        Thread.sleep(20);
      }
      HttpResponse<String> busy = app.post("/orders", key, "{}");
      assertEquals(409, busy.statusCode());
      assertTrue(busy.body().contains("idempotency-request-in-progress"));
      assertTrue(Integer.parseInt(busy.headers().firstValue("Retry-After").orElse("0")) >= 1);
      release.countDown();
      assertEquals(201, first.get(20, TimeUnit.SECONDS).statusCode());
      assertEquals(1, app.runs.get());
    }
  }

  @ParameterizedTest
  @EnumSource(Env.Store.class)
  void anUnreachableClaimdIs503WithRetryAfter(Env.Store store) throws Exception {
    int closed;
    try (ServerSocket socket = new ServerSocket(0)) {
      closed = socket.getLocalPort();
    }
    assertFalse(store.address().isEmpty());
    try (Claims claims = Claims.builder("127.0.0.1:" + closed)
            .callTimeout(Duration.ofSeconds(2)).build();
        App app = new App(IdempotencyFilter.builder(claims, NS).wait(Duration.ZERO).build(),
            created())) {
      HttpResponse<String> down = app.post("/orders", key(), "{}");
      assertEquals(503, down.statusCode());
      assertEquals("1", down.headers().firstValue("Retry-After").orElse(""));
      assertTrue(down.body().contains("idempotency-store-unavailable"));
      assertEquals(0, app.runs.get());
    }
  }

  @ParameterizedTest
  @EnumSource(Env.Store.class)
  void aThrowingHandlerGivesTheKeyBackAndTheNextRequestRunsIt(Env.Store store)
      throws Exception {
    App.Handler failsOnce = (req, res) -> {
      if (FailOnce.first()) {
        throw new IllegalStateException("secret detail");
      }
      created().handle(req, res);
    };
    FailOnce.reset();
    try (Claims claims = Claims.connect(store.address());
        App app = new App(IdempotencyFilter.builder(claims, NS).build(), failsOnce)) {
      String key = key();
      assertEquals(500, app.post("/orders", key, "{}").statusCode());
      dev.claimd.v1.Receipt given = claims.get(NS, "anonymous " + key);
      assertEquals(dev.claimd.v1.State.STATE_RETRY_WAIT, given.getState());
      assertEquals("IllegalStateException", given.getLastError());
      HttpResponse<String> next = app.post("/orders", key, "{}");
      assertEquals(201, next.statusCode());
      assertTrue(next.headers().firstValue(IdempotencyFilter.REPLAYED).isEmpty());
      assertEquals(2, app.runs.get());
    }
  }

  @ParameterizedTest
  @EnumSource(Env.Store.class)
  void aResponseTooLargeToStoreStillSettlesTheKey(Env.Store store) throws Exception {
    String big = "x".repeat(5_000);
    App.Handler large = (req, res) -> {
      res.setStatus(200);
      res.setContentType("text/plain");
      res.setHeader("X-Report", "big");
      res.getOutputStream().write(big.getBytes("UTF-8"));
    };
    try (Claims claims = Claims.connect(store.address());
        App app = new App(IdempotencyFilter.builder(claims, NS).maxResponseBytes(1_024).build(),
            large)) {
      String key = key();
      HttpResponse<String> first = app.post("/reports", key, "{}");
      assertEquals(200, first.statusCode());
      assertEquals(big, first.body());
      HttpResponse<String> again = app.post("/reports", key, "{}");
      assertEquals(200, again.statusCode());
      assertEquals("true", again.headers().firstValue(IdempotencyFilter.REPLAYED).orElse(""));
      assertEquals("big", again.headers().firstValue("X-Report").orElse(""));
      assertTrue(again.body().contains("idempotency-response-not-stored"), again.body());
      assertTrue(again.body().contains("(5000 bytes)"));
      assertEquals(1, app.runs.get());
    }
  }

  @ParameterizedTest
  @EnumSource(Env.Store.class)
  void aBodyPastTheLimitIs413(Env.Store store) throws Exception {
    try (Claims claims = Claims.connect(store.address());
        App app = new App(IdempotencyFilter.builder(claims, NS).maxBodyBytes(10).build(),
            created())) {
      HttpResponse<String> r = app.post("/orders", key(), "{\"much\":\"too long\"}");
      assertEquals(413, r.statusCode());
      assertTrue(r.body().contains("idempotency-request-too-large"));
      assertEquals(0, app.runs.get());
    }
  }

  /** Fails the first run of a test's handler. */
  static final class FailOnce {
    private static final java.util.concurrent.atomic.AtomicBoolean FAILED =
        new java.util.concurrent.atomic.AtomicBoolean();

    static void reset() {
      FAILED.set(false);
    }

    static boolean first() {
      return FAILED.compareAndSet(false, true);
    }
  }
}
