package dev.claimd.spring;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;

/**
 * The {@code claimd.*} properties the docs show (the {@code properties} blocks of this README
 * and docs/CLIENTS.md) are ones the auto-configuration binds, as listed in the property
 * metadata the build ships; and every property of the metadata is in the README's table.
 */
class SpringBootDocsTest {
  private static String metadata() throws IOException {
    try (InputStream in = SpringBootDocsTest.class.getResourceAsStream(
        "/META-INF/spring-configuration-metadata.json")) {
      assertTrue(in != null, "the build wrote no spring-configuration-metadata.json");
      return new String(in.readAllBytes(), StandardCharsets.UTF_8);
    }
  }

  /** The property names of the metadata (its "properties", not its "groups" or "hints"). */
  private static List<String> names(String metadata) {
    int from = metadata.indexOf("\"properties\"");
    assertTrue(from >= 0, "the metadata lists no properties");
    int to = metadata.indexOf("\"hints\"", from);
    String properties = metadata.substring(from, to < 0 ? metadata.length() : to);
    List<String> names = new ArrayList<>();
    Matcher m = Pattern.compile("\"name\"\\s*:\\s*\"(claimd\\.[^\"]+)\"").matcher(properties);
    while (m.find()) {
      names.add(m.group(1));
    }
    return names;
  }

  /** The claimd.* keys of every ```properties block of a document. */
  private static List<String> documented(Path doc) throws IOException {
    List<String> keys = new ArrayList<>();
    boolean in = false;
    for (String line : Files.readAllLines(doc, StandardCharsets.UTF_8)) {
      if (line.strip().equals("```properties")) {
        in = true;
      } else if (line.strip().equals("```")) {
        in = false;
      } else if (in && line.startsWith("claimd.")) {
        keys.add(line.substring(0, line.indexOf('=')).strip());
      }
    }
    return keys;
  }

  @Test
  void everyPropertyTheDocsShowIsOneTheAutoConfigurationBinds() throws IOException {
    List<String> known = names(metadata());
    assertTrue(known.contains("claimd.idempotency.namespace"), known.toString());
    for (Path doc : List.of(Path.of("README.md"), Path.of("../../docs/CLIENTS.md"))) {
      List<String> keys = documented(doc);
      assertFalse(keys.isEmpty(), doc + " shows no claimd.* properties");
      for (String key : keys) {
        assertTrue(known.contains(key), doc + " shows " + key + ", which is no property");
      }
    }
  }

  @Test
  void everyPropertyIsInTheReadmesTable() throws IOException {
    String readme = Files.readString(Path.of("README.md"), StandardCharsets.UTF_8);
    for (String name : names(metadata())) {
      String last = name.substring(name.lastIndexOf('.') + 1);
      assertTrue(readme.contains("`" + name + "`") || readme.contains("`." + last + "`"),
          name + " is missing from the README's table");
    }
  }
}
