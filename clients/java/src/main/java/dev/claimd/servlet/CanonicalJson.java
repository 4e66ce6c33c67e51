package dev.claimd.servlet;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * The canonical form of a JSON text, exactly as the Node client's {@code canonicalJson}: object
 * keys sorted by code point (the last of duplicate names wins), no insignificant whitespace,
 * strings as JSON.stringify writes them, numbers as they were written. Null when the text is
 * not JSON or nests deeper than 512.
 */
final class CanonicalJson {
  private static final int MAX_DEPTH = 512;

  private final String text;
  private int at;

  private CanonicalJson(String text) {
    this.text = text;
  }

  /** The canonical form of {@code text}, or null. */
  static String of(String text) {
    CanonicalJson parser = new CanonicalJson(text);
    String result = parser.value(0);
    if (result == null) {
      return null;
    }
    parser.space();
    return parser.at == text.length() ? result : null;
  }

  /** A string as JSON.stringify writes it (lone surrogates as lowercase {@code \\u} escapes). */
  static String quote(String s) {
    StringBuilder out = new StringBuilder(s.length() + 2).append('"');
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      switch (c) {
        case '"': out.append("\\\""); break;
        case '\\': out.append("\\\\"); break;
        case '\b': out.append("\\b"); break;
        case '\f': out.append("\\f"); break;
        case '\n': out.append("\\n"); break;
        case '\r': out.append("\\r"); break;
        case '\t': out.append("\\t"); break;
        default:
          if (c < 0x20) {
            out.append(String.format("\\u%04x", (int) c));
          } else if (Character.isHighSurrogate(c) && i + 1 < s.length()
              && Character.isLowSurrogate(s.charAt(i + 1))) {
            out.append(c).append(s.charAt(++i));
          } else if (Character.isSurrogate(c)) {
            out.append(String.format("\\u%04x", (int) c));
          } else {
            out.append(c);
          }
      }
    }
    return out.append('"').toString();
  }

  private char peek() {
    return at < text.length() ? text.charAt(at) : '\0';
  }

  private boolean more() {
    return at < text.length();
  }

  private void space() {
    while (more()) {
      char c = text.charAt(at);
      if (c != ' ' && c != '\t' && c != '\n' && c != '\r') {
        return;
      }
      at++;
    }
  }

  private String value(int depth) {
    if (depth > MAX_DEPTH) {
      return null;
    }
    space();
    if (!more()) {
      return null;
    }
    char c = peek();
    if (c == '{') {
      return object(depth);
    }
    if (c == '[') {
      return array(depth);
    }
    if (c == '"') {
      String s = string();
      return s == null ? null : quote(s);
    }
    for (String literal : new String[] {"true", "false", "null"}) {
      if (text.startsWith(literal, at)) {
        at += literal.length();
        return literal;
      }
    }
    return number();
  }

  private String object(int depth) {
    at++;
    space();
    if (more() && peek() == '}') {
      at++;
      return "{}";
    }
    Map<String, String> members = new HashMap<>();
    for (;;) {
      space();
      if (!more() || peek() != '"') {
        return null;
      }
      String name = string();
      if (name == null) {
        return null;
      }
      space();
      if (!more() || peek() != ':') {
        return null;
      }
      at++;
      String inner = value(depth + 1);
      if (inner == null) {
        return null;
      }
      members.put(name, inner);
      space();
      if (more() && peek() == ',') {
        at++;
      } else if (more() && peek() == '}') {
        break;
      } else {
        return null;
      }
    }
    at++;
    List<String> names = new ArrayList<>(members.keySet());
    names.sort(CanonicalJson::byCodePoint);
    StringBuilder out = new StringBuilder("{");
    for (String name : names) {
      if (out.length() > 1) {
        out.append(',');
      }
      out.append(quote(name)).append(':').append(members.get(name));
    }
    return out.append('}').toString();
  }

  private String array(int depth) {
    at++;
    space();
    if (more() && peek() == ']') {
      at++;
      return "[]";
    }
    StringBuilder out = new StringBuilder("[");
    for (;;) {
      String inner = value(depth + 1);
      if (inner == null) {
        return null;
      }
      if (out.length() > 1) {
        out.append(',');
      }
      out.append(inner);
      space();
      if (more() && peek() == ',') {
        at++;
      } else if (more() && peek() == ']') {
        break;
      } else {
        return null;
      }
    }
    at++;
    return out.append(']').toString();
  }

  /** A JSON string token at {@code at}, unescaped; null when there is none. */
  private String string() {
    int i = at + 1;
    StringBuilder out = new StringBuilder();
    while (i < text.length()) {
      char c = text.charAt(i);
      if (c == '"') {
        at = i + 1;
        return out.toString();
      }
      if (c < 0x20) {
        return null;
      }
      if (c != '\\') {
        out.append(c);
        i++;
        continue;
      }
      if (i + 1 >= text.length()) {
        return null;
      }
      char e = text.charAt(i + 1);
      switch (e) {
        case '"': out.append('"'); break;
        case '\\': out.append('\\'); break;
        case '/': out.append('/'); break;
        case 'b': out.append('\b'); break;
        case 'f': out.append('\f'); break;
        case 'n': out.append('\n'); break;
        case 'r': out.append('\r'); break;
        case 't': out.append('\t'); break;
        case 'u':
          if (i + 6 > text.length()) {
            return null;
          }
          int code = 0;
          for (int j = i + 2; j < i + 6; j++) {
            int digit = Character.digit(text.charAt(j), 16);
            if (digit < 0 || text.charAt(j) > 'f') {
              return null;
            }
            code = code * 16 + digit;
          }
          out.append((char) code);
          i += 4;
          break;
        default:
          return null;
      }
      i += 2;
    }
    return null;
  }

  /** A JSON number token at {@code at}, as written; null when there is none. */
  private String number() {
    int start = at;
    int i = at;
    if (i < text.length() && text.charAt(i) == '-') {
      i++;
    }
    if (i < text.length() && text.charAt(i) == '0') {
      i++;
    } else if (i < text.length() && text.charAt(i) >= '1' && text.charAt(i) <= '9') {
      i = digits(i);
    } else {
      return null;
    }
    if (i + 1 < text.length() && text.charAt(i) == '.' && isDigit(text.charAt(i + 1))) {
      i = digits(i + 1);
    }
    if (i < text.length() && (text.charAt(i) == 'e' || text.charAt(i) == 'E')) {
      int j = i + 1;
      if (j < text.length() && (text.charAt(j) == '+' || text.charAt(j) == '-')) {
        j++;
      }
      if (j < text.length() && isDigit(text.charAt(j))) {
        i = digits(j);
      }
    }
    at = i;
    return text.substring(start, i);
  }

  private int digits(int i) {
    while (i < text.length() && isDigit(text.charAt(i))) {
      i++;
    }
    return i;
  }

  private static boolean isDigit(char c) {
    return c >= '0' && c <= '9';
  }

  /** Orders strings by code point (not UTF-16 unit), as Node's byCodePoint. */
  static int byCodePoint(String a, String b) {
    int n = Math.min(a.length(), b.length());
    for (int i = 0; i < n; i++) {
      if (a.charAt(i) != b.charAt(i)) {
        return a.codePointAt(i) - b.codePointAt(i);
      }
    }
    return a.length() - b.length();
  }
}
