package dev.claimd.servlet;

import static dev.claimd.servlet.IdempotencyFilterTest.NS;
import static dev.claimd.servlet.IdempotencyFilterTest.key;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.claimd.Claims;
import dev.claimd.Decision;
import dev.claimd.Env;
import dev.claimd.Lease;
import dev.claimd.v1.State;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.UUID;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * Whose key it is with the filter's defaults, through a real Jetty and real HTTP on both
 * stores: two credentials never share a stored response, and a stored response never carries
 * Set-Cookie or hop-by-hop headers.
 */
class FilterScopeTest {
  /** The vectors' clients (the shared spec of the four packages). */
  static final String TOKEN_A =
      "auth%3A554b8cec38a5a3f3b9baf98b21f33155c74c0520c6e4db8bd91ac366fa3775ed";
  static final String COOKIE_SID =
      "cookie%3Ab55bfccadad2d5e3cd608c839d764d9b794fed8effba825a3fdbade6fd7de562";

  /** 201 with a fresh order id, a session cookie and hop-by-hop headers of its own. */
  static App.Handler ordering() {
    return (req, res) -> {
      req.getInputStream().readAllBytes();
      res.setStatus(201);
      res.setContentType("application/json");
      res.setHeader("X-Order", "yes");
      res.addHeader("Set-Cookie", "session=secret-of-the-first-caller; HttpOnly");
      res.setHeader("Connection", "X-Hop");
      res.setHeader("X-Hop", "only for this hop");
      res.setHeader("Keep-Alive", "timeout=5");
      res.setHeader("Proxy-Status", "edge");
      res.getWriter().write("{\"order\":\"" + UUID.randomUUID() + "\"}");
    };
  }

  /** The order id of a response body. */
  static String order(HttpResponse<String> r) {
    Matcher m = Pattern.compile("\"order\":\"([^\"]+)\"").matcher(r.body());
    assertTrue(m.find(), r.body());
    return m.group(1);
  }

  static boolean replayed(HttpResponse<String> r) {
    return r.headers().firstValue(IdempotencyFilter.REPLAYED).isPresent();
  }

  private static HttpResponse<String> post(App app, String key, String header, String value)
      throws Exception {
    return app.send(app.request("POST", "/orders", "{\"qty\":1}")
        .header("Idempotency-Key", key).header(header, value));
  }

  @ParameterizedTest
  @EnumSource(Env.Store.class)
  void twoUsersWithTheSameKeyAndBodyEachRunTheirOwnHandler(Env.Store store) throws Exception {
    try (Claims claims = Claims.connect(store.address());
        App app = new App(IdempotencyFilter.builder(claims, NS).build(), ordering())) {
      String key = key();
      HttpResponse<String> a = post(app, key, "Authorization", "Bearer token-A");
      HttpResponse<String> b = post(app, key, "Authorization", "Bearer token-B");
      assertEquals(201, a.statusCode());
      assertEquals(201, b.statusCode());
      assertFalse(replayed(b), "user B was handed user A's stored response");
      assertNotEquals(order(a), order(b));
      assertEquals(2, app.runs.get());
      // Each one's retry gets its own stored response.
      HttpResponse<String> againA = post(app, key, "Authorization", "Bearer token-A");
      HttpResponse<String> againB = post(app, key, "Authorization", "Bearer token-B");
      assertTrue(replayed(againA) && replayed(againB));
      assertEquals(order(a), order(againA));
      assertEquals(order(b), order(againB));
      assertEquals(2, app.runs.get());
      assertEquals(State.STATE_COMPLETED, claims.get(NS, TOKEN_A + " " + key).getState());
    }
  }

