package dev.claimd.servlet;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * The filter's request identity and stored responses are the Node client's, byte for byte:
 * node-vectors.tsv holds what the Node client answers (scripts/node-vectors.js makes it).
 */
class NodeCompatibilityTest {
  private static List<String[]> vectors(String kind) throws IOException {
    List<String[]> out = new ArrayList<>();
    try (InputStream in = NodeCompatibilityTest.class.getResourceAsStream("/node-vectors.tsv")) {
      assertNotNull(in, "node-vectors.tsv");
      for (String line : new String(in.readAllBytes(), StandardCharsets.UTF_8).split("\n")) {
        String[] fields = line.split("\t", -1);
        if (fields[0].equals(kind)) {
          out.add(fields);
        }
      }
    }
    assertTrue(out.size() > 2, kind);
    return out;
  }

  private static byte[] bytes(String b64) {
    return b64.equals("-") ? null : Base64.getDecoder().decode(b64);
  }

  private static String text(String b64) {
    byte[] b = bytes(b64);
    return b == null ? null : new String(b, StandardCharsets.UTF_8);
  }

  @Test
  void canonicalJsonIsNodesCanonicalJson() throws IOException {
    for (String[] v : vectors("canonical")) {
      assertEquals(text(v[2]), CanonicalJson.of(text(v[1])), text(v[1]));
    }
  }

  @Test
  void keysParseAsTheNodeMiddlewareParsesThem() throws IOException {
    for (String[] v : vectors("parseKey")) {
      assertEquals(text(v[2]), RequestIdentity.parseKey(text(v[1])), text(v[1]));
    }
  }

  @Test
  void claimKeysAreTheNodeMiddlewaresClaimKeys() throws IOException {
    for (String[] v : vectors("claimKey")) {
      assertEquals(text(v[3]), RequestIdentity.claimKey(text(v[1]), text(v[2])), text(v[1]));
    }
  }

  @Test
  void fingerprintsAreTheNodeMiddlewaresFingerprints() throws IOException {
    for (String[] v : vectors("fingerprint")) {
      byte[] actual = RequestIdentity.fingerprint(text(v[1]), text(v[2]), bytes(v[3]) == null
          ? new byte[0] : bytes(v[3]), text(v[4]), true);
      assertArrayEquals(bytes(v[5]), actual, text(v[2]) + " " + text(v[4]));
    }
  }

  @Test
  void storedResponsesAreByteIdenticalToNodesAndDecodeBack() throws IOException {
    for (String[] v : vectors("idk2")) {
      List<Map.Entry<String, String>> headers = new ArrayList<>();
      if (!v[2].equals("-")) {
        for (String pair : v[2].split(",")) {
          String[] nv = pair.split(":");
          headers.add(Map.entry(text(nv[0]), text(nv[1])));
        }
      }
      byte[] body = bytes(v[3]);
      StoredResponse mine =
          new StoredResponse(Integer.parseInt(v[1]), headers, body, Long.parseLong(v[4]));
      assertArrayEquals(bytes(v[5]), mine.encode());
      StoredResponse back = StoredResponse.decode(bytes(v[5]));
      assertNotNull(back);
      assertEquals(Integer.parseInt(v[1]), back.status);
      assertEquals(headers.size(), back.headers.size());
      assertEquals(body == null ? Long.parseLong(v[4]) : body.length, back.bytes);
      if (body != null) {
        assertArrayEquals(body, back.body);
      }
    }
  }
}
