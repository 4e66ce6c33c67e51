/**
 * Spring Boot auto-configuration of claimd ({@link dev.claimd.spring.ClaimdAutoConfiguration}):
 * {@code claimd.*} properties register the {@link dev.claimd.Claims} bean and the
 * Idempotency-Key filter. Used only where the application brings Spring Boot; the library
 * depends on it optionally.
 */
package dev.claimd.spring;
