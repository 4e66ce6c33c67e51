package dev.claimd.servlet;

import jakarta.servlet.ServletOutputStream;
import jakarta.servlet.WriteListener;
import jakarta.servlet.http.HttpServletResponse;
import jakarta.servlet.http.HttpServletResponseWrapper;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.io.OutputStreamWriter;
import java.io.PrintWriter;
import java.nio.charset.Charset;
import java.nio.charset.StandardCharsets;

/**
 * Holds back the body a handler writes, so that it can be stored before it is sent. Status and
 * headers go to the real response (nothing is committed until {@link #send()}); the content
 * length is left to {@link #send()}. A handler that flushed (flushBuffer, or flushed or closed
 * its stream or writer), sent an error or a redirect has answered ({@link #answered()}), yet
 * nothing reaches the client before {@link #send()}. After sendError the body is cleared and
 * later writes are ignored, as a container does.
 */
final class BufferingResponse extends HttpServletResponseWrapper {
  private final ByteArrayOutputStream body = new ByteArrayOutputStream();
  /** Where the stream and the writer write: the body, unless an error was sent. */
  private final OutputStream sink = new OutputStream() {
    @Override
    public void write(int b) {
      take(new byte[] {(byte) b}, 0, 1);
    }

    @Override
    public void write(byte[] b, int off, int len) {
      take(b, off, len);
    }
  };
  private ServletOutputStream stream;
  private OutputStreamWriter encoder;
  private PrintWriter writer;
  private boolean answered;
  private boolean errorSent;

  BufferingResponse(HttpServletResponse response) {
    super(response);
  }

  /** The body written so far. */
  byte[] body() {
    if (encoder != null) {
      try {
        encoder.flush();
      } catch (IOException e) {
        // Writing into memory does not fail.
      }
    }
    return body.toByteArray();
  }

  private void take(byte[] b, int off, int len) {
    if (!errorSent) {
      body.write(b, off, len);
    }
  }

  /** Whether the handler flushed its answer, sent an error or a redirect. */
  boolean answered() {
    return answered;
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
          take(new byte[] {(byte) b}, 0, 1);
        }

        @Override
        public void write(byte[] b, int off, int len) {
          take(b, off, len);
        }

        @Override
        public void flush() {
          answered = true;
        }

        @Override
        public void close() {
          answered = true;
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
      encoder = new OutputStreamWriter(sink, charset);
      writer = new PrintWriter(encoder) {
        @Override
        public void flush() {
          answered = true;
          super.flush();
        }

        @Override
        public void close() {
          answered = true;
          super.flush();
        }
      };
    }
    return writer;
  }

  @Override
  public void sendError(int status, String message) {
    sendError(status);
  }

  @Override
  public void sendError(int status) {
    resetBuffer();
    setStatus(status);
    answered = true;
    errorSent = true;
  }

  @Override
  public void sendRedirect(String location) {
    resetBuffer();
    setStatus(SC_FOUND);
    setHeader("Location", location);
    answered = true;
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

  /** Marks the response answered; the real response is committed only by {@link #send()}. */
  @Override
  public void flushBuffer() {
    answered = true;
  }

  @Override
  public boolean isCommitted() {
    return answered;
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
