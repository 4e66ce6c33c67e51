package dev.claimd.servlet;

import java.time.Duration;

/** The checks {@link IdempotencyFilter.Builder#build()} makes of the options. */
final class FilterOptions {
  private FilterOptions() {}

  /**
   * Throws {@link IllegalArgumentException} naming the first option out of its range.
   *
   * @param namespace non-empty
   * @param lease 1 s to 24 h
   * @param retryAfter 1 s to 24 h
   * @param wait 0 to 60 s
   * @param maxResponseBytes 1 to 65536
   * @param maxBodyBytes 1 to 2^31 - 2
   */
  static void check(String namespace, Duration lease, Duration retryAfter, Duration wait,
      int maxResponseBytes, int maxBodyBytes) {
    if (namespace == null || namespace.isEmpty()) {
      throw new IllegalArgumentException("namespace: a claimd namespace");
    }
    between("lease", lease, Duration.ofSeconds(1), Duration.ofHours(24), "1 s to 24 h");
    between("retryAfter", retryAfter, Duration.ofSeconds(1), Duration.ofHours(24),
        "1 s to 24 h");
    between("wait", wait, Duration.ZERO, Duration.ofSeconds(60), "0 to 60 s");
    if (maxResponseBytes < 1 || maxResponseBytes > IdempotencyFilter.DEFAULT_MAX_RESPONSE_BYTES) {
      throw new IllegalArgumentException("maxResponseBytes must be 1 to 65536");
    }
    if (maxBodyBytes < 1 || maxBodyBytes == Integer.MAX_VALUE) {
      throw new IllegalArgumentException("maxBodyBytes must be 1 to 2^31 - 2");
    }
  }

  /**
   * Throws {@link IllegalArgumentException} when clientOf was given as null, or the session
   * cookie is not a cookie name or comes with a clientOf.
   */
  static void checkScope(boolean nullClientOf, String sessionCookie, boolean clientOfGiven) {
    if (nullClientOf) {
      throw new IllegalArgumentException("clientOf: a function");
    }
    if (sessionCookie != null) {
      if (!DefaultScope.isCookieName(sessionCookie)) {
        throw new IllegalArgumentException("sessionCookie must be a cookie name (an RFC 6265 token)");
      }
      if (clientOfGiven) {
        throw new IllegalArgumentException("sessionCookie must not come with clientOf (which "
            + "derives the client itself: DefaultScope.clientOf(req, cookie) is the default)");
      }
    }
  }

  private static void between(String option, Duration d, Duration min, Duration max,
      String range) {
    if (d == null || d.compareTo(min) < 0 || d.compareTo(max) > 0) {
      throw new IllegalArgumentException(option + " must be " + range);
    }
  }
}
