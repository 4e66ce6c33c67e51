package dev.claimd.servlet;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.claimd.Claims;
import dev.claimd.Env;
import dev.claimd.v1.State;
import jakarta.servlet.AsyncContext;
import jakarta.servlet.DispatcherType;
import jakarta.servlet.ServletException;
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
import java.util.List;
import java.util.EnumSet;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.UnaryOperator;
import org.eclipse.jetty.ee10.servlet.FilterHolder;
import org.eclipse.jetty.ee10.servlet.ServletContextHandler;
import org.eclipse.jetty.ee10.servlet.ServletHolder;
import org.eclipse.jetty.server.Server;
import org.eclipse.jetty.server.ServerConnector;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/** Asynchronous handlers, handlers that answer then throw, sendError, options, chunked bodies. */
class FilterEdgeCasesTest {
  static final String NS = "java-http-edge-tests";

  static String key() {
    return "order-" + UUID.randomUUID();
  }

  @ParameterizedTest
  @EnumSource(Env.Store.class)
  void anAsynchronousHandlerFailsLoudlyAndItsKeyIsGivenBackNotStored(Env.Store store)
      throws Exception {
    App.Handler async = (req, res) -> {
      AsyncContext context = req.startAsync();
      context.start(() -> {
        try {
          Thread.sleep(50);
          context.getResponse().getOutputStream().write("late".getBytes(StandardCharsets.UTF_8));
          context.complete();
        } catch (Exception | Error e) {
          // The filter refused the asynchronous handler already.
        }
      });
    };
    try (Claims claims = Claims.connect(store.address());
        App app = new App(IdempotencyFilter.builder(claims, NS).build(), async)) {
      String key = key();
      HttpResponse<String> first = app.post("/orders", key, "{\"qty\":1}");
      // The asynchronous handler answers the client itself; nothing is stored for the key.
      assertTrue(first.headers().firstValue(IdempotencyFilter.REPLAYED).isEmpty());
      dev.claimd.v1.Receipt receipt = claims.get(NS, RequestIdentity.claimKey(DefaultScope.ANONYMOUS, key));
      assertEquals(State.STATE_RETRY_WAIT, receipt.getState());
      assertEquals("asynchronous handler", receipt.getLastError());
      assertTrue(receipt.getResponse().isEmpty());
    }
  }

  @ParameterizedTest
  @EnumSource(Env.Store.class)
  void aHandlerThatFlushesThenThrowsIsStoredAndReplayedAndRunsOnce(Env.Store store)
      throws Exception {
    App.Handler answerThenThrow = (req, res) -> {
      res.setStatus(201);
      res.setContentType("application/json");
      res.getWriter().write("{\"id\":7}");
      res.flushBuffer();
      throw new IllegalStateException("after the answer");
    };
    try (Claims claims = Claims.connect(store.address());
        App app = new App(IdempotencyFilter.builder(claims, NS).build(), answerThenThrow)) {
      String key = key();
      HttpResponse<String> first = app.post("/orders", key, "{\"qty\":1}");
      assertEquals(201, first.statusCode());
      assertEquals("{\"id\":7}", first.body());
      assertEquals(State.STATE_COMPLETED,
          claims.get(NS, RequestIdentity.claimKey(DefaultScope.ANONYMOUS, key)).getState());
      HttpResponse<String> again = app.post("/orders", key, "{\"qty\":1}");
      assertEquals(201, again.statusCode());
      assertEquals("{\"id\":7}", again.body());
      assertEquals("true", again.headers().firstValue(IdempotencyFilter.REPLAYED).orElse(""));
      assertEquals(1, app.runs.get());
    }
  }

  @ParameterizedTest
  @EnumSource(Env.Store.class)
  void sendErrorClearsTheBodyAndLaterWritesAreIgnored(Env.Store store) throws Exception {
    App.Handler error = (req, res) -> {
      res.getOutputStream().write("partial".getBytes(StandardCharsets.UTF_8));
      res.sendError(409);
      res.getOutputStream().write("more".getBytes(StandardCharsets.UTF_8));
    };
    try (Claims claims = Claims.connect(store.address());
        App app = new App(IdempotencyFilter.builder(claims, NS).build(), error)) {
      String key = key();
      HttpResponse<String> first = app.post("/orders", key, "{}");
      assertEquals(409, first.statusCode());
      assertEquals("", first.body());
      HttpResponse<String> again = app.post("/orders", key, "{}");
      assertEquals(409, again.statusCode());
      assertEquals("", again.body());
      assertEquals(1, app.runs.get());
    }
  }

