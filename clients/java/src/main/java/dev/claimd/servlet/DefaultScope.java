package dev.claimd.servlet;

import jakarta.servlet.http.HttpServletRequest;
import java.nio.charset.StandardCharsets;
import java.util.Collections;
import java.util.Enumeration;
import java.util.List;
import java.util.function.Function;

/**
 * The client of a request when the app gives the filter no {@code clientOf}: the same function
 * as the Node, Python and Go packages' default scope, so that their keys meet in claimd.
 *
 * <ol>
 *   <li>{@code Authorization} header lines: {@code "auth:"} and the lowercase hex SHA-256 of
 *       their values joined with {@code ", "};
 *   <li>else the named session cookie in the {@code Cookie} header lines: {@code "cookie:"} and
 *       the SHA-256 of its value exactly as sent (not URL-decoded; the first occurrence wins);
 *   <li>else {@code "anonymous"}: one key space for every request without credentials.
 * </ol>
 *
 * <p>The digests end up in the claim keys claimd stores (visible to whoever may list the
 * namespace's receipts): a weak secret such as a Basic password can be guessed from its
 * digest offline, so apps with Basic auth or sign-in sessions pass a {@code clientOf} that
 * returns the authenticated user's id.
 */
public final class DefaultScope {
  /** The client of a request without credentials. */
  public static final String ANONYMOUS = "anonymous";

  private DefaultScope() {}

  /**
   * The default client of a request.
   *
   * @param req the request
   * @param sessionCookie the name of the session cookie, or null for none
   * @return {@code auth:<hex>}, {@code cookie:<hex>} or {@code anonymous}
   */
  public static String clientOf(HttpServletRequest req, String sessionCookie) {
    return of(lines(req.getHeaders("Authorization")), lines(req.getHeaders("Cookie")),
        sessionCookie);
  }

  /**
   * A {@code clientOf} that scopes by the authenticated principal: {@code "principal:"} and
   * {@code req.getUserPrincipal().getName()} when the request has one (container or Spring
   * Security authentication: stable across token refreshes, no credential digest in the key),
   * else {@link #clientOf(HttpServletRequest, String)}.
   *
   * @param sessionCookie the session cookie's name for requests without a principal, or null
   * @return the client function
   * @throws IllegalArgumentException when {@code sessionCookie} is not a cookie name
   */
  public static Function<HttpServletRequest, String> principalFirst(String sessionCookie) {
    if (sessionCookie != null && !isCookieName(sessionCookie)) {
      throw new IllegalArgumentException("sessionCookie must be a cookie name (an RFC 6265 token)");
    }
    return req -> {
      java.security.Principal principal = req.getUserPrincipal();
      String name = principal == null ? null : principal.getName();
      return name == null || name.isEmpty() ? clientOf(req, sessionCookie) : "principal:" + name;
    };
  }

  /**
   * The default client from the header lines as the server received them.
   *
   * @param authorization the Authorization lines, in order
   * @param cookies the Cookie lines, in order
   * @param sessionCookie the session cookie's name, or null
   */
  static String of(List<String> authorization, List<String> cookies, String sessionCookie) {
    if (!authorization.isEmpty()) {
      return "auth:" + hexSha256(String.join(", ", authorization));
    }
    if (sessionCookie != null) {
      String value = cookie(cookies, sessionCookie);
      if (value != null) {
        return "cookie:" + hexSha256(value);
      }
    }
    return ANONYMOUS;
  }

  /** The value of the first cookie named {@code name}, as sent; null when there is none. */
  static String cookie(List<String> lines, String name) {
    for (String line : lines) {
      for (String pair : line.split(";", -1)) {
        String trimmed = trimSpaces(pair);
        int eq = trimmed.indexOf('=');
        if (eq >= 0 && trimmed.substring(0, eq).equals(name)) {
          return trimmed.substring(eq + 1);
        }
      }
    }
    return null;
  }

  /** Whether {@code name} is a cookie name: an RFC 6265 token (RFC 9110 tchar). */
  static boolean isCookieName(String name) {
    if (name == null || name.isEmpty()) {
      return false;
    }
    for (int i = 0; i < name.length(); i++) {
      char c = name.charAt(i);
      boolean alnum = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
      if (!alnum && "!#$%&'*+-.^_`|~".indexOf(c) < 0) {
        return false;
      }
    }
    return true;
  }

  private static String trimSpaces(String s) {
    int from = 0;
    int to = s.length();
    while (from < to && (s.charAt(from) == ' ' || s.charAt(from) == '\t')) {
      from++;
    }
    while (to > from && (s.charAt(to - 1) == ' ' || s.charAt(to - 1) == '\t')) {
      to--;
    }
    return s.substring(from, to);
  }

  private static List<String> lines(Enumeration<String> values) {
    return values == null ? List.of() : Collections.list(values);
  }

  /**
   * SHA-256 of a header value's bytes as received: the container decoded them as ISO-8859-1
   * (each char is one byte) unless a char is past U+00FF, in which case it decoded UTF-8.
   */
  private static String hexSha256(String value) {
    boolean latin1 = value.chars().allMatch(c -> c <= 0xff);
    return RequestIdentity.hex(RequestIdentity.sha256(
        value.getBytes(latin1 ? StandardCharsets.ISO_8859_1 : StandardCharsets.UTF_8)));
  }
}
