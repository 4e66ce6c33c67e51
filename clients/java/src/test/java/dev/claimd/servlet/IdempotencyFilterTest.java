package dev.claimd.servlet;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.claimd.Claims;
import dev.claimd.Env;
import java.net.http.HttpResponse;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/** The filter through a real Jetty and real HTTP, on both stores: replays and conflicts. */
class IdempotencyFilterTest {
  static final String NS = "java-http-tests";

  static String key() {
    return "order-" + UUID.randomUUID();
  }

  static App.Handler created() {
    return (req, res) -> {
      String body = new String(req.getInputStream().readAllBytes(), "UTF-8");
      res.setStatus(201);
      res.setContentType("application/json");
      res.setHeader("X-Order", "42");
      res.getOutputStream().write(("{\"echo\":" + body + "}").getBytes("UTF-8"));
    };
  }

  @ParameterizedTest
  @EnumSource(Env.Store.class)
  void aHandlerThatAnsweredNeverRunsAgain(Env.Store store) throws Exception {
    try (Claims claims = Claims.connect(store.address());
        App app = new App(IdempotencyFilter.builder(claims, NS).build(), created())) {
      String key = key();
      HttpResponse<String> first = app.post("/orders", key, "{\"qty\": 1}");
      assertEquals(201, first.statusCode());
      assertEquals("{\"echo\":{\"qty\": 1}}", first.body());
      assertTrue(first.headers().firstValue(IdempotencyFilter.REPLAYED).isEmpty());
      HttpResponse<String> again = app.post("/orders", key, "{\"qty\":1}");
      assertEquals(201, again.statusCode());
      assertEquals(first.body(), again.body());
      assertEquals("42", again.headers().firstValue("X-Order").orElse(""));
      assertTrue(again.headers().firstValue("Content-Type").orElse("")
          .startsWith("application/json"));
      assertEquals("true", again.headers().firstValue(IdempotencyFilter.REPLAYED).orElse(""));
      assertEquals(1, app.runs.get());
    }
  }

  @ParameterizedTest
  @EnumSource(Env.Store.class)
  void twentyConcurrentIdenticalRequestsRunTheHandlerOnce(Env.Store store) throws Exception {
    App.Handler slow = (req, res) -> {
      Thread.sleep(300);
      created().handle(req, res);
    };
    ExecutorService pool = Executors.newFixedThreadPool(20);
    try (Claims claims = Claims.connect(store.address());
        App app = new App(IdempotencyFilter.builder(claims, NS).build(), slow)) {
      String key = key();
      List<Future<HttpResponse<String>>> answers = new ArrayList<>();
      for (int i = 0; i < 20; i++) {
        answers.add(pool.submit(() -> app.post("/orders", key, "{\"qty\":2}")));
      }
      int replayed = 0;
      for (Future<HttpResponse<String>> answer : answers) {
        HttpResponse<String> r = answer.get();
        assertEquals(201, r.statusCode());
        assertEquals("{\"echo\":{\"qty\":2}}", r.body());
        replayed += r.headers().firstValue(IdempotencyFilter.REPLAYED).isPresent() ? 1 : 0;
      }
      assertEquals(1, app.runs.get());
      assertEquals(19, replayed);
    } finally {
      pool.shutdownNow();
    }
  }

  @ParameterizedTest
  @EnumSource(Env.Store.class)
  void aServerErrorIsReplayedToo(Env.Store store) throws Exception {
    App.Handler down = (req, res) -> {
      res.setStatus(503);
      res.getWriter().write("upstream down");
    };
    try (Claims claims = Claims.connect(store.address());
        App app = new App(IdempotencyFilter.builder(claims, NS).build(), down)) {
      String key = key();
      assertEquals(503, app.post("/orders", key, "{}").statusCode());
      HttpResponse<String> again = app.post("/orders", key, "{}");
      assertEquals(503, again.statusCode());
      assertEquals("upstream down", again.body());
      assertEquals("true", again.headers().firstValue(IdempotencyFilter.REPLAYED).orElse(""));
      assertEquals(1, app.runs.get());
    }
  }

  @ParameterizedTest
  @EnumSource(Env.Store.class)
  void withRetryServerErrorsAServerErrorGivesTheKeyBack(Env.Store store) throws Exception {
    App.Handler flaky = (req, res) -> res.setStatus(500);
    try (Claims claims = Claims.connect(store.address());
        App app = new App(IdempotencyFilter.builder(claims, NS).retryServerErrors(true).build(),
            flaky)) {
      String key = key();
      assertEquals(500, app.post("/orders", key, "{}").statusCode());
      HttpResponse<String> again = app.post("/orders", key, "{}");
      assertEquals(500, again.statusCode());
      assertTrue(again.headers().firstValue(IdempotencyFilter.REPLAYED).isEmpty());
      assertEquals(2, app.runs.get());
    }
  }

  @ParameterizedTest
  @EnumSource(Env.Store.class)
  void theSameKeyWithAnotherBodyOrRouteIs422(Env.Store store) throws Exception {
    try (Claims claims = Claims.connect(store.address());
        App app = new App(IdempotencyFilter.builder(claims, NS).build(), created())) {
      String key = key();
      assertEquals(201, app.post("/orders", key, "{\"qty\":1}").statusCode());
      HttpResponse<String> body = app.post("/orders", key, "{\"qty\":2}");
      assertEquals(422, body.statusCode());
      assertEquals("application/problem+json",
          body.headers().firstValue("Content-Type").orElse(""));
      assertTrue(body.body().contains("\"code\":\"idempotency-key-reused\""), body.body());
      HttpResponse<String> route = app.post("/refunds", key, "{\"qty\":1}");
      assertEquals(422, route.statusCode());
      assertTrue(route.body().contains("idempotency-key-reused"));
      assertFalse(route.body().contains(key));
      assertEquals(1, app.runs.get());
    }
  }

  @ParameterizedTest
  @EnumSource(Env.Store.class)
  void freeFormKeysAreClaimedUnderTheClientAndTheKey(Env.Store store) throws Exception {
    try (Claims claims = Claims.connect(store.address());
        App app = new App(IdempotencyFilter.builder(claims, NS)
            .clientOf(req -> req.getHeader("X-User")).build(), created())) {
      String bare = "order 7 / " + UUID.randomUUID() + " ~!";
      assertEquals(201, app.send(app.request("POST", "/orders", "{}")
          .header("Idempotency-Key", bare).header("X-User", "alice@example.com")).statusCode());
      assertEquals(dev.claimd.v1.State.STATE_COMPLETED,
          claims.get(NS, "alice%40example.com " + bare).getState());
      String quoted = "\"a \\\"quoted\\\" " + UUID.randomUUID() + "\"";
      for (int i = 0; i < 2; i++) {
        assertEquals(201, app.send(app.request("POST", "/orders", "{}")
            .header("Idempotency-Key", quoted)).statusCode());
      }
      assertEquals(2, app.runs.get());
    }
  }
}
