package dev.claimd.servlet;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.claimd.Claims;
import java.io.ByteArrayOutputStream;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;

/**
 * A refused request leaves its connection usable: the filter reads the body it refuses before
 * answering, so the client's next request on the same connection is answered, even when the
 * body arrives after the headers (as Java's HttpClient sends it).
 */
class FilterConnectionTest {
  @Test
  void aRefusedRequestsLateBodyIsReadSoTheNextRequestOnTheConnectionIsAnswered() throws Exception {
    // No call reaches claimd: the refusals come before a claim.
    try (Claims claims = Claims.connect("127.0.0.1:1");
        App app = new App(IdempotencyFilter.builder(claims, "java-http-tests").build(),
            IdempotencyFilterTest.created());
        Socket socket = new Socket("127.0.0.1", app.port())) {
      socket.setSoTimeout(10_000);
      OutputStream out = socket.getOutputStream();
      out.write(("POST /orders HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\n"
          + "Content-Length: 2\r\n\r\n").getBytes(StandardCharsets.US_ASCII));
      out.flush();
      Thread.sleep(300); // the body comes late, in a packet of its own
      out.write(("{}PUT /orders HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\n"
          + "Content-Length: 2\r\nConnection: close\r\n\r\n{}").getBytes(StandardCharsets.US_ASCII));
      out.flush();
      String answers = readAll(socket.getInputStream());
      assertTrue(answers.startsWith("HTTP/1.1 400 "), answers);
      assertTrue(answers.contains("idempotency-key-missing"), answers);
      int second = answers.indexOf("HTTP/1.1 ", 1);
      assertTrue(second > 0, "no answer to the second request on the connection:\n" + answers);
      assertTrue(answers.startsWith("HTTP/1.1 201 ", second), answers);
      assertEquals(1, app.runs.get());
    }
  }

  private static String readAll(InputStream in) throws Exception {
    ByteArrayOutputStream all = new ByteArrayOutputStream();
    in.transferTo(all);
    return all.toString(StandardCharsets.ISO_8859_1);
  }
}
