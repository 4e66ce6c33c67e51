/**
 * The Idempotency-Key HTTP header for Jakarta Servlet 6 applications, on claimd: {@link
 * dev.claimd.servlet.IdempotencyFilter}. Byte-compatible with the Node client's Express
 * middleware: the same claim keys, fingerprints and stored responses, so either replays the
 * other's.
 */
package dev.claimd.servlet;
