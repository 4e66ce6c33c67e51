package dev.claimd.servlet;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.claimd.Claims;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * The default scope (no clientOf): the shared vectors of the four packages, verbatim, and how
 * Authorization and Cookie lines are read; the sessionCookie option's checks.
 */
class DefaultScopeTest {
  @Test
  void theSharedVectorsGiveTheSharedClientsAndClaimKeys() {
    String auth = DefaultScope.of(List.of("Bearer token-A"), List.of(), null);
    assertEquals("auth:554b8cec38a5a3f3b9baf98b21f33155c74c0520c6e4db8bd91ac366fa3775ed", auth);
    assertEquals("auth%3A554b8cec38a5a3f3b9baf98b21f33155c74c0520c6e4db8bd91ac366fa3775ed order-1",
        RequestIdentity.claimKey(auth, "order-1"));

    String cookie = DefaultScope.of(List.of(), List.of("a=1; sid=s%3Aabc.def; b=2"), "sid");
    assertEquals("cookie:b55bfccadad2d5e3cd608c839d764d9b794fed8effba825a3fdbade6fd7de562",
        cookie);
    assertEquals(
        "cookie%3Ab55bfccadad2d5e3cd608c839d764d9b794fed8effba825a3fdbade6fd7de562 order-1",
        RequestIdentity.claimKey(cookie, "order-1"));

    String neither = DefaultScope.of(List.of(), List.of(), null);
    assertEquals("anonymous", neither);
    assertEquals("anonymous order-1", RequestIdentity.claimKey(neither, "order-1"));
  }

  @Test
  void severalAuthorizationLinesAreDigestedJoinedWithACommaAndASpace() {
    assertEquals(DefaultScope.of(List.of("Bearer a, Basic b"), List.of(), null),
        DefaultScope.of(List.of("Bearer a", "Basic b"), List.of(), null));
    assertTrue(DefaultScope.of(List.of(""), List.of(), null).startsWith("auth:"));
  }

  @Test
  void theAuthorizationHeaderWinsOverTheSessionCookie() {
    assertEquals(DefaultScope.of(List.of("Bearer token-A"), List.of(), null),
        DefaultScope.of(List.of("Bearer token-A"), List.of("sid=s%3Aabc.def"), "sid"));
  }

  @Test
  void theFirstSessionCookieWinsAndItsValueIsTakenAsSent() {
    String vector = "cookie:b55bfccadad2d5e3cd608c839d764d9b794fed8effba825a3fdbade6fd7de562";
    assertEquals(vector, DefaultScope.of(List.of(),
        List.of("x=1;  sid=s%3Aabc.def ;sid=later", "sid=third"), "sid"));
    assertEquals(vector, DefaultScope.of(List.of(), List.of("a=1", "sid=s%3Aabc.def"), "sid"));
    // Not URL-decoded: "s:abc.def" is another value.
    assertTrue(!DefaultScope.of(List.of(), List.of("sid=s:abc.def"), "sid").equals(vector));
    // Only the named cookie counts; a name is matched exactly.
    assertEquals("anonymous", DefaultScope.of(List.of(), List.of("SID=1; xsid=2; sid"), "sid"));
    assertEquals("anonymous", DefaultScope.of(List.of(), List.of("sid=1"), null));
    assertEquals("s=1=2", DefaultScope.cookie(List.of("sid=s=1=2"), "sid"));
  }

  @Test
  void aSessionCookieThatIsNoCookieNameOrComesWithClientOfIsRefusedByBuild() {
    try (Claims claims = Claims.connect("127.0.0.1:1")) {
      for (String bad : List.of("", "a b", "sid;", "s=id", "sïd")) {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
            () -> IdempotencyFilter.builder(claims, "ns").sessionCookie(bad).build());
        assertTrue(e.getMessage().startsWith("sessionCookie "), e.getMessage());
      }
      IllegalArgumentException both = assertThrows(IllegalArgumentException.class,
          () -> IdempotencyFilter.builder(claims, "ns").sessionCookie("sid")
              .clientOf(req -> "u").build());
      assertTrue(both.getMessage().startsWith("sessionCookie "), both.getMessage());
      assertTrue(assertThrows(IllegalArgumentException.class,
          () -> IdempotencyFilter.builder(claims, "ns").clientOf(null).build())
          .getMessage().startsWith("clientOf"));
      IdempotencyFilter.builder(claims, "ns").sessionCookie("__Host-session.id").build();
    }
  }
}
