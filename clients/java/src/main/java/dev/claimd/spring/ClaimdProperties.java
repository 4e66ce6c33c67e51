package dev.claimd.spring;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.springframework.boot.context.properties.ConfigurationProperties;

/**
 * The {@code claimd.*} properties of the Spring Boot auto-configuration: where claimd is
 * ({@code claimd.target}, {@code claimd.api-key}, {@code claimd.tls.*}) and the Idempotency-Key
 * filter ({@code claimd.idempotency.*}). An unknown {@code claimd.*} property fails the start,
 * so a misspelt one is never silently ignored.
 */
@ConfigurationProperties(prefix = "claimd", ignoreUnknownFields = false)
public class ClaimdProperties {
  /** How the filter scopes keys when the app gives no client function. */
  public enum Scope {
    /**
     * The authenticated principal's name ({@code principal:<name>}) when the request has one
     * (Spring Security, container authentication), else the credentials' digest.
     */
    PRINCIPAL,
    /** The Authorization header's digest, else the session cookie's, else anonymous. */
    CREDENTIALS
  }

  /** claimd's host:port; the Claims bean is registered only when it is set. */
  private String target;
  /** The API key, sent as "authorization: Bearer KEY" on every call. */
  private String apiKey;
  /** The deadline of each call to claimd. */
  private Duration callTimeout = Duration.ofSeconds(5);
  private final Tls tls = new Tls();
  private final Idempotency idempotency = new Idempotency();

  /** TLS to claimd; on when {@code enabled} or any file is set. */
  public static class Tls {
    /** TLS with the system's trusted roots (or ca-file) even without any file set. */
    private boolean enabled;
    /** The PEM file of the CA that signed claimd's certificate (unset: the system's roots). */
    private String caFile;
    /** The client certificate's PEM file (mutual TLS; with key-file). */
    private String certFile;
    /** The client key's PEM file, PKCS#8 (mutual TLS; with cert-file). */
    private String keyFile;

    public boolean isEnabled() {
      return enabled;
    }

    public void setEnabled(boolean enabled) {
      this.enabled = enabled;
    }

    public String getCaFile() {
      return caFile;
    }

    public void setCaFile(String caFile) {
      this.caFile = caFile;
    }

    public String getCertFile() {
      return certFile;
    }

    public void setCertFile(String certFile) {
      this.certFile = certFile;
    }

    public String getKeyFile() {
      return keyFile;
    }

    public void setKeyFile(String keyFile) {
      this.keyFile = keyFile;
    }

    /** Whether TLS is on: enabled, or any file set. */
    boolean on() {
      return enabled || caFile != null || certFile != null || keyFile != null;
    }
  }

  /** The Idempotency-Key filter; registered only when {@code namespace} is set. */
  public static class Idempotency {
    /** The claimd namespace of the keys, e.g. orders-api. */
    private String namespace;
    /** The servlet URL patterns the filter is mapped to. */
    private List<String> urlPatterns = new ArrayList<>(List.of("/*"));
    /** The HTTP methods it applies to. */
    private List<String> methods = new ArrayList<>(List.of("POST", "PATCH"));
    /** Whether a request without the header is refused with 400 (false: runs unclaimed). */
    private boolean required = true;
    /** How long a retry waits for the first request's answer (0 to 60 s). */
    private Duration wait = Duration.ofSeconds(10);
    /** The lease of a running handler (1 s to 24 h), kept alive by heartbeats. */
    private Duration lease = Duration.ofSeconds(30);
    /** When a key given back by a throwing handler may run again (1 s to 24 h). */
    private Duration retryAfter = Duration.ofSeconds(1);
    /** How keys are scoped: principal (default) or credentials. */
    private Scope scope = Scope.PRINCIPAL;
    /** The session cookie that scopes requests with neither a principal nor Authorization. */
    private String sessionCookie;
    /** The largest request body read, in bytes; past it 413. */
    private int maxBodyBytes = 1_048_576;
    /** The largest response stored whole, in bytes (1 to 65536). */
    private int maxResponseBytes = 65_536;
    /** Whether a 5xx gives the key back (Retry) instead of being stored and replayed. */
    private boolean retryServerErrors;
    /** Whether JSON bodies are fingerprinted as canonical JSON. */
    private boolean canonicalJson = true;
    /** A documentation URL: problem types become URL#code, with a Link header. */
    private String docsUrl;
    /** The filter's order; after Spring Security's filter chain (-100) by default. */
    private int order;

    public String getNamespace() {
      return namespace;
    }

    public void setNamespace(String namespace) {
      this.namespace = namespace;
    }

    public List<String> getUrlPatterns() {
      return urlPatterns;
    }

    public void setUrlPatterns(List<String> urlPatterns) {
      this.urlPatterns = urlPatterns;
    }

    public List<String> getMethods() {
      return methods;
    }

    public void setMethods(List<String> methods) {
      this.methods = methods;
    }

    public boolean isRequired() {
      return required;
    }

    public void setRequired(boolean required) {
      this.required = required;
    }

    public Duration getWait() {
      return wait;
    }

    public void setWait(Duration wait) {
      this.wait = wait;
    }

    public Duration getLease() {
      return lease;
    }

    public void setLease(Duration lease) {
      this.lease = lease;
    }

    public Duration getRetryAfter() {
      return retryAfter;
    }

    public void setRetryAfter(Duration retryAfter) {
      this.retryAfter = retryAfter;
    }

    public Scope getScope() {
      return scope;
    }

    public void setScope(Scope scope) {
      this.scope = scope;
    }

    public String getSessionCookie() {
      return sessionCookie;
    }

    public void setSessionCookie(String sessionCookie) {
      this.sessionCookie = sessionCookie;
    }

    public int getMaxBodyBytes() {
      return maxBodyBytes;
    }

    public void setMaxBodyBytes(int maxBodyBytes) {
      this.maxBodyBytes = maxBodyBytes;
    }

    public int getMaxResponseBytes() {
      return maxResponseBytes;
    }

    public void setMaxResponseBytes(int maxResponseBytes) {
      this.maxResponseBytes = maxResponseBytes;
    }

    public boolean isRetryServerErrors() {
      return retryServerErrors;
    }

    public void setRetryServerErrors(boolean retryServerErrors) {
      this.retryServerErrors = retryServerErrors;
    }

    public boolean isCanonicalJson() {
      return canonicalJson;
    }

    public void setCanonicalJson(boolean canonicalJson) {
      this.canonicalJson = canonicalJson;
    }

    public String getDocsUrl() {
      return docsUrl;
    }

    public void setDocsUrl(String docsUrl) {
      this.docsUrl = docsUrl;
    }

    public int getOrder() {
      return order;
    }

    public void setOrder(int order) {
      this.order = order;
    }
  }

  public String getTarget() {
    return target;
  }

  public void setTarget(String target) {
    this.target = target;
  }

  public String getApiKey() {
    return apiKey;
  }

  public void setApiKey(String apiKey) {
    this.apiKey = apiKey;
  }

  public Duration getCallTimeout() {
    return callTimeout;
  }

  public void setCallTimeout(Duration callTimeout) {
    this.callTimeout = callTimeout;
  }

  public Tls getTls() {
    return tls;
  }

  public Idempotency getIdempotency() {
    return idempotency;
  }
}
