package dev.claimd.servlet;

import dev.claimd.ClaimOptions;
import dev.claimd.ClaimResult;
import dev.claimd.Claims;
import dev.claimd.ClaimdException;
import dev.claimd.Lease;
import dev.claimd.QuotaException;
import dev.claimd.v1.Receipt;
import io.grpc.Status;
import jakarta.servlet.FilterChain;
import jakarta.servlet.ServletException;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import java.io.IOException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;

/** One request through the filter: the claim, then running, replaying or refusing it. */
final class Exchange {
  /** Headers of a response whose body was not stored that do not fit the problem body. */
  private static final Set<String> BODY_HEADERS =
      Set.of("content-type", "content-length", "content-encoding");

  private final IdempotencyFilter f;
  private final HttpServletRequest req;
  private final HttpServletResponse res;
  private final FilterChain chain;
  private final String claim;
  private final byte[] fingerprint;
  private final byte[] body;

  Exchange(IdempotencyFilter filter, HttpServletRequest req, HttpServletResponse res,
      FilterChain chain, String claim, byte[] fingerprint, byte[] body) {
    this.f = filter;
    this.req = req;
    this.res = res;
    this.chain = chain;
    this.claim = claim;
    this.fingerprint = fingerprint;
    this.body = body;
  }

  void run() throws IOException, ServletException {
    long started = System.nanoTime();
    for (;;) {
      long leftMs = Math.max(0, f.wait.toMillis() - (System.nanoTime() - started) / 1_000_000);
      ClaimResult result;
      try {
        result = f.claims.claim(f.namespace, claim, fingerprint, ClaimOptions.builder()
            .lease(f.lease).wait(Duration.ofMillis(leftMs)).build());
      } catch (ClaimdException e) {
        storeError(e);
        return;
      }
      Receipt receipt = result.receipt();
      switch (result.decision()) {
        case CLAIMED:
          handle(result.lease().orElseThrow());
          return;
        case COMPLETED:
          completed(receipt);
          return;
        case IN_FLIGHT:
          f.problem(res, 409, "idempotency-request-in-progress",
              "A request with this Idempotency-Key is still being processed",
              "Retry the request later; it will get the same response.",
              Map.of("Retry-After", secondsUntil(receipt.getLeaseExpiresAt())));
          return;
        case RETRY_SCHEDULED: {
          long due = Math.max(0, Claims.millis(receipt.getNextAttemptAt())
              - System.currentTimeMillis());
          long left = f.wait.toMillis() - (System.nanoTime() - started) / 1_000_000;
          if (due <= left) {
            sleep(Math.max(due, 20));
            continue;
          }
          f.problem(res, 503, "idempotency-retry-scheduled",
              "The last attempt of this request failed",
              "Retry the request later to run it again.",
              Map.of("Retry-After", secondsUntil(receipt.getNextAttemptAt())));
          return;
        }
        case QUARANTINED:
          f.problem(res, 422, "idempotency-key-expired", "Idempotency-Key is used up",
              "Every attempt of this request failed; use a new Idempotency-Key to try again.",
              Map.of());
          return;
        case CONFLICT:
          f.problem(res, 422, "idempotency-key-reused", "Idempotency-Key is already used",
              "This key was used with a different request (another body, method or path); "
                  + "use a new key for a new request.", Map.of());
          return;
        default:
          throw new IllegalStateException("unexpected decision " + result.decision());
      }
    }
  }

  /**
   * The first request: runs the chain, stores its answer, then sends it. A chain that went
   * asynchronous gives the key back and fails (unsupported). A chain that throws after it
   * flushed its answer (flushBuffer, or a flushed or closed body) answered: like Node, that
   * answer is stored and sent and the exception goes no further than the request attribute
   * {@link IdempotencyFilter#HANDLER_ERROR}; one that throws before gives the key back.
   */
  private void handle(Lease lease) throws IOException, ServletException {
    Map<String, String> before = snapshot();
    BufferingResponse buffered = new BufferingResponse(res);
    try {
      chain.doFilter(new BufferedRequest(req, body), buffered);
    } catch (Throwable t) {
      if (!buffered.answered() || req.isAsyncStarted()) {
        giveBack(lease, className(t));
        throw t;
      }
      req.setAttribute(IdempotencyFilter.HANDLER_ERROR, t);
    }
    if (req.isAsyncStarted()) {
      giveBack(lease, "asynchronous handler");
      throw new ServletException(
          "IdempotencyFilter does not support asynchronous handlers on this route");
    }
    int status = buffered.getStatus();
    byte[] answer = buffered.body();
    if (f.retryServerErrors && status >= 500) {
      giveBack(lease, "HTTP " + status);
      buffered.send();
      return;
    }
    List<Map.Entry<String, String>> headers = storedHeaders(before);
    byte[] record = new StoredResponse(status, headers, answer, 0).encode();
    if (record.length > f.maxResponseBytes) {
      // Too large to keep: the key is settled all the same, with status and headers.
      record = new StoredResponse(status, headers, null, answer.length).encode();
      if (record.length > f.maxResponseBytes) {
        record = new StoredResponse(status, List.of(), null, answer.length).encode();
      }
    }
    try {
      lease.complete(record);
    } catch (ClaimdException e) {
      // The handler ran: its answer is real, so the client gets it all the same.
    } finally {
      lease.close();
    }
    buffered.send();
  }

