package dev.claimd.spring;

import dev.claimd.Claims;
import dev.claimd.ClaimsBuilder;
import dev.claimd.servlet.DefaultScope;
import dev.claimd.servlet.IdempotencyFilter;
import jakarta.servlet.DispatcherType;
import java.nio.file.Path;
import java.util.Locale;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnProperty;
import org.springframework.boot.autoconfigure.condition.ConditionalOnWebApplication;
import org.springframework.boot.context.properties.EnableConfigurationProperties;
import org.springframework.boot.web.servlet.FilterRegistrationBean;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

/**
 * Spring Boot auto-configuration from {@code claimd.*} properties: a {@link Claims} bean when
 * {@code claimd.target} is set, and, in a servlet web application with {@code
 * claimd.idempotency.namespace} set, the {@link IdempotencyFilter} in a {@link
 * FilterRegistrationBean} named {@code claimdIdempotencyFilter}. Each steps aside for the
 * application's own bean ({@code @ConditionalOnMissingBean}: a {@code Claims} bean, an {@code
 * IdempotencyFilter} or a {@code FilterRegistrationBean<IdempotencyFilter>}); {@link
 * IdempotencyFilterCustomizer} beans adjust the filter's builder. Keys are scoped by the
 * authenticated principal when the request has one (Spring Security wraps the request so that
 * {@code getUserPrincipal()} is its Authentication; the filter runs after its chain), else by
 * {@link DefaultScope} — see {@link ClaimdProperties.Scope}.
 */
@AutoConfiguration
@ConditionalOnClass(Claims.class)
@EnableConfigurationProperties(ClaimdProperties.class)
public class ClaimdAutoConfiguration {
  /** The registration's bean and filter name. */
  public static final String FILTER_NAME = "claimdIdempotencyFilter";

  /**
   * The client of claimd at {@code claimd.target}, closed with the context.
   *
   * @param properties the claimd properties
   * @return the client
   */
  @Bean(destroyMethod = "close")
  @ConditionalOnMissingBean
  @ConditionalOnProperty(prefix = "claimd", name = "target")
  public Claims claimdClaims(ClaimdProperties properties) {
    ClaimsBuilder builder = Claims.builder(properties.getTarget())
        .apiKey(properties.getApiKey());
    try {
      builder.callTimeout(properties.getCallTimeout());
    } catch (IllegalArgumentException e) {
      throw new IllegalStateException("claimd." + property(e.getMessage()), e);
    }
    ClaimdProperties.Tls tls = properties.getTls();
    try {
      if (tls.on()) {
        builder.tls(path(tls.getCaFile()), path(tls.getCertFile()), path(tls.getKeyFile()));
      }
      return builder.build();
    } catch (IllegalArgumentException | java.io.UncheckedIOException e) {
      throw new IllegalStateException("claimd.tls: " + e.getMessage(), e);
    }
  }

  private static Path path(String file) {
    return file == null || file.isEmpty() ? null : Path.of(file);
  }

  /** The filter, in servlet web applications only. */
  @Configuration(proxyBeanMethods = false)
  @ConditionalOnWebApplication(type = ConditionalOnWebApplication.Type.SERVLET)
  @ConditionalOnClass(name = "jakarta.servlet.Filter")
  @ConditionalOnProperty(prefix = "claimd.idempotency", name = "namespace")
  static class IdempotencyConfiguration {
    /**
     * The filter from {@code claimd.idempotency.*}, mapped to its URL patterns for REQUEST
     * dispatches.
     *
     * @param properties the claimd properties
     * @param claims the Claims bean (the app's own, or claimd.target's)
     * @param customizers the app's adjustments of the builder, in order
     * @return the registration
     */
    @Bean(name = FILTER_NAME)
    @ConditionalOnMissingBean(value = IdempotencyFilter.class,
        parameterizedContainer = FilterRegistrationBean.class)
    FilterRegistrationBean<IdempotencyFilter> claimdIdempotencyFilter(
        ClaimdProperties properties, ObjectProvider<Claims> claims,
        ObjectProvider<IdempotencyFilterCustomizer> customizers) {
      Claims client = claims.getIfAvailable();
      if (client == null) {
        throw new IllegalStateException("claimd.idempotency.namespace is set but there is no "
            + "Claims bean: set claimd.target, or define a Claims bean");
      }
      ClaimdProperties.Idempotency p = properties.getIdempotency();
      IdempotencyFilter filter;
      try {
        IdempotencyFilter.Builder builder = IdempotencyFilter.builder(client, p.getNamespace())
            .methods(p.getMethods().toArray(String[]::new))
            .required(p.isRequired())
            .wait(p.getWait())
            .lease(p.getLease())
            .retryAfter(p.getRetryAfter())
            .maxBodyBytes(p.getMaxBodyBytes())
            .maxResponseBytes(p.getMaxResponseBytes())
            .retryServerErrors(p.isRetryServerErrors())
            .canonicalJson(p.isCanonicalJson())
            .docsUrl(p.getDocsUrl());
        if (p.getScope() == ClaimdProperties.Scope.PRINCIPAL) {
          builder.clientOf(DefaultScope.principalFirst(p.getSessionCookie()));
        } else if (p.getSessionCookie() != null) {
          builder.sessionCookie(p.getSessionCookie());
        }
        customizers.orderedStream().forEach(c -> c.customize(builder));
        filter = builder.build();
      } catch (IllegalArgumentException e) {
        throw new IllegalStateException("claimd.idempotency." + property(e.getMessage()), e);
      }
      FilterRegistrationBean<IdempotencyFilter> registration =
          new FilterRegistrationBean<>(filter);
      registration.setName(FILTER_NAME);
      registration.setUrlPatterns(p.getUrlPatterns());
      registration.setDispatcherTypes(DispatcherType.REQUEST);
      registration.setOrder(p.getOrder());
      return registration;
    }
  }

  /**
   * A builder's message ("maxBodyBytes must be …", "namespace: …") with its option as the
   * property's name ("max-body-bytes must be …").
   */
  static String property(String message) {
    String text = message == null ? "" : message;
    int end = 0;
    while (end < text.length() && Character.isLetter(text.charAt(end))) {
      end++;
    }
    StringBuilder kebab = new StringBuilder();
    for (char c : text.substring(0, end).toCharArray()) {
      if (Character.isUpperCase(c)) {
        kebab.append('-').append(Character.toLowerCase(c));
      } else {
        kebab.append(c);
      }
    }
    return kebab.toString().toLowerCase(Locale.ROOT) + text.substring(end);
  }
}
