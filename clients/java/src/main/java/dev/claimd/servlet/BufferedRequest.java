package dev.claimd.servlet;

import jakarta.servlet.ReadListener;
import jakarta.servlet.ServletInputStream;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletRequestWrapper;
import java.io.BufferedReader;
import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.Charset;
import java.nio.charset.StandardCharsets;

/** A request whose body, read by the filter, is read again from memory by the handler. */
final class BufferedRequest extends HttpServletRequestWrapper {
  private final byte[] body;
  private ServletInputStream stream;
  private BufferedReader reader;

  BufferedRequest(HttpServletRequest request, byte[] body) {
    super(request);
    this.body = body;
  }

  @Override
  public ServletInputStream getInputStream() {
    if (reader != null) {
      throw new IllegalStateException("getReader() was called");
    }
    if (stream == null) {
      stream = new BytesInputStream(body);
    }
    return stream;
  }

  @Override
  public BufferedReader getReader() {
    if (stream != null) {
      throw new IllegalStateException("getInputStream() was called");
    }
    if (reader == null) {
      String encoding = getCharacterEncoding();
      Charset charset = encoding == null ? StandardCharsets.UTF_8 : Charset.forName(encoding);
      reader = new BufferedReader(
          new InputStreamReader(new ByteArrayInputStream(body), charset));
    }
    return reader;
  }

  @Override
  public int getContentLength() {
    return body.length;
  }

  @Override
  public long getContentLengthLong() {
    return body.length;
  }

  /** The body, from memory. */
  private static final class BytesInputStream extends ServletInputStream {
    private final ByteArrayInputStream in;

    BytesInputStream(byte[] body) {
      this.in = new ByteArrayInputStream(body);
    }

    @Override
    public int read() {
      return in.read();
    }

    @Override
    public int read(byte[] b, int off, int len) {
      return in.read(b, off, len);
    }

    @Override
    public boolean isFinished() {
      return in.available() == 0;
    }

    @Override
    public boolean isReady() {
      return true;
    }

    @Override
    public void setReadListener(ReadListener listener) {
      try {
        listener.onDataAvailable();
        listener.onAllDataRead();
      } catch (IOException e) {
        listener.onError(e);
      }
    }
  }
}
