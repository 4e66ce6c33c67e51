package dev.claimd;

import static dev.claimd.Env.key;
import static dev.claimd.Env.sha256;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;

import io.grpc.Status;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;

/** The API key and mutual TLS, against the claimds that require them. */
class SecurityTest {
  private static final String NS = "java-client-tests";

  @Test
  void theApiKeyIsSentWithEveryCall() {
    String apiKey = Env.get("CLAIMD_API_KEY");
    try (Claims claims = Claims.builder(Env.get("CLAIMD_KEYED_ADDR")).apiKey(apiKey).build()) {
      String k = key("keyed");
      try (Lease lease = claims.claim(NS, k, sha256("a")).lease().orElseThrow()) {
        lease.complete(Env.utf8("ok"));
      }
      assertEquals(Decision.COMPLETED, claims.claim(NS, k, sha256("a")).decision());
      assertFalse(claims.toString().contains(apiKey));
    }
  }

  @Test
  void aWrongApiKeyIsUnauthenticated() {
    String wrong = "claimd_0000000000000000_wrongwrongwrongwrongwrongwrongwrongwrong00";
    try (Claims claims = Claims.builder(Env.get("CLAIMD_KEYED_ADDR")).apiKey(wrong).build()) {
      ClaimdException e =
          assertThrows(ClaimdException.class, () -> claims.claim(NS, key("k"), sha256("a")));
      assertEquals(Status.Code.UNAUTHENTICATED, e.code());
      assertFalse(e.getMessage().contains(wrong));
      assertFalse(claims.toString().contains(wrong));
    }
  }

  @Test
  void noApiKeyIsUnauthenticatedWhereOneIsRequired() {
    try (Claims claims = Claims.connect(Env.get("CLAIMD_KEYED_ADDR"))) {
      ClaimdException e =
          assertThrows(ClaimdException.class, () -> claims.claim(NS, key("k"), sha256("a")));
      assertEquals(Status.Code.UNAUTHENTICATED, e.code());
    }
  }

  @Test
  void mutualTlsWithAnApiKeyClaimsAndCompletes() {
    Claims claims = Claims.builder(Env.get("CLAIMD_TLS_ADDR"))
        .apiKey(Env.get("CLAIMD_TLS_API_KEY"))
        .tls(Path.of(Env.get("CLAIMD_CA_FILE")), Path.of(Env.get("CLAIMD_CLIENT_CERT")),
            Path.of(Env.get("CLAIMD_CLIENT_KEY")))
        .build();
    try (claims) {
      String k = key("tls");
      ClaimResult first = claims.claim(NS, k, sha256("a"));
      assertEquals(Decision.CLAIMED, first.decision());
      try (Lease lease = first.lease().orElseThrow()) {
        lease.complete(Env.utf8("over tls"));
      }
      assertEquals("over tls",
          claims.claim(NS, k, sha256("a")).receipt().getResponse().toStringUtf8());
    }
  }
}
