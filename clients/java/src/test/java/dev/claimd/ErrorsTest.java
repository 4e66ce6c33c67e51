package dev.claimd;

import static dev.claimd.Env.key;
import static dev.claimd.Env.sha256;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;

import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import java.util.Optional;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/** Failed calls are ClaimdExceptions naming the code and the field, never the key. */
class ErrorsTest {
  private static final String NS = "java-client-tests";

  @ParameterizedTest
  @EnumSource(Env.Store.class)
  void anEmptyNamespaceIsInvalidArgumentNamingTheField(Env.Store store) {
    try (Claims claims = Claims.connect(store.address())) {
      ClaimdException e =
          assertThrows(ClaimdException.class, () -> claims.claim("", key("k"), sha256("a")));
      assertEquals(Status.Code.INVALID_ARGUMENT, e.code());
      assertEquals(Optional.of("namespace"), e.field());
      assertInstanceOf(StatusRuntimeException.class, e.getCause());
    }
  }

  @ParameterizedTest
  @EnumSource(Env.Store.class)
  void anEmptyKeyIsInvalidArgumentNamingTheField(Env.Store store) {
    try (Claims claims = Claims.connect(store.address())) {
      ClaimdException e =
          assertThrows(ClaimdException.class, () -> claims.claim(NS, "", sha256("a")));
      assertEquals(Status.Code.INVALID_ARGUMENT, e.code());
      assertEquals(Optional.of("key"), e.field());
    }
  }

  @ParameterizedTest
  @EnumSource(Env.Store.class)
  void aFingerprintLongerThan64BytesIsInvalidArgumentNamingTheField(Env.Store store) {
    try (Claims claims = Claims.connect(store.address())) {
      String k = key("secret-key");
      ClaimdException e =
          assertThrows(ClaimdException.class, () -> claims.claim(NS, k, new byte[65]));
      assertEquals(Status.Code.INVALID_ARGUMENT, e.code());
      assertEquals(Optional.of("fingerprint"), e.field());
      assertFalse(e.getMessage().contains(k));
    }
  }

  @ParameterizedTest
  @EnumSource(Env.Store.class)
  void anUnknownReceiptIsNotFound(Env.Store store) {
    try (Claims claims = Claims.connect(store.address())) {
      ClaimdException e = assertThrows(ClaimdException.class, () -> claims.get(NS, key("none")));
      assertEquals(Status.Code.NOT_FOUND, e.code());
      assertEquals(Optional.empty(), e.field());
    }
  }
}
