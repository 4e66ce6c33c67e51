package dev.claimd.servlet;

import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.Locale;
import java.util.regex.Pattern;

/**
 * What identifies an HTTP request, exactly as the Node client's request-identity: the header's
 * value ({@link #parseKey}), the claim key ({@link #claimKey}: the client and the key, never the
 * method or the path) and the fingerprint ({@link #fingerprint}: method, path with query, body).
 */
final class RequestIdentity {
  /** The longest Idempotency-Key value accepted, after unquoting. */
  static final int MAX_KEY_CHARS = 255;
  /** claimd's limit for a key; a longer claim key is hashed. */
  static final int MAX_CLAIM_KEY_BYTES = 512;
  /** The detail of a 400 for a malformed key: the rule, never the value. */
  static final String KEY_RULE =
      "Idempotency-Key must be 1–255 printable ASCII characters, or a quoted string of them";

  private static final Pattern JSON_TYPE =
      Pattern.compile("[a-z0-9!#$&^_.+-]+/[a-z0-9!#$&^_.+-]+\\+json");
  private static final String UNRESERVED =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.!~*'()";

  private RequestIdentity() {}

  private static boolean printable(int c) {
    return c >= 0x20 && c <= 0x7e;
  }

  /**
   * The value of an Idempotency-Key header: an sf-string ({@code "…"} with {@code \"} and {@code
   * \\} escapes) or bare printable ASCII (no space first or last); null when it is neither, or
   * not 1 to 255 characters once unquoted.
   */
  static String parseKey(String text) {
    StringBuilder value = new StringBuilder();
    if (text.startsWith("\"")) {
      int i = 1;
      for (; i < text.length(); i++) {
        char c = text.charAt(i);
        if (c == '"') {
          break;
        }
        if (!printable(c)) {
          return null;
        }
        if (c == '\\') {
          i++;
          if (i >= text.length()) {
            return null;
          }
          char escaped = text.charAt(i);
          if (escaped != '"' && escaped != '\\') {
            return null;
          }
          value.append(escaped);
        } else {
          value.append(c);
        }
      }
      if (i != text.length() - 1) {
        return null;
      }
    } else {
      for (int i = 0; i < text.length(); i++) {
        if (!printable(text.charAt(i))) {
          return null;
        }
      }
      if (text.startsWith(" ") || text.endsWith(" ")) {
        return null;
      }
      value.append(text);
    }
    int n = value.length();
    return n >= 1 && n <= MAX_KEY_CHARS ? value.toString() : null;
  }

  /**
   * The claimd key of a request: {@code <client or '-'> <key>}, the client percent-encoded as
   * encodeURIComponent does, or {@code sha256:<hex>} of it when longer than 512 bytes.
   *
   * @throws IllegalArgumentException when the client holds a lone surrogate
   */
  static String claimKey(String client, String key) {
    String claim = encodeUriComponent(client == null || client.isEmpty() ? "-" : client)
        + " " + key;
    byte[] bytes = claim.getBytes(StandardCharsets.UTF_8);
    if (bytes.length <= MAX_CLAIM_KEY_BYTES) {
      return claim;
    }
    return "sha256:" + hex(sha256(bytes));
  }

  /** JavaScript's encodeURIComponent. */
  static String encodeUriComponent(String s) {
    StringBuilder out = new StringBuilder();
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      if (UNRESERVED.indexOf(c) >= 0) {
        out.append(c);
        continue;
      }
      int cp;
      if (Character.isHighSurrogate(c) && i + 1 < s.length()
          && Character.isLowSurrogate(s.charAt(i + 1))) {
        cp = Character.toCodePoint(c, s.charAt(++i));
      } else if (Character.isSurrogate(c)) {
        throw new IllegalArgumentException("clientOf returned a malformed string");
      } else {
        cp = c;
      }
      for (byte b : new String(Character.toChars(cp)).getBytes(StandardCharsets.UTF_8)) {
        out.append('%').append(String.format("%02X", b & 0xff));
      }
    }
    return out.toString();
  }

  /** Whether a Content-Type is JSON: application/json or *&#47;*+json, any parameters. */
  static boolean isJsonType(String contentType) {
    if (contentType == null) {
      return false;
    }
    String type = contentType.split(";", -1)[0].strip().toLowerCase(Locale.ROOT);
    return type.equals("application/json") || JSON_TYPE.matcher(type).matches();
  }

  /**
   * SHA-256 of {@code METHOD\n}, the path with its query, {@code \n}, and the body: its
   * canonical JSON when the Content-Type is JSON and it parses (unless {@code canonical} is
   * false), else its raw bytes.
   */
  static byte[] fingerprint(String method, String url, byte[] body, String contentType,
      boolean canonical) {
    byte[] input = body;
    if (canonical && body.length > 0 && isJsonType(contentType)) {
      String text = utf8(body);
      String json = text == null ? null : CanonicalJson.of(text);
      if (json != null) {
        input = json.getBytes(StandardCharsets.UTF_8);
      }
    }
    MessageDigest digest = digest();
    digest.update((method + "\n" + url + "\n").getBytes(StandardCharsets.UTF_8));
    digest.update(input);
    return digest.digest();
  }

  private static String utf8(byte[] body) {
    try {
      return StandardCharsets.UTF_8.newDecoder()
          .onMalformedInput(CodingErrorAction.REPORT)
          .onUnmappableCharacter(CodingErrorAction.REPORT)
          .decode(ByteBuffer.wrap(body))
          .toString();
    } catch (CharacterCodingException e) {
      return null;
    }
  }

  static byte[] sha256(byte[] bytes) {
    return digest().digest(bytes);
  }

  private static MessageDigest digest() {
    try {
      return MessageDigest.getInstance("SHA-256");
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException("SHA-256 is missing", e);
    }
  }

  static String hex(byte[] bytes) {
    StringBuilder out = new StringBuilder(bytes.length * 2);
    for (byte b : bytes) {
      out.append(Character.forDigit((b >> 4) & 0xf, 16)).append(Character.forDigit(b & 0xf, 16));
    }
    return out.toString();
  }
}
