package dev.claimd.servlet;

import jakarta.servlet.http.HttpServletResponse;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.Map;

/** Problems (RFC 9457) as application/problem+json, as the Node middleware's sendProblem. */
final class Problems {
  private Problems() {}

  static void send(HttpServletResponse res, String docsUrl, int status, String code,
      String title, String detail, Map<String, String> headers) throws IOException {
    String type = "about:blank";
    if (docsUrl != null) {
      type = docsUrl + "#" + code;
      res.setHeader("Link", "<" + docsUrl + ">; rel=\"describedby\"; type=\"text/html\"");
    }
    for (Map.Entry<String, String> h : headers.entrySet()) {
      res.setHeader(h.getKey(), h.getValue());
    }
    String body = "{\"type\":" + CanonicalJson.quote(type)
        + ",\"title\":" + CanonicalJson.quote(title)
        + ",\"status\":" + status
        + ",\"detail\":" + CanonicalJson.quote(detail)
        + ",\"code\":" + CanonicalJson.quote(code) + "}";
    byte[] bytes = body.getBytes(StandardCharsets.UTF_8);
    res.setStatus(status);
    res.setHeader("Content-Type", "application/problem+json");
    res.setContentLength(bytes.length);
    res.getOutputStream().write(bytes);
  }
}
