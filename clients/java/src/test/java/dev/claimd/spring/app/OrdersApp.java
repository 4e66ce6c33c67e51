package dev.claimd.spring.app;

import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import org.springframework.boot.autoconfigure.SpringBootApplication;
import org.springframework.context.annotation.Bean;
import org.springframework.security.config.Customizer;
import org.springframework.security.config.annotation.web.builders.HttpSecurity;
import org.springframework.security.config.http.SessionCreationPolicy;
import org.springframework.security.core.userdetails.User;
import org.springframework.security.core.userdetails.UserDetailsService;
import org.springframework.security.provisioning.InMemoryUserDetailsManager;
import org.springframework.security.web.SecurityFilterChain;

/**
 * The Spring Boot app of the suite: an orders API ({@link OrdersController}) with Spring
 * Security (HTTP Basic users alice and bob on /account/**, everything else open). It writes
 * no filter bean: claimd's auto-configuration registers the Idempotency-Key filter from the
 * properties the test starts it with.
 */
@SpringBootApplication
public class OrdersApp {
  /** How many times the handler ran for each Idempotency-Key. */
  public static final class Runs {
    private final Map<String, AtomicInteger> byKey = new ConcurrentHashMap<>();

    void add(String key) {
      byKey.computeIfAbsent(String.valueOf(key), k -> new AtomicInteger()).incrementAndGet();
    }

    /**
     * The handler's runs for all keys (and none).
     *
     * @return how many times it ran
     */
    public int total() {
      return byKey.values().stream().mapToInt(AtomicInteger::get).sum();
    }

    /**
     * The handler's runs for a key.
     *
     * @param key the Idempotency-Key
     * @return how many times it ran
     */
    public int of(String key) {
      AtomicInteger n = byKey.get(key);
      return n == null ? 0 : n.get();
    }
  }

  @Bean
  Runs runs() {
    return new Runs();
  }

  @Bean
  SecurityFilterChain security(HttpSecurity http) throws Exception {
    return http.csrf(csrf -> csrf.disable())
        .sessionManagement(s -> s.sessionCreationPolicy(SessionCreationPolicy.STATELESS))
        .authorizeHttpRequests(a -> a.requestMatchers("/account/**").authenticated()
            .anyRequest().permitAll())
        .httpBasic(Customizer.withDefaults())
        .build();
  }

  @Bean
  UserDetailsService users() {
    return new InMemoryUserDetailsManager(
        User.withUsername("alice").password("{noop}alice-password").roles("USER").build(),
        User.withUsername("bob").password("{noop}bob-password").roles("USER").build());
  }
}
