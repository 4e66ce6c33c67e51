package dev.claimd.servlet;

import java.io.ByteArrayOutputStream;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;

/**
 * A response as kept in claimd, byte-identical to the Node client's encodeResponse ({@code
 * IDK2}): the status (u16), flags (u8; 1 = the body was too large to keep), the number of
 * headers (u16), each header as name length (u8), lowercase name, value length (u16) and value
 * (latin1); then the body, or, when it was not kept, its length in bytes (u64).
 */
final class StoredResponse {
  static final byte[] MAGIC = {'I', 'D', 'K', '2'};
  static final int BODY_NOT_STORED = 1;
  /** The response header that marks a replayed response. */
  static final String REPLAYED = "Idempotent-Replayed";
  /**
   * Response headers never stored (besides every {@code proxy-*} one, see {@link #unstored}):
   * hop-by-hop, recomputed, or credentials.
   */
  static final Set<String> UNSTORED = Set.of("connection", "keep-alive", "te", "trailer",
      "transfer-encoding", "upgrade", "content-length", "date", "set-cookie",
      "idempotent-replayed");

  /** Whether a lowercase header name is never stored nor replayed. */
  static boolean unstored(String name) {
    return UNSTORED.contains(name) || name.startsWith("proxy-");
  }

  /**
   * The lowercase header names a Connection header's values list (RFC 9110 §7.6.1): hop-by-hop
   * headers of that response, never stored.
   */
  static Set<String> connectionTokens(java.util.Collection<String> connection) {
    Set<String> names = new java.util.HashSet<>();
    if (connection != null) {
      for (String value : connection) {
        for (String token : value.split(",", -1)) {
          String name = token.strip().toLowerCase(Locale.ROOT);
          if (!name.isEmpty()) {
            names.add(name);
          }
        }
      }
    }
    return names;
  }

  final int status;
  final List<Map.Entry<String, String>> headers;
  /** The body, or null when it was too large to keep. */
  final byte[] body;
  /** The body's length in bytes. */
  final long bytes;

  StoredResponse(int status, List<Map.Entry<String, String>> headers, byte[] body, long bytes) {
    this.status = status;
    this.headers = headers;
    this.body = body;
    this.bytes = body == null ? bytes : body.length;
  }

  /**
   * The headers to replay: all but UNSTORED ones and those a stored Connection header names
   * (this package never stores them; a record written elsewhere might).
   */
  List<Map.Entry<String, String>> replayableHeaders() {
    List<String> connection = new ArrayList<>();
    for (Map.Entry<String, String> h : headers) {
      if (h.getKey().equalsIgnoreCase("connection")) {
        connection.add(h.getValue());
      }
    }
    Set<String> hopByHop = connectionTokens(connection);
    List<Map.Entry<String, String>> kept = new ArrayList<>();
    for (Map.Entry<String, String> h : headers) {
      String name = h.getKey().toLowerCase(Locale.ROOT);
      if (!unstored(name) && !hopByHop.contains(name)) {
        kept.add(h);
      }
    }
    return kept;
  }

  /** The IDK2 encoding. */
  byte[] encode() {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    out.writeBytes(MAGIC);
    u16(out, status);
    out.write(body == null ? BODY_NOT_STORED : 0);
    List<Map.Entry<String, String>> kept = new ArrayList<>();
    for (Map.Entry<String, String> h : headers) {
      if (h.getKey().length() <= 0xff && h.getValue().length() <= 0xffff) {
        kept.add(h);
      }
    }
    u16(out, kept.size());
    for (Map.Entry<String, String> h : kept) {
      byte[] name = latin1(h.getKey().toLowerCase(Locale.ROOT));
      byte[] value = latin1(h.getValue());
      out.write(name.length);
      out.writeBytes(name);
      u16(out, value.length);
      out.writeBytes(value);
    }
    if (body == null) {
      out.writeBytes(ByteBuffer.allocate(8).putLong(bytes).array());
    } else {
      out.writeBytes(body);
    }
    return out.toByteArray();
  }

  /** Decodes what {@link #encode()} (or the Node client) made; null for anything else. */
  static StoredResponse decode(byte[] b) {
    if (b.length < 9 || b[0] != 'I' || b[1] != 'D' || b[2] != 'K' || b[3] != '2') {
      return null;
    }
    int status = u16(b, 4);
    int flags = b[6] & 0xff;
    int count = u16(b, 7);
    List<Map.Entry<String, String>> headers = new ArrayList<>();
    int at = 9;
    for (int i = 0; i < count; i++) {
      if (at + 1 > b.length) {
        return null;
      }
      int nameEnd = at + 1 + (b[at] & 0xff);
      if (nameEnd + 2 > b.length) {
        return null;
      }
      int valueEnd = nameEnd + 2 + u16(b, nameEnd);
      if (valueEnd > b.length) {
        return null;
      }
      headers.add(Map.entry(latin1(b, at + 1, nameEnd), latin1(b, nameEnd + 2, valueEnd)));
      at = valueEnd;
    }
    if (status < 100 || status > 999) {
      return null;
    }
    if ((flags & BODY_NOT_STORED) != 0) {
      if (at + 8 != b.length) {
        return null;
      }
      return new StoredResponse(status, headers, null, ByteBuffer.wrap(b, at, 8).getLong());
    }
    byte[] body = java.util.Arrays.copyOfRange(b, at, b.length);
    return new StoredResponse(status, headers, body, body.length);
  }

  /** Node's latin1 encoding: the low byte of each UTF-16 unit. */
  private static byte[] latin1(String s) {
    byte[] out = new byte[s.length()];
    for (int i = 0; i < s.length(); i++) {
      out[i] = (byte) s.charAt(i);
    }
    return out;
  }

  private static String latin1(byte[] b, int from, int to) {
    char[] chars = new char[to - from];
    for (int i = from; i < to; i++) {
      chars[i - from] = (char) (b[i] & 0xff);
    }
    return new String(chars);
  }

  private static void u16(ByteArrayOutputStream out, int n) {
    out.write((n >> 8) & 0xff);
    out.write(n & 0xff);
  }

  private static int u16(byte[] b, int at) {
    return ((b[at] & 0xff) << 8) | (b[at + 1] & 0xff);
  }
}
