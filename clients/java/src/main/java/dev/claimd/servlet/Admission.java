package dev.claimd.servlet;

import jakarta.servlet.FilterChain;
import jakarta.servlet.ServletException;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import java.io.IOException;
import java.util.Collections;
import java.util.List;
import java.util.Map;

/** The checks before a claim: the header, the key, the body, the claim key, the fingerprint. */
final class Admission {
  private Admission() {}

  /**
   * The exchange of a request that passed the checks; null when it was answered here (400,
   * 413) or passed on unclaimed (no key where none is required).
   */
  static Exchange admit(IdempotencyFilter f, HttpServletRequest req, HttpServletResponse res,
      FilterChain chain) throws IOException, ServletException {
    List<String> values = req.getHeaders(IdempotencyFilter.HEADER) == null ? List.of()
        : Collections.list(req.getHeaders(IdempotencyFilter.HEADER));
    if (values.isEmpty()) {
      if (!f.required) {
        chain.doFilter(req, res);
        return null;
      }
      f.problem(res, 400, "idempotency-key-missing", "Idempotency-Key is missing",
          "This operation is idempotent and requires an Idempotency-Key header.",
          discardBody(f, req));
      return null;
    }
    String key = values.size() == 1 ? RequestIdentity.parseKey(values.get(0)) : null;
    if (key == null) {
      f.problem(res, 400, "idempotency-key-invalid", "Idempotency-Key is invalid",
          RequestIdentity.KEY_RULE, discardBody(f, req));
      return null;
    }
    byte[] body = req.getContentLengthLong() > f.maxBodyBytes ? null
        : req.getInputStream().readNBytes(f.maxBodyBytes + 1);
    if (body == null || body.length > f.maxBodyBytes) {
      f.problem(res, 413, "idempotency-request-too-large", "Request body too large",
          "This operation accepts request bodies of at most " + f.maxBodyBytes + " bytes.",
          CLOSE);
      return null;
    }
    String claim;
    try {
      claim = RequestIdentity.claimKey(f.clientOf.apply(req), key);
    } catch (IllegalArgumentException e) {
      throw new ServletException("idempotency: " + e.getMessage(), e);
    }
    String query = req.getQueryString();
    String url = req.getRequestURI() + (query == null ? "" : "?" + query);
    byte[] fingerprint = RequestIdentity.fingerprint(req.getMethod(), url, body,
        req.getHeader("Content-Type"), f.canonicalJson);
    return new Exchange(f, req, res, chain, claim, fingerprint, body);
  }

  /** The header of a refusal that leaves request bytes unread on the connection. */
  private static final Map<String, String> CLOSE = Map.of("Connection", "close");

  /**
   * Reads and drops the body of a refused request (at most {@code maxBodyBytes}), so that the
   * client's next request on the connection is not parsed from its leftover bytes and the
   * container keeps the connection; a larger body is left unread and the refusal says
   * {@code Connection: close}, so that the client does not send on a connection the container
   * drops.
   */
  private static Map<String, String> discardBody(IdempotencyFilter f, HttpServletRequest req)
      throws IOException {
    if (req.getContentLengthLong() > f.maxBodyBytes) {
      return CLOSE;
    }
    long left = f.maxBodyBytes + 1L;
    byte[] chunk = new byte[8192];
    int n;
    while (left > 0 && (n = req.getInputStream().read(chunk, 0, (int) Math.min(chunk.length, left))) > 0) {
      left -= n;
    }
    return left > 0 ? Map.of() : CLOSE;
  }
}
