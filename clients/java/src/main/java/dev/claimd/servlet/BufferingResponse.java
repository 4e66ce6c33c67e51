package dev.claimd.servlet;

import jakarta.servlet.ServletOutputStream;
import jakarta.servlet.WriteListener;
import jakarta.servlet.http.HttpServletResponse;
import jakarta.servlet.http.HttpServletResponseWrapper;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.OutputStreamWriter;
import java.io.PrintWriter;
import java.nio.charset.Charset;
import java.nio.charset.StandardCharsets;

/**
 * Holds back the body a handler writes, so that it can be stored before it is sent. Status and
 * headers go to the real response (nothing is committed until {@link #send()}); the content
 * length is left to {@link #send()}.
 */
final class BufferingResponse extends HttpServletResponseWrapper {
  private final ByteArrayOutputStream body = new ByteArrayOutputStream();
  private ServletOutputStream stream;
  private PrintWriter writer;

  BufferingResponse(HttpServletResponse response) {
    super(response);
  }

  /** The body written so far. */
  byte[] body() {
    if (writer != null) {
      writer.flush();
    }
    return body.toByteArray();
  }

  /** Sends the held-back body with its length. */
  void send() throws IOException {
    byte[] bytes = body();
    HttpServletResponse real = (HttpServletResponse) getResponse();
    real.setContentLength(bytes.length);
    real.getOutputStream().write(bytes);
    real.flushBuffer();
  }

  @Override
  public ServletOutputStream getOutputStream() {
    if (writer != null) {
      throw new IllegalStateException("getWriter() was called");
    }
    if (stream == null) {
      stream = new ServletOutputStream() {
        @Override
        public void write(int b) {
          body.write(b);
        }

        @Override
        public void write(byte[] b, int off, int len) {
          body.write(b, off, len);
        }

        @Override
        public boolean isReady() {
          return true;
        }

        @Override
        public void setWriteListener(WriteListener listener) {
          try {
            listener.onWritePossible();
          } catch (IOException e) {
            listener.onError(e);
          }
        }
      };
    }
    return stream;
  }

  @Override
  public PrintWriter getWriter() {
    if (stream != null) {
      throw new IllegalStateException("getOutputStream() was called");
    }
    if (writer == null) {
      String encoding = getCharacterEncoding();
      Charset charset = encoding == null ? StandardCharsets.ISO_8859_1 : Charset.forName(encoding);
      writer = new PrintWriter(new OutputStreamWriter(body, charset));
    }
    return writer;
  }

  @Override
  public void sendError(int status, String message) {
    setStatus(status);
  }

  @Override
  public void sendError(int status) {
    setStatus(status);
  }

  @Override
  public void sendRedirect(String location) {
    setStatus(SC_FOUND);
    setHeader("Location", location);
  }

  @Override
  public void setContentLength(int length) {}

  @Override
  public void setContentLengthLong(long length) {}

  @Override
  public void setHeader(String name, String value) {
    if (!"content-length".equalsIgnoreCase(name)) {
      super.setHeader(name, value);
    }
  }

  @Override
  public void addHeader(String name, String value) {
    if (!"content-length".equalsIgnoreCase(name)) {
      super.addHeader(name, value);
    }
  }

  @Override
  public void setIntHeader(String name, int value) {
    if (!"content-length".equalsIgnoreCase(name)) {
      super.setIntHeader(name, value);
    }
  }

  @Override
  public void addIntHeader(String name, int value) {
    if (!"content-length".equalsIgnoreCase(name)) {
      super.addIntHeader(name, value);
    }
  }

  @Override
  public void flushBuffer() {}

  @Override
  public boolean isCommitted() {
    return false;
  }

  @Override
  public void resetBuffer() {
    body();
    body.reset();
  }

  @Override
  public void reset() {
    super.reset();
    resetBuffer();
  }
}
