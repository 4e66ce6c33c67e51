package dev.claimd;

import static org.junit.jupiter.api.Assertions.fail;

import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.UUID;

/** The claimd servers the suite runs against, from the environment; a missing one fails. */
public final class Env {
  private Env() {}

  /** The two stores every behaviour test runs on. */
  public enum Store {
    /** claimd on its embedded SQLite store. */
    EMBEDDED("CLAIMD_EMBEDDED_ADDR"),
    /** claimd on PostgreSQL. */
    POSTGRES("CLAIMD_POSTGRES_ADDR");

    private final String variable;

    Store(String variable) {
      this.variable = variable;
    }

    /** The store's claimd address. */
    public String address() {
      return get(variable);
    }
  }

  /**
   * The claimd of {@code CLAIMD_QUOTA_ADDR}: anonymous, its tenant gets one Claim, then one per
   * thousand seconds ({@code [tenants.default]} with {@code claims_per_second = 0.001} and
   * {@code burst = 1}), so once a test has spent that Claim every Claim is refused by the quota.
   */
  public static String quotaAddress() {
    return get("CLAIMD_QUOTA_ADDR");
  }

  /**
   * Claims on {@code claims} until one is refused by the tenant quota (the second at the
   * latest); that refusal.
   */
  public static QuotaException spendTheQuota(Claims claims) {
    for (int n = 0; n < 3; n++) {
      try {
        claims.claim("java-quota-tests", key("spent"), sha256("spent"));
      } catch (QuotaException e) {
        return e;
      }
    }
    return fail("the claimd of CLAIMD_QUOTA_ADDR refused no Claim by its quota");
  }

  /** The value of an environment variable the suite needs; fails the test when unset. */
  public static String get(String name) {
    String value = System.getenv(name);
    if (value == null || value.isEmpty()) {
      fail(name + " is not set: set by `cargo test --test it polyglot::clients_java`, "
          + "which starts claimd");
    }
    return value;
  }

  /** A key no other test uses. */
  public static String key(String prefix) {
    return prefix + "-" + UUID.randomUUID();
  }

  /** SHA-256 of a string. */
  public static byte[] sha256(String text) {
    try {
      return MessageDigest.getInstance("SHA-256").digest(text.getBytes(StandardCharsets.UTF_8));
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException(e);
    }
  }

  /** UTF-8 bytes. */
  public static byte[] utf8(String text) {
    return text.getBytes(StandardCharsets.UTF_8);
  }
}
