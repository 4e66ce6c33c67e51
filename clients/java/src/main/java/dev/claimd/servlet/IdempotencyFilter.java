package dev.claimd.servlet;

import dev.claimd.Claims;
import jakarta.servlet.DispatcherType;
import jakarta.servlet.Filter;
import jakarta.servlet.FilterChain;
import jakarta.servlet.ServletException;
import jakarta.servlet.ServletRequest;
import jakarta.servlet.ServletResponse;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import java.io.IOException;
import java.time.Duration;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.function.Function;
import java.util.stream.Collectors;

/**
 * The Idempotency-Key HTTP header (IETF HTTPAPI draft) on claimd, as a servlet filter with the
 * rules of the Node client's Express middleware. A request is claimed under its client (the
 * builder's clientOf, or {@link DefaultScope}: never shared by two credentials) and key;
 * its fingerprint is its method, path with query and body (canonical JSON for JSON bodies), so
 * the same key with another body or on another route is 422. The first request runs the chain;
 * whatever it answers (any status) is stored with Complete, then sent, and every retry gets it
 * replayed with {@code Idempotent-Replayed: true}: a handler that answered never runs again. A
 * chain that throws before it answered gives the key back (Retry, with the exception's class
 * name only); one that flushed its answer, then threw, answered (see {@link #HANDLER_ERROR}).
 * Only REQUEST dispatches are claimed (FORWARD, INCLUDE, ERROR and ASYNC pass straight
 * through); a handler that starts asynchronous processing is not supported: its key is given
 * back and the filter throws a {@link ServletException}. Nothing here logs; no problem body
 * carries a key, a token or a body.
 *
 * <p>Build it with {@link #builder(Claims, String)} and register it as any {@link Filter}.
 */
public final class IdempotencyFilter implements Filter {
  /** The request header. */
  public static final String HEADER = "Idempotency-Key";
  /** The response header marking a replayed response. */
  public static final String REPLAYED = StoredResponse.REPLAYED;
  /** claimd's limit for a stored response: the default and maximum of maxResponseBytes. */
  public static final int DEFAULT_MAX_RESPONSE_BYTES = 65_536;
  /**
   * The request attribute holding what a handler threw after it had answered (flushed its
   * response): the answer is stored and sent, and the exception is not rethrown.
   */
  public static final String HANDLER_ERROR = "dev.claimd.servlet.IdempotencyFilter.handlerError";
  /** The default limit of a request body the filter reads. */
  public static final int DEFAULT_MAX_BODY_BYTES = 1 << 20;

  final Claims claims;
  final String namespace;
  final boolean required;
  final Duration wait;
  final Duration lease;
  final Duration retryAfter;
  final Function<HttpServletRequest, String> clientOf;
  final int maxResponseBytes;
  final int maxBodyBytes;
  final boolean retryServerErrors;
  final boolean canonicalJson;
  final Set<String> methods;
  final String docsUrl;

  private IdempotencyFilter(Builder b) {
    this.claims = b.claims;
    this.namespace = b.namespace;
    this.required = b.required;
    this.wait = b.wait;
    this.lease = b.lease;
    this.retryAfter = b.retryAfter;
    String cookie = b.sessionCookie;
    this.clientOf = b.clientOfGiven ? b.clientOf : req -> DefaultScope.clientOf(req, cookie);
    this.maxResponseBytes = b.maxResponseBytes;
    this.maxBodyBytes = b.maxBodyBytes;
    this.retryServerErrors = b.retryServerErrors;
    this.canonicalJson = b.canonicalJson;
    this.methods = b.methods;
    this.docsUrl = b.docsUrl;
  }

  /**
   * A builder of the filter for claims kept in {@code namespace}.
   *
   * @param claims the claimd client
   * @param namespace the claimd namespace of the keys, e.g. {@code "orders-api"}
   * @return the builder
   */
  public static Builder builder(Claims claims, String namespace) {
    return new Builder(claims, namespace);
  }

  @Override
  public void doFilter(ServletRequest request, ServletResponse response, FilterChain chain)
      throws IOException, ServletException {
    if (!(request instanceof HttpServletRequest) || !(response instanceof HttpServletResponse)) {
      chain.doFilter(request, response);
      return;
    }
    HttpServletRequest req = (HttpServletRequest) request;
    HttpServletResponse res = (HttpServletResponse) response;
    if (req.getDispatcherType() != DispatcherType.REQUEST
        || !methods.contains(req.getMethod().toUpperCase(Locale.ROOT))) {
      chain.doFilter(request, response);
      return;
    }
    Exchange exchange = Admission.admit(this, req, res, chain);
    if (exchange != null) {
      exchange.run();
    }
  }

  void problem(HttpServletResponse res, int status, String code, String title, String detail,
      Map<String, String> headers) throws IOException {
    Problems.send(res, docsUrl, status, code, title, detail, headers);
  }

  @Override
  public String toString() {
    return "IdempotencyFilter{" + namespace + ", " + methods + "}";
  }

  /** Builds an {@link IdempotencyFilter}; every option has the Node middleware's default. */
  public static final class Builder {
    private final Claims claims;
    private final String namespace;
    private boolean required = true;
    private Duration wait = Duration.ofSeconds(10);
    private Duration lease = Duration.ofSeconds(30);
    private Duration retryAfter = Duration.ofSeconds(1);
    private Function<HttpServletRequest, String> clientOf;
    private boolean clientOfGiven;
    private String sessionCookie;
    private int maxResponseBytes = DEFAULT_MAX_RESPONSE_BYTES;
    private int maxBodyBytes = DEFAULT_MAX_BODY_BYTES;
    private boolean retryServerErrors;
    private boolean canonicalJson = true;
    private Set<String> methods = Set.of("POST", "PATCH");
    private String docsUrl;

