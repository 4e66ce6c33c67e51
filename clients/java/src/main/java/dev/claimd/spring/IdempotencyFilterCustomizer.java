package dev.claimd.spring;

import dev.claimd.servlet.IdempotencyFilter;

/**
 * A bean that adjusts the auto-configured filter's builder after the {@code
 * claimd.idempotency.*} properties are applied, e.g. {@code b -> b.clientOf(req ->
 * tenantOf(req))}; customizers run in their {@code @Order}.
 */
@FunctionalInterface
public interface IdempotencyFilterCustomizer {
  /**
   * Adjusts the builder.
   *
   * @param builder the builder, with the properties applied
   */
  void customize(IdempotencyFilter.Builder builder);
}