  @ParameterizedTest
  @EnumSource(Env.Store.class)
  void aChunkedBodyPastTheLimitIs413(Env.Store store) throws Exception {
    try (Claims claims = Claims.connect(store.address());
        App app = new App(IdempotencyFilter.builder(claims, NS).maxBodyBytes(10).build(),
            IdempotencyFilterTest.created())) {
      HttpRequest.Builder chunked = app.request("POST", "/orders", "")
          .header("Idempotency-Key", key())
          .POST(HttpRequest.BodyPublishers.fromPublisher(
              HttpRequest.BodyPublishers.ofString("{\"much\":\"too long\"}")));
      HttpResponse<String> r = app.send(chunked);
      assertEquals(413, r.statusCode());
      assertTrue(r.body().contains("idempotency-request-too-large"));
      assertEquals(0, app.runs.get());
    }
  }

  @ParameterizedTest
  @EnumSource(Env.Store.class)
  void aForwardDispatchPassesStraightThroughTheFilter(Env.Store store) throws Exception {
    AtomicInteger target = new AtomicInteger();
    try (Claims claims = Claims.connect(store.address())) {
      Server server = new Server(0);
      ServletContextHandler context = new ServletContextHandler();
      context.addFilter(new FilterHolder(IdempotencyFilter.builder(claims, NS).build()), "/*",
          EnumSet.of(DispatcherType.REQUEST, DispatcherType.FORWARD));
      context.addServlet(new ServletHolder(new HttpServlet() {
        private static final long serialVersionUID = 1L;

        @Override
        protected void service(HttpServletRequest req, HttpServletResponse res)
            throws ServletException, IOException {
          req.getRequestDispatcher("/target").forward(req, res);
        }
      }), "/orders");
      context.addServlet(new ServletHolder(new HttpServlet() {
        private static final long serialVersionUID = 1L;

        @Override
        protected void service(HttpServletRequest req, HttpServletResponse res)
            throws IOException {
          target.incrementAndGet();
          res.setStatus(201);
          res.getOutputStream().write("forwarded".getBytes(StandardCharsets.UTF_8));
        }
      }), "/target");
      server.setHandler(context);
      server.start();
      try {
        int port = ((ServerConnector) server.getConnectors()[0]).getLocalPort();
        HttpClient http = HttpClient.newHttpClient();
        String key = key();
        for (int i = 0; i < 2; i++) {
          HttpResponse<String> r = http.send(HttpRequest.newBuilder(
              URI.create("http://127.0.0.1:" + port + "/orders"))
              .header("Idempotency-Key", key)
              .POST(HttpRequest.BodyPublishers.ofString("{}")).build(),
              HttpResponse.BodyHandlers.ofString());
          assertEquals(201, r.statusCode());
          assertEquals("forwarded", r.body());
          assertEquals(i == 1, r.headers().firstValue(IdempotencyFilter.REPLAYED).isPresent());
        }
        assertEquals(1, target.get());
      } finally {
        server.stop();
      }
    }
  }

  @Test
  void invalidFilterOptionsThrowIllegalArgumentExceptionNamingTheOption() {
    try (Claims claims = Claims.connect("127.0.0.1:1")) {
      Map<String, List<UnaryOperator<IdempotencyFilter.Builder>>> bad = Map.of(
          "lease", List.of(b -> b.lease(null), b -> b.lease(Duration.ofMillis(500)),
              b -> b.lease(Duration.ofHours(25))),
          "retryAfter", List.of(b -> b.retryAfter(null), b -> b.retryAfter(Duration.ZERO),
              b -> b.retryAfter(Duration.ofDays(2))),
          "wait", List.of(b -> b.wait(Duration.ofSeconds(61)), b -> b.wait(null)),
          "maxResponseBytes", List.of(b -> b.maxResponseBytes(0),
              b -> b.maxResponseBytes(65_537)),
          "maxBodyBytes", List.of(b -> b.maxBodyBytes(0), b -> b.maxBodyBytes(-1)));
      for (Map.Entry<String, List<UnaryOperator<IdempotencyFilter.Builder>>> option
          : bad.entrySet()) {
        for (UnaryOperator<IdempotencyFilter.Builder> set : option.getValue()) {
          IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
              () -> set.apply(IdempotencyFilter.builder(claims, NS)).build());
          assertTrue(e.getMessage().startsWith(option.getKey() + " "), e.getMessage());
        }
      }
      assertTrue(assertThrows(IllegalArgumentException.class,
          () -> IdempotencyFilter.builder(claims, "")).getMessage().startsWith("namespace"));
      IdempotencyFilter.builder(claims, NS).lease(Duration.ofSeconds(1))
          .retryAfter(Duration.ofHours(24)).wait(Duration.ZERO).maxResponseBytes(1)
          .maxBodyBytes(1).build();
    }
  }
}