  private void giveBack(Lease lease, String error) {
    try {
      lease.retry(error, f.retryAfter);
    } catch (ClaimdException e) {
      // The lease runs out instead.
    } finally {
      lease.close();
    }
  }

  private void completed(Receipt receipt) throws IOException {
    if (receipt.hasResponsePrunedAt() || receipt.getResponse().isEmpty()) {
      f.problem(res, 422, "idempotency-key-expired", "Idempotency-Key is used up",
          "This key was used and its response is no longer kept; use a new key.", Map.of());
      return;
    }
    StoredResponse record = StoredResponse.decode(receipt.getResponse().toByteArray());
    if (record == null) {
      f.problem(res, 500, "idempotency-response-unreadable", "Stored response cannot be replayed",
          "The stored response of this key is not one this middleware wrote.", Map.of());
      return;
    }
    boolean notStored = record.body == null;
    Map<String, List<String>> values = new LinkedHashMap<>();
    // A record written elsewhere (another package, an older version) replays none of them.
    for (Map.Entry<String, String> h : record.replayableHeaders()) {
      if (notStored && BODY_HEADERS.contains(h.getKey())) {
        continue;
      }
      values.computeIfAbsent(h.getKey(), k -> new ArrayList<>()).add(h.getValue());
    }
    for (Map.Entry<String, List<String>> h : values.entrySet()) {
      res.setHeader(h.getKey(), h.getValue().get(0));
      for (String more : h.getValue().subList(1, h.getValue().size())) {
        res.addHeader(h.getKey(), more);
      }
    }
    res.setHeader(StoredResponse.REPLAYED, "true");
    if (notStored) {
      f.problem(res, record.status, "idempotency-response-not-stored", "Response not stored",
          "This request was handled; its response body (" + record.bytes + " bytes) was too "
              + "large to keep, so only its status and headers are replayed.", Map.of());
      return;
    }
    res.setStatus(record.status);
    res.setContentLength(record.body.length);
    res.getOutputStream().write(record.body);
  }

  private void storeError(ClaimdException e) throws IOException {
    if (e instanceof QuotaException quota) {
      // A tenant quota refused the Claim: nothing was taken, the sender may come back then.
      f.problem(res, 503, "idempotency-quota-exceeded", "Idempotency store quota exceeded",
          "This service is over its quota of the idempotency store; retry after Retry-After "
              + "seconds.",
          Map.of("Retry-After", retryAfterSeconds(quota.retryAfter())));
      return;
    }
    Status.Code code = e.code();
    if (code == Status.Code.UNAVAILABLE || code == Status.Code.DEADLINE_EXCEEDED
        || code == Status.Code.RESOURCE_EXHAUSTED) {
      f.problem(res, 503, "idempotency-store-unavailable", "Idempotency store unavailable",
          "The idempotency store could not be asked (" + code + "); retry later.",
          Map.of("Retry-After", "1"));
      return;
    }
    f.problem(res, 500, "idempotency-store-error", "Idempotency store error",
        "The idempotency store refused the request (" + code + ").", Map.of());
  }

  /** A quota's delay as Retry-After: whole seconds, rounded up, at least 1. */
  static String retryAfterSeconds(Duration delay) {
    long seconds = delay.getSeconds() + (delay.getNano() > 0 ? 1 : 0);
    return Long.toString(Math.max(1, seconds));
  }

  /** The response's headers before the handler ran, to tell its own ones later. */
  private Map<String, String> snapshot() {
    Map<String, String> before = new HashMap<>();
    for (String name : res.getHeaderNames()) {
      before.put(name.toLowerCase(Locale.ROOT), String.join("\n", res.getHeaders(name)));
    }
    return before;
  }

  /**
   * Content-Type and the headers the handler set or changed, none of UNSTORED and none that the
   * response's Connection header names (hop-by-hop).
   */
  private List<Map.Entry<String, String>> storedHeaders(Map<String, String> before) {
    List<Map.Entry<String, String>> headers = new ArrayList<>();
    Set<String> hopByHop = StoredResponse.connectionTokens(res.getHeaders("Connection"));
    Set<String> seen = new java.util.HashSet<>();
    for (String original : res.getHeaderNames()) {
      String name = original.toLowerCase(Locale.ROOT);
      if (StoredResponse.unstored(name) || hopByHop.contains(name) || !seen.add(name)) {
        continue;
      }
      List<String> list = new ArrayList<>(res.getHeaders(original));
      if (!name.equals("content-type") && String.join("\n", list).equals(before.get(name))) {
        continue;
      }
      for (String value : list) {
        headers.add(Map.entry(name, value));
      }
    }
    return headers;
  }

  /** The name of a thrown value's class: all a Retry says of it (a message may hold secrets). */
  private static String className(Throwable t) {
    String simple = t.getClass().getSimpleName();
    return simple.isEmpty() ? t.getClass().getName() : simple;
  }

  /** Whole seconds (at least 1) until a timestamp. */
  private static String secondsUntil(com.google.protobuf.Timestamp ts) {
    long ms = Claims.millis(ts) - System.currentTimeMillis();
    return String.valueOf(Math.max(1, (ms + 999) / 1000));
  }

  private static void sleep(long ms) throws ServletException {
    try {
      Thread.sleep(ms);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new ServletException("interrupted while waiting for a retry", e);
    }
  }
}
