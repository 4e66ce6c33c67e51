package dev.claimd;

import io.grpc.ChannelCredentials;
import io.grpc.ClientInterceptors;
import io.grpc.Grpc;
import io.grpc.InsecureChannelCredentials;
import io.grpc.ManagedChannel;
import io.grpc.TlsChannelCredentials;
import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;

/** Builds a {@link Claims}: {@code Claims.builder(target).apiKey(k).tls(ca, cert, key).build()}. */
public final class ClaimsBuilder {
  private final String target;
  private String apiKey;
  private boolean tls;
  private byte[] caPem;
  private byte[] certPem;
  private byte[] keyPem;
  private Duration callTimeout = Claims.DEFAULT_CALL_TIMEOUT;

  ClaimsBuilder(String target) {
    if (target == null || target.isEmpty()) {
      throw new IllegalArgumentException("target: claimd's host:port");
    }
    this.target = target;
  }

  /**
   * The API key, sent as {@code authorization: Bearer <key>} on every call.
   *
   * @param key the API key
   * @return this builder
   */
  public ClaimsBuilder apiKey(String key) {
    this.apiKey = key == null || key.isEmpty() ? null : key;
    return this;
  }

  /**
   * TLS, trusting {@code caPem} (null: the system's roots), with a client certificate when
   * {@code certPem} and {@code keyPem} (PKCS#8) are given (mutual TLS).
   *
   * @param caPem the PEM of the CA that signed claimd's certificate, or null
   * @param certPem the PEM of the client's certificate chain, or null
   * @param keyPem the PEM of the client's PKCS#8 private key, or null
   * @return this builder
   */
  public ClaimsBuilder tls(byte[] caPem, byte[] certPem, byte[] keyPem) {
    if ((certPem == null) != (keyPem == null)) {
      throw new IllegalArgumentException("a client certificate needs its key, and a key its certificate");
    }
    this.tls = true;
    this.caPem = caPem == null ? null : caPem.clone();
    this.certPem = certPem == null ? null : certPem.clone();
    this.keyPem = keyPem == null ? null : keyPem.clone();
    return this;
  }

  /**
   * TLS from PEM files; see {@link #tls(byte[], byte[], byte[])}.
   *
   * @param caPem the CA file, or null
   * @param certPem the client certificate file, or null
   * @param keyPem the client key file (PKCS#8), or null
   * @return this builder
   */
  public ClaimsBuilder tls(Path caPem, Path certPem, Path keyPem) {
    return tls(read(caPem), read(certPem), read(keyPem));
  }

  /**
   * The deadline of each call (default 5 s); a Claim with a wait gets the wait on top.
   *
   * @param timeout the per-call timeout
   * @return this builder
   */
  public ClaimsBuilder callTimeout(Duration timeout) {
    if (timeout == null || timeout.isNegative() || timeout.isZero()) {
      throw new IllegalArgumentException("callTimeout must be positive");
    }
    this.callTimeout = timeout;
    return this;
  }

  /**
   * The client; close it when done.
   *
   * @return the client
   */
  public Claims build() {
    ChannelCredentials credentials;
    if (tls) {
      TlsChannelCredentials.Builder b = TlsChannelCredentials.newBuilder();
      try {
        if (caPem != null) {
          b.trustManager(new ByteArrayInputStream(caPem));
        }
        if (certPem != null) {
          b.keyManager(new ByteArrayInputStream(certPem), new ByteArrayInputStream(keyPem));
        }
      } catch (IOException | RuntimeException e) {
        throw new IllegalArgumentException("TLS: unreadable PEM (" + e.getClass().getSimpleName()
            + ")", e);
      }
      credentials = b.build();
    } else {
      credentials = InsecureChannelCredentials.create();
    }
    ManagedChannel managed = Grpc.newChannelBuilder(target, credentials).build();
    return new Claims(target, tls, managed,
        apiKey == null ? managed
            : ClientInterceptors.intercept(managed, new ApiKeyInterceptor(apiKey)),
        callTimeout);
  }

  @Override
  public String toString() {
    return "ClaimsBuilder{" + target + "}";
  }

  private static byte[] read(Path path) {
    if (path == null) {
      return null;
    }
    try {
      return Files.readAllBytes(path);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }
}
