package dev.claimd.spring.app;

import jakarta.servlet.http.HttpServletResponse;
import java.io.IOException;
import java.util.UUID;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RequestBody;
import org.springframework.web.bind.annotation.RequestHeader;
import org.springframework.web.bind.annotation.RestController;

/**
 * The routes: each order is 201 with a fresh order id, a Set-Cookie of its own and hop-by-hop
 * headers (Connection names X-Hop); /orders/slow takes 300 ms; /orders/fail answers 503;
 * /health is outside the filter's URL patterns.
 */
@RestController
class OrdersController {
  private final OrdersApp.Runs runs;

  OrdersController(OrdersApp.Runs runs) {
    this.runs = runs;
  }

  @PostMapping({"/orders", "/orders/refunds", "/account/orders"})
  void order(@RequestHeader(name = "Idempotency-Key", required = false) String key,
      @RequestBody(required = false) String body, HttpServletResponse res) throws IOException {
    runs.add(key);
    res.setStatus(201);
    res.setContentType("application/json");
    res.setHeader("X-Order", "yes");
    res.addHeader("Set-Cookie", "session=secret-of-the-first-caller; HttpOnly");
    res.setHeader("Connection", "X-Hop");
    res.setHeader("X-Hop", "only for this hop");
    res.setHeader("Proxy-Status", "edge");
    res.getWriter().write("{\"order\":\"" + UUID.randomUUID() + "\",\"echo\":"
        + (body == null || body.isEmpty() ? "null" : body) + "}");
  }

  @PostMapping("/orders/slow")
  void slow(@RequestHeader(name = "Idempotency-Key", required = false) String key,
      @RequestBody(required = false) String body, HttpServletResponse res)
      throws IOException, InterruptedException {
    Thread.sleep(300);
    order(key, body, res);
  }

  @PostMapping("/orders/fail")
  void fail(@RequestHeader(name = "Idempotency-Key", required = false) String key,
      HttpServletResponse res) throws IOException {
    runs.add(key);
    res.setStatus(503);
    res.setContentType("text/plain");
    res.getWriter().write("upstream down");
  }

  @PostMapping("/health")
  String health(@RequestHeader(name = "Idempotency-Key", required = false) String key) {
    runs.add(key);
    return "ok";
  }
}