  @ParameterizedTest
  @EnumSource(Env.Store.class)
  void twoSessionCookiesWithTheSameKeyAndBodyEachRunTheirOwnHandler(Env.Store store)
      throws Exception {
    try (Claims claims = Claims.connect(store.address());
        App app = new App(IdempotencyFilter.builder(claims, NS).sessionCookie("sid").build(),
            ordering())) {
      String key = key();
      HttpResponse<String> one = post(app, key, "Cookie", "a=1; sid=s%3Aabc.def; b=2");
      HttpResponse<String> two = post(app, key, "Cookie", "a=1; sid=s%3Aother.def; b=2");
      HttpResponse<String> none = post(app, key, "Cookie", "a=1; b=2");
      assertEquals(List.of(201, 201, 201),
          List.of(one.statusCode(), two.statusCode(), none.statusCode()));
      assertFalse(replayed(two) || replayed(none), "a stored response crossed sessions");
      assertEquals(3, Set.of(order(one), order(two), order(none)).size());
      HttpResponse<String> again = post(app, key, "Cookie", "sid=s%3Aabc.def");
      assertTrue(replayed(again));
      assertEquals(order(one), order(again));
      assertEquals(3, app.runs.get());
      assertEquals(State.STATE_COMPLETED, claims.get(NS, COOKIE_SID + " " + key).getState());
      assertEquals(State.STATE_COMPLETED, claims.get(NS, "anonymous " + key).getState());
    }
  }

  @ParameterizedTest
  @EnumSource(Env.Store.class)
  void aStoredResponseNeverHoldsSetCookieOrHopByHopHeaders(Env.Store store) throws Exception {
    try (Claims claims = Claims.connect(store.address());
        App app = new App(IdempotencyFilter.builder(claims, NS).build(), ordering())) {
      String key = key();
      HttpResponse<String> first = post(app, key, "Authorization", "Bearer token-A");
      assertTrue(first.headers().firstValue("Set-Cookie").isPresent(),
          "the caller who made the response gets its cookie");
      StoredResponse stored = StoredResponse.decode(
          claims.get(NS, TOKEN_A + " " + key).getResponse().toByteArray());
      Set<String> names = new HashSet<>();
      stored.headers.forEach(h -> names.add(h.getKey()));
      assertTrue(names.contains("x-order") && names.contains("content-type"), names.toString());
      for (String never : List.of("set-cookie", "connection", "x-hop", "keep-alive",
          "proxy-status")) {
        assertFalse(names.contains(never), never + " was stored: " + names);
      }
      HttpResponse<String> again = post(app, key, "Authorization", "Bearer token-A");
      assertTrue(replayed(again));
      assertEquals("yes", again.headers().firstValue("X-Order").orElse(""));
      for (String never : List.of("Set-Cookie", "X-Hop", "Proxy-Status")) {
        assertTrue(again.headers().firstValue(never).isEmpty(), never + " was replayed");
      }
      assertEquals(1, app.runs.get());
    }
  }

  @ParameterizedTest
  @EnumSource(Env.Store.class)
  void aResponseStoredElsewhereWithSetCookieIsReplayedWithoutItOrItsHopByHopHeaders(
      Env.Store store) throws Exception {
    try (Claims claims = Claims.connect(store.address());
        App app = new App(IdempotencyFilter.builder(claims, NS).build(), ordering())) {
      String key = key();
      byte[] fingerprint = RequestIdentity.fingerprint("POST", "/orders",
          "{\"qty\":1}".getBytes(StandardCharsets.UTF_8), "application/json", true);
      var result = claims.claim(NS, RequestIdentity.claimKey(DefaultScope.ANONYMOUS, key),
          fingerprint);
      assertEquals(Decision.CLAIMED, result.decision());
      try (Lease lease = result.lease().orElseThrow()) {
        lease.complete(new StoredResponse(201, List.of(
            Map.entry("content-type", "application/json"), Map.entry("x-order", "yes"),
            Map.entry("set-cookie", "session=elsewhere"), Map.entry("connection", "x-hop"),
            Map.entry("x-hop", "hop"), Map.entry("proxy-authenticate", "Basic")),
            "{\"order\":\"elsewhere\"}".getBytes(StandardCharsets.UTF_8), 0).encode());
      }
      HttpResponse<String> r = app.send(app.request("POST", "/orders", "{\"qty\":1}")
          .header("Idempotency-Key", key));
      assertEquals(201, r.statusCode());
      assertTrue(replayed(r));
      assertEquals("elsewhere", order(r));
      assertEquals("yes", r.headers().firstValue("X-Order").orElse(""));
      for (String never : List.of("Set-Cookie", "X-Hop", "Proxy-Authenticate")) {
        assertTrue(r.headers().firstValue(never).isEmpty(), never + " was replayed");
      }
      assertEquals(0, app.runs.get());
    }
  }
}
