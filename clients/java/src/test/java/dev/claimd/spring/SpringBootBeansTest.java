package dev.claimd.spring;

import static dev.claimd.spring.SpringBootRulesTest.key;
import static dev.claimd.spring.SpringBootRulesTest.replayed;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.claimd.Claims;
import dev.claimd.Env;
import dev.claimd.servlet.IdempotencyFilter;
import java.net.http.HttpResponse;
import java.util.HashMap;
import java.util.Map;
import java.util.Set;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;
import org.springframework.boot.web.servlet.FilterRegistrationBean;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

/**
 * The auto-configuration steps aside for the app's own beans ({@code @ConditionalOnMissingBean})
 * and refuses to start on properties it cannot use, naming the property.
 */
class SpringBootBeansTest {
  /** The app's own Claims bean, on the store named by the {@code app.claimd} property. */
  @Configuration(proxyBeanMethods = false)
  static class AppClaims {
    @Bean
    Claims appClaims(org.springframework.core.env.Environment env) {
      return Claims.connect(env.getRequiredProperty("app.claimd"));
    }
  }

  /** The app's own registration of the filter: on /orders/*, a key not required. */
  @Configuration(proxyBeanMethods = false)
  static class AppFilter {
    @Bean
    FilterRegistrationBean<IdempotencyFilter> appIdempotency(Claims claims) {
      FilterRegistrationBean<IdempotencyFilter> registration = new FilterRegistrationBean<>(
          IdempotencyFilter.builder(claims, BootApps.NS).required(false).build());
      registration.addUrlPatterns("/orders/*");
      return registration;
    }
  }

  private static Map<String, Object> properties(String target) {
    Map<String, Object> p = new HashMap<>();
    p.put("server.port", "0");
    p.put("spring.main.banner-mode", "off");
    p.put("logging.level.root", "off");
    p.put("claimd.idempotency.namespace", BootApps.NS);
    p.put("claimd.idempotency.url-patterns", "/orders/*");
    if (target != null) {
      p.put("claimd.target", target);
    }
    return p;
  }

  @ParameterizedTest
  @EnumSource(Env.Store.class)
  void anAppDefinedClaimsBeanIsUsedInsteadOfClaimdTarget(Env.Store store) throws Exception {
    Map<String, Object> p = properties("127.0.0.1:" + BootApps.closedPort());
    p.put("app.claimd", store.address());
    BootApps.App app = BootApps.start(p, AppClaims.class);
    try (ConfigurableApplicationContext context = app.context) {
      assertEquals(Set.of("appClaims"), context.getBeansOfType(Claims.class).keySet());
      String key = key();
      assertEquals(201, app.post("/orders", key, "{}").statusCode());
      HttpResponse<String> again = app.post("/orders", key, "{}");
      assertEquals(201, again.statusCode());
      assertTrue(replayed(again));
      assertEquals(1, app.runs(key));
    }
  }

  @Test
  void anAppDefinedFilterRegistrationReplacesTheAutoConfiguredOne() throws Exception {
    BootApps.App app = BootApps.start(properties(Env.Store.EMBEDDED.address()),
        AppFilter.class);
    try (ConfigurableApplicationContext context = app.context) {
      assertFalse(context.containsBean(ClaimdAutoConfiguration.FILTER_NAME));
      assertTrue(context.containsBean("appIdempotency"));
      // The app's filter does not require a key; the auto-configured one would answer 400.
      assertEquals(201, app.send(app.request("/orders", "{}")).statusCode());
    }
  }

  @Test
  void withoutANamespaceTheClaimsBeanIsRegisteredButNoFilter() throws Exception {
    Map<String, Object> p = properties(Env.Store.EMBEDDED.address());
    p.remove("claimd.idempotency.namespace");
    BootApps.App app = BootApps.start(p);
    try (ConfigurableApplicationContext context = app.context) {
      assertTrue(context.containsBean("claimdClaims"));
      assertFalse(context.containsBean(ClaimdAutoConfiguration.FILTER_NAME));
      assertEquals(201, app.send(app.request("/orders", "{}")).statusCode());
    }
  }

  @Test
  void aNamespaceWithoutClaimdTargetOrAClaimsBeanFailsTheStartSayingWhatIsMissing() {
    Throwable e = assertThrows(RuntimeException.class, () -> BootApps.start(properties(null)));
    assertTrue(messages(e).contains(
        "claimd.idempotency.namespace is set but there is no Claims bean: set claimd.target, "
            + "or define a Claims bean"), messages(e));
  }

  @Test
  void anOutOfRangePropertyFailsTheStartNamingIt() {
    Map<String, Object> p = properties(Env.Store.EMBEDDED.address());
    p.put("claimd.idempotency.max-body-bytes", "0");
    Throwable e = assertThrows(RuntimeException.class, () -> BootApps.start(p));
    assertTrue(messages(e).contains("claimd.idempotency.max-body-bytes must be 1 to 2^31 - 2"),
        messages(e));
  }

  /** The messages of an exception and its causes. */
  static String messages(Throwable e) {
    StringBuilder all = new StringBuilder();
    for (Throwable t = e; t != null; t = t.getCause()) {
      all.append(t.getMessage()).append('\n');
    }
    return all.toString();
  }
}
