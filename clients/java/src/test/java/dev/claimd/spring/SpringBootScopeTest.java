package dev.claimd.spring;

import static dev.claimd.spring.SpringBootRulesTest.key;
import static dev.claimd.spring.SpringBootRulesTest.replayed;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.claimd.Claims;
import dev.claimd.Env;
import dev.claimd.v1.State;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.util.Base64;
import java.util.List;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * Whose key it is in the properties-only Spring Boot app, through real HTTP on both stores: a
 * signed-in user's keys are the principal's, other requests' the digest of their
 * Authorization header or session cookie; no caller gets another's stored response, and none
 * gets a stored Set-Cookie.
 */
class SpringBootScopeTest {
  /** The shared spec's client of "Bearer token-A", percent-encoded as in a claim key. */
  static final String TOKEN_A =
      "auth%3A554b8cec38a5a3f3b9baf98b21f33155c74c0520c6e4db8bd91ac366fa3775ed";

  static String order(HttpResponse<String> r) {
    Matcher m = Pattern.compile("\"order\":\"([^\"]+)\"").matcher(r.body());
    assertTrue(m.find(), r.body());
    return m.group(1);
  }

  static String basic(String user) {
    return "Basic " + Base64.getEncoder().encodeToString(
        (user + ":" + user + "-password").getBytes(StandardCharsets.UTF_8));
  }

  private static HttpResponse<String> post(BootApps.App app, String path, String key,
      String header, String value) throws Exception {
    return app.send(app.request(path, "{\"qty\":1}").header("Idempotency-Key", key)
        .header(header, value));
  }

  @ParameterizedTest
  @EnumSource(Env.Store.class)
  void twoBearerTokensWithTheSameKeyAndBodyEachRunTheirOwnHandler(Env.Store store)
      throws Exception {
    BootApps.App app = BootApps.on(store);
    String key = key();
    HttpResponse<String> a = post(app, "/orders", key, "Authorization", "Bearer token-A");
    HttpResponse<String> b = post(app, "/orders", key, "Authorization", "Bearer token-B");
    assertEquals(List.of(201, 201), List.of(a.statusCode(), b.statusCode()));
    assertFalse(replayed(b), "the second user was handed the first's stored response");
    assertNotEquals(order(a), order(b));
    HttpResponse<String> againA = post(app, "/orders", key, "Authorization", "Bearer token-A");
    assertTrue(replayed(againA));
    assertEquals(order(a), order(againA));
    assertEquals(2, app.runs(key));
    try (Claims claims = Claims.connect(store.address())) {
      assertEquals(State.STATE_COMPLETED,
          claims.get(BootApps.NS, TOKEN_A + " " + key).getState());
    }
  }

  @ParameterizedTest
  @EnumSource(Env.Store.class)
  void twoSignedInUsersWithTheSameKeyAndBodyEachRunTheirOwnHandlerUnderTheirPrincipal(
      Env.Store store) throws Exception {
    BootApps.App app = BootApps.on(store);
    String key = key();
    HttpResponse<String> alice = post(app, "/account/orders", key, "Authorization",
        basic("alice"));
    HttpResponse<String> bob = post(app, "/account/orders", key, "Authorization",
        basic("bob"));
    assertEquals(List.of(201, 201), List.of(alice.statusCode(), bob.statusCode()));
    assertFalse(replayed(bob), "bob was handed alice's stored response");
    assertNotEquals(order(alice), order(bob));
    HttpResponse<String> again = post(app, "/account/orders", key, "Authorization",
        basic("alice"));
    assertTrue(replayed(again));
    assertEquals(order(alice), order(again));
    assertEquals(2, app.runs(key));
    assertEquals(401, post(app, "/account/orders", key(), "X-User", "alice").statusCode());
    try (Claims claims = Claims.connect(store.address())) {
      assertEquals(State.STATE_COMPLETED,
          claims.get(BootApps.NS, "principal%3Aalice " + key).getState());
      assertEquals(State.STATE_COMPLETED,
          claims.get(BootApps.NS, "principal%3Abob " + key).getState());
    }
  }

  @ParameterizedTest
  @EnumSource(Env.Store.class)
  void twoSessionCookiesWithTheSameKeyAndBodyEachRunTheirOwnHandler(Env.Store store)
      throws Exception {
    BootApps.App app = BootApps.on(store);
    String key = key();
    HttpResponse<String> one = post(app, "/orders", key, "Cookie", "a=1; sid=s%3Aabc.def");
    HttpResponse<String> two = post(app, "/orders", key, "Cookie", "a=1; sid=s%3Aother");
    HttpResponse<String> none = app.post("/orders", key, "{\"qty\":1}");
    assertEquals(List.of(201, 201, 201),
        List.of(one.statusCode(), two.statusCode(), none.statusCode()));
    assertFalse(replayed(two) || replayed(none), "a stored response crossed sessions");
    assertEquals(3, Set.of(order(one), order(two), order(none)).size());
    HttpResponse<String> again = post(app, "/orders", key, "Cookie", "sid=s%3Aabc.def");
    assertTrue(replayed(again));
    assertEquals(order(one), order(again));
    assertEquals(3, app.runs(key));
    try (Claims claims = Claims.connect(store.address())) {
      assertEquals(State.STATE_COMPLETED, claims.get(BootApps.NS,
          "cookie%3Ab55bfccadad2d5e3cd608c839d764d9b794fed8effba825a3fdbade6fd7de562 " + key)
          .getState());
      assertEquals(State.STATE_COMPLETED,
          claims.get(BootApps.NS, "anonymous " + key).getState());
    }
  }

  @ParameterizedTest
  @EnumSource(Env.Store.class)
  void setCookieAndHopByHopHeadersAreNeverStoredNorReplayed(Env.Store store) throws Exception {
    BootApps.App app = BootApps.on(store);
    String key = key();
    HttpResponse<String> first = post(app, "/orders", key, "Authorization", "Bearer token-A");
    assertEquals(201, first.statusCode());
    assertTrue(first.headers().firstValue("Set-Cookie").isPresent(),
        "the caller who made the response gets its cookie");
    HttpResponse<String> again = post(app, "/orders", key, "Authorization", "Bearer token-A");
    assertTrue(replayed(again));
    assertEquals("yes", again.headers().firstValue("X-Order").orElse(""));
    for (String never : List.of("Set-Cookie", "X-Hop", "Proxy-Status")) {
      assertTrue(again.headers().firstValue(never).isEmpty(), never + " was replayed");
    }
    try (Claims claims = Claims.connect(store.address())) {
      String stored = claims.get(BootApps.NS, TOKEN_A + " " + key).getResponse()
          .toString(StandardCharsets.ISO_8859_1);
      assertTrue(stored.contains("x-order"), stored);
      for (String never : List.of("set-cookie", "secret-of-the-first-caller", "connection",
          "x-hop", "proxy-status")) {
        assertFalse(stored.contains(never), never + " was stored");
      }
    }
  }
}
