package dev.claimd.servlet;

import jakarta.servlet.DispatcherType;
import jakarta.servlet.http.HttpServlet;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.EnumSet;
import java.util.concurrent.atomic.AtomicInteger;
import org.eclipse.jetty.ee10.servlet.FilterHolder;
import org.eclipse.jetty.ee10.servlet.ServletContextHandler;
import org.eclipse.jetty.ee10.servlet.ServletHolder;
import org.eclipse.jetty.server.Server;
import org.eclipse.jetty.server.ServerConnector;

/** A real Jetty 12 (ee10) on port 0 with the filter in front of one handler. */
final class App implements AutoCloseable {
  /** What the handler does; {@code runs} counts its runs. */
  interface Handler {
    void handle(HttpServletRequest req, HttpServletResponse res) throws Exception;
  }

  final AtomicInteger runs = new AtomicInteger();
  private final Server server;
  private final HttpClient http =
      HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build();
  private final int port;

  App(IdempotencyFilter filter, Handler handler) throws Exception {
    server = new Server(0);
    ServletContextHandler context = new ServletContextHandler();
    FilterHolder filterHolder = new FilterHolder(filter);
    filterHolder.setAsyncSupported(true);
    context.addFilter(filterHolder, "/*", EnumSet.of(DispatcherType.REQUEST));
    ServletHolder servlet = new ServletHolder(new HttpServlet() {
      private static final long serialVersionUID = 1L;

      @Override
      protected void service(HttpServletRequest req, HttpServletResponse res)
          throws IOException {
        runs.incrementAndGet();
        try {
          handler.handle(req, res);
        } catch (IOException | RuntimeException e) {
          throw e;
        } catch (Exception e) {
          throw new IllegalStateException(e);
        }
      }
    });
    servlet.setAsyncSupported(true);
    context.addServlet(servlet, "/*");
    server.setHandler(context);
    server.start();
    port = ((ServerConnector) server.getConnectors()[0]).getLocalPort();
  }

  /** The port it listens on (loopback). */
  int port() {
    return port;
  }

  /** A request to this app. */
  HttpRequest.Builder request(String method, String path, String body) {
    return HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + path))
        .timeout(Duration.ofSeconds(30))
        .header("Content-Type", "application/json")
        .method(method, HttpRequest.BodyPublishers.ofString(body, StandardCharsets.UTF_8));
  }

  /** POST {@code body} to {@code path} with an Idempotency-Key. */
  HttpResponse<String> post(String path, String key, String body) throws Exception {
    return send(request("POST", path, body).header("Idempotency-Key", key));
  }

  HttpResponse<String> send(HttpRequest.Builder request) throws Exception {
    return http.send(request.build(), HttpResponse.BodyHandlers.ofString(StandardCharsets.UTF_8));
  }

  @Override
  public void close() {
    try {
      server.stop();
    } catch (Exception e) {
      throw new IllegalStateException("jetty did not stop", e);
    }
  }
}