    private Builder(Claims claims, String namespace) {
      if (claims == null) {
        throw new IllegalArgumentException("claims: a Claims client");
      }
      if (namespace == null || namespace.isEmpty()) {
        throw new IllegalArgumentException("namespace: a claimd namespace");
      }
      this.claims = claims;
      this.namespace = namespace;
    }

    /**
     * Whether a request without the header is refused with 400 (default true); false lets it
     * through unclaimed.
     *
     * @param required whether the header is required
     * @return this builder
     */
    public Builder required(boolean required) {
      this.required = required;
      return this;
    }

    /**
     * How long a retry waits for the first request's answer (0 to 60 s, default 10 s), passed
     * as Claim's wait; past it the retry is answered 409 with Retry-After.
     *
     * @param wait the wait
     * @return this builder
     */
    public Builder wait(Duration wait) {
      if (wait == null || wait.isNegative() || wait.compareTo(Duration.ofSeconds(60)) > 0) {
        throw new IllegalArgumentException("wait must be 0 to 60 s");
      }
      this.wait = wait;
      return this;
    }

    /**
     * The lease of a running handler (1 s to 24 h, default 30 s), kept alive by heartbeats;
     * checked by {@link #build()}.
     *
     * @param lease the lease
     * @return this builder
     */
    public Builder lease(Duration lease) {
      this.lease = lease;
      return this;
    }

    /**
     * When a key given back (a throwing chain) may run again (1 s to 24 h, default 1 s);
     * checked by {@link #build()}.
     *
     * @param retryAfter the delay
     * @return this builder
     */
    public Builder retryAfter(Duration retryAfter) {
      this.retryAfter = retryAfter;
      return this;
    }

    /**
     * Who sent the request: keys are per client. Return the authenticated identity (the
     * principal's name, a verified token's subject), never a header the caller chooses;
     * {@code ""} is claimed as {@code -}. Without it the client is {@link DefaultScope}'s: a
     * digest of the Authorization header, else of the {@link #sessionCookie session cookie},
     * else {@code anonymous}.
     *
     * @param clientOf the request's client
     * @return this builder
     */
    public Builder clientOf(Function<HttpServletRequest, String> clientOf) {
      this.clientOf = clientOf;
      this.clientOfGiven = true;
      return this;
    }

    /**
     * The session cookie that scopes a request without an Authorization header when there is
     * no {@link #clientOf}: its value's SHA-256 is the client ({@code cookie:<hex>}). Checked
     * by {@link #build()}: an RFC 6265 cookie name, and not together with {@code clientOf}
     * (which derives the client itself).
     *
     * @param name the cookie's name, e.g. {@code "JSESSIONID"}
     * @return this builder
     */
    public Builder sessionCookie(String name) {
      this.sessionCookie = name;
      return this;
    }

    /**
     * The largest response stored whole (1 to 65536, default 65536); a larger one still
     * settles the key, replayed as its status and headers.
     *
     * @param max the limit in bytes
     * @return this builder
     */
    public Builder maxResponseBytes(int max) {
      if (max < 1 || max > DEFAULT_MAX_RESPONSE_BYTES) {
        throw new IllegalArgumentException("maxResponseBytes must be 1 to 65536");
      }
      this.maxResponseBytes = max;
      return this;
    }

    /**
     * The largest request body read (1 to 2^31 - 2, default 1 MiB); a larger one is
     * answered 413.
     *
     * @param max the limit in bytes
     * @return this builder
     */
    public Builder maxBodyBytes(int max) {
      if (max < 1 || max == Integer.MAX_VALUE) {
        throw new IllegalArgumentException("maxBodyBytes must be 1 to 2^31 - 2");
      }
      this.maxBodyBytes = max;
      return this;
    }

    /**
     * Whether a 5xx gives the key back (Retry) instead of being stored and replayed (default
     * false).
     *
     * @param retry whether to retry server errors
     * @return this builder
     */
    public Builder retryServerErrors(boolean retry) {
      this.retryServerErrors = retry;
      return this;
    }

    /**
     * Whether JSON bodies are fingerprinted as canonical JSON (default true).
     *
     * @param canonical whether to canonicalize
     * @return this builder
     */
    public Builder canonicalJson(boolean canonical) {
      this.canonicalJson = canonical;
      return this;
    }

    /**
     * The methods the filter applies to (default POST and PATCH).
     *
     * @param methods the HTTP methods
     * @return this builder
     */
    public Builder methods(String... methods) {
      this.methods = java.util.Arrays.stream(methods)
          .map(m -> m.toUpperCase(Locale.ROOT)).collect(Collectors.toUnmodifiableSet());
      return this;
    }

    /**
     * A documentation URL: problem types become {@code <url>#<code>}, with a Link header.
     *
     * @param url the documentation URL
     * @return this builder
     */
    public Builder docsUrl(String url) {
      this.docsUrl = url;
      return this;
    }

    /**
     * The filter.
     *
     * @return the filter
     */
    public IdempotencyFilter build() {
      FilterOptions.check(namespace, lease, retryAfter, wait, maxResponseBytes, maxBodyBytes);
      FilterOptions.checkScope(clientOfGiven && clientOf == null, sessionCookie, clientOfGiven);
      if (methods == null) {
        throw new IllegalArgumentException("methods: HTTP methods");
      }
      return new IdempotencyFilter(this);
    }
  }
}
