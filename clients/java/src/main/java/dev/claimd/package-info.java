/**
 * The Java client of claimd: {@link dev.claimd.Claims} asks claimd whether this caller may do
 * the work for an event, and {@link dev.claimd.Lease} keeps a won claim alive and settles it.
 */
package dev.claimd;
