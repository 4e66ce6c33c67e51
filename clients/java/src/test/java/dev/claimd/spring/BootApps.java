package dev.claimd.spring;

import dev.claimd.Env;
import dev.claimd.spring.app.OrdersApp;
import java.net.ServerSocket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.core.env.StandardEnvironment;
import org.springframework.web.context.support.StandardServletEnvironment;

/**
 * The suite's Spring Boot apps ({@link OrdersApp} on Tomcat, port 0), started with properties
 * only and shared by the Spring Boot tests: one per store, one whose claimd is unreachable,
 * one on the quota claimd.
 * An app sees only the properties given here: the suite's own {@code CLAIMD_*} variables
 * (which Spring would bind, e.g. CLAIMD_API_KEY to claimd.api-key) are kept from it. The apps
 * close when the JVM exits (Spring's shutdown hook).
 */
final class BootApps {
  static final String NS = "java-http-tests";
  private static final Map<String, App> STARTED = new ConcurrentHashMap<>();

  private BootApps() {}

  /** A started app: its context and HTTP to it. */
  static final class App {
    final ConfigurableApplicationContext context;
    final int port;
    private final HttpClient http =
        HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build();

    App(ConfigurableApplicationContext context) {
      this.context = context;
      this.port = Integer.parseInt(context.getEnvironment().getProperty("local.server.port"));
    }

    /** The handler's runs for an Idempotency-Key. */
    int runs(String key) {
      return context.getBean(OrdersApp.Runs.class).of(key);
    }

    /** The handler's runs, all keys. */
    int runs() {
      return context.getBean(OrdersApp.Runs.class).total();
    }

    /** A JSON request to this app. */
    HttpRequest.Builder request(String path, String body) {
      return HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + path))
          .timeout(Duration.ofSeconds(30))
          .header("Content-Type", "application/json")
          .POST(HttpRequest.BodyPublishers.ofString(body, StandardCharsets.UTF_8));
    }

    /** POST {@code body} to {@code path} with an Idempotency-Key. */
    HttpResponse<String> post(String path, String key, String body) throws Exception {
      return send(request(path, body).header("Idempotency-Key", key));
    }

    HttpResponse<String> send(HttpRequest.Builder request) throws Exception {
      return http.send(request.build(),
          HttpResponse.BodyHandlers.ofString(StandardCharsets.UTF_8));
    }
  }

  /** The properties every app of the suite has besides claimd's. */
  private static Map<String, Object> base() {
    Map<String, Object> p = new HashMap<>();
    p.put("server.port", "0");
    p.put("spring.main.banner-mode", "off");
    p.put("logging.level.root", "warn");
    p.put("claimd.idempotency.namespace", NS);
    p.put("claimd.idempotency.url-patterns", "/orders/*,/account/*");
    p.put("claimd.idempotency.session-cookie", "sid");
    return p;
  }

  /** The app on {@code store}'s claimd, configured by properties only. */
  static App on(Env.Store store) {
    String target = store.address();
    return STARTED.computeIfAbsent(store.name(), name -> {
      Map<String, Object> p = base();
      p.put("claimd.target", target);
      return start(p);
    });
  }

  /** The app whose claimd.target nobody listens on, with a 2 s call timeout and no wait. */
  static App unreachable() {
    return STARTED.computeIfAbsent("unreachable", name -> {
      Map<String, Object> p = base();
      p.put("claimd.target", "127.0.0.1:" + closedPort());
      p.put("claimd.call-timeout", "2s");
      p.put("claimd.idempotency.wait", "0s");
      return start(p);
    });
  }

  /** The app on the quota claimd ({@link Env#quotaAddress()}). */
  static App quota() {
    String target = Env.quotaAddress();
    return STARTED.computeIfAbsent("quota", name -> {
      Map<String, Object> p = base();
      p.put("claimd.target", target);
      return start(p);
    });
  }

  /** A loopback port nobody listens on. */
  static int closedPort() {
    try (ServerSocket socket = new ServerSocket(0)) {
      return socket.getLocalPort();
    } catch (java.io.IOException e) {
      throw new IllegalStateException("no free port", e);
    }
  }

  /** Starts {@link OrdersApp} and {@code more} with exactly these properties. */
  static App start(Map<String, Object> properties, Class<?>... more) {
    return new App(context(properties, more));
  }

  /** The context of {@link OrdersApp} and {@code more} with exactly these properties. */
  static ConfigurableApplicationContext context(Map<String, Object> properties,
      Class<?>... more) {
    StandardServletEnvironment environment = new StandardServletEnvironment();
    environment.getPropertySources()
        .remove(StandardEnvironment.SYSTEM_ENVIRONMENT_PROPERTY_SOURCE_NAME);
    Class<?>[] sources = new Class<?>[more.length + 1];
    sources[0] = OrdersApp.class;
    System.arraycopy(more, 0, sources, 1, more.length);
    return new SpringApplicationBuilder(sources).environment(environment)
        .properties(properties).run();
  }
}
