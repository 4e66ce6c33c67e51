// Type declarations for @claimd/client/express (express.js), written by hand. They need
// no Express types: the request and response are Node's, which Express's extend, so the
// middleware fits `app.use(...)` and `app.post(...)` of Express 4 and 5 (with or without
// @types/express).

/// <reference types="node" />

import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Claims } from './index.js';

/** What the middleware tells the handler, as `req.idempotency`. */
export interface IdempotencyInfo {
  /** The Idempotency-Key value, unquoted. */
  key: string;
  /** The attempt (fencing number): 1, then 2 after a takeover or a retry. */
  attempt: number;
  /** Aborted when the lease is lost (somebody took the request over). */
  signal: AbortSignal;
}

declare global {
  // Express's own request type (with @types/express) gains the two fields set here.
  namespace Express {
    interface Request {
      /** The exact body bytes, kept by `keepRawBody`. */
      rawBody?: Buffer;
      /** Set by `idempotency()` for the handler it runs. */
      idempotency?: IdempotencyInfo;
    }
  }
}

/** The request as the middleware reads it; an Express Request is one. */
export interface IdempotencyRequest extends IncomingMessage {
  originalUrl: string;
  rawBody?: Buffer;
  body?: unknown;
  idempotency?: IdempotencyInfo;
}

export interface IdempotencyOptions<Req extends IdempotencyRequest = IdempotencyRequest> {
  /** The claimd client. */
  claims: Claims;
  /** The claimd namespace of the receipts. */
  namespace: string;
  /** Answer 400 to a request without the header (default true); false lets it through. */
  required?: boolean;
  /** How long a retry waits for the first request, 0 to 60000 ms (default 10000); then 409. */
  waitMs?: number;
  /** The lease of a running request, heartbeated every third (default 30000 ms). */
  leaseMs?: number;
  /**
   * The client a request's keys belong to: its authenticated identity (`req.user.id`, a
   * verified token's subject), never a header any caller can set. The claim key is the
   * client and the Idempotency-Key ('' is written '-'). Default: `defaultClient` — a
   * digest of the Authorization header, else of the `sessionCookie`, else "anonymous".
   */
  clientOf?: (req: Req) => string;
  /**
   * Without `clientOf`: the session cookie whose value scopes a request that carries no
   * Authorization header (client `cookie:` + its SHA-256). Not with `clientOf`.
   */
  sessionCookie?: string;
  /** Path prefixes it covers, of the path the client sent (default: every path). */
  paths?: string[];
  /** The largest encoded response to store, 1 to 65536 (default 65536, claimd's limit). */
  maxResponseBytes?: number;
  /** How soon a request whose handler failed may run again (default 1000 ms). */
  retryAfterMs?: number;
  /** Give a 5xx the handler answered back with Retry instead of storing it (default false). */
  retryServerErrors?: boolean;
  /** Fingerprint JSON bodies by their canonical JSON (default true). */
  canonicalJson?: boolean;
  /** The methods it covers (default POST and PATCH); others pass through. */
  methods?: string[];
  /** Documentation linked from problem bodies (`type` and a `Link` header). */
  docsUrl?: string;
}

/**
 * The middleware: mount it with app.use, router.use or on a route, after the body parser,
 * before the handlers.
 */
export type IdempotencyMiddleware<Req extends IdempotencyRequest = IdempotencyRequest> = (
  req: Req,
  res: ServerResponse,
  next: (err?: unknown) => void,
) => Promise<void>;

/** Express middleware for the Idempotency-Key header on claimd. */
export declare function idempotency<Req extends IdempotencyRequest = IdempotencyRequest>(
  options: IdempotencyOptions<Req>,
): IdempotencyMiddleware<Req>;

/** A `verify` for express.json/raw/text/urlencoded: keeps the body bytes as `req.rawBody`. */
export declare function keepRawBody(req: IncomingMessage, res: ServerResponse, buf: Buffer, encoding?: string): void;

/** An Idempotency-Key header's value (sf-string or bare), or null when malformed. */
export declare function parseKey(header: string): string | null;

/**
 * The client of a request when no `clientOf` is given: `auth:` + hex SHA-256 of its
 * Authorization lines (joined with ", "), else `cookie:` + hex SHA-256 of the value of the
 * cookie `sessionCookie` names, else `anonymous`. `headers` as Node's `req.headersDistinct`
 * (or `req.headers`): lowercase names, a line or an array of lines each.
 */
export declare function defaultClient(
  headers: Record<string, string | string[] | undefined>,
  sessionCookie?: string,
): string;

/** The claimd key of a request: `<client or '-'> <key>`, hashed when over 512 bytes. */
export declare function claimKey(client: string, key: string): string;

/** SHA-256 of method, path with query, and body (canonical JSON for JSON bodies). */
export declare function requestFingerprint(
  method: string,
  url: string,
  body: Buffer,
  contentType?: string | undefined,
  canonical?: boolean,
): Buffer;

/** The canonical form of a JSON text (sorted keys, no whitespace), or null when not JSON. */
export declare function canonicalJson(text: string): string | null;

/** A response as stored in claimd; `body` null when it was too large to keep. */
export interface StoredResponse {
  status: number;
  headers: Array<[string, string]>;
  body: Buffer | null;
  /** The body's length in bytes. */
  bytes: number;
}

export declare function encodeResponse(response: {
  status: number;
  headers: Array<[string, string]>;
  body: Buffer | null;
  bytes?: number;
}): Buffer;

/** Decodes a stored response; null for bytes this middleware did not write. */
export declare function decodeResponse(bytes: Buffer): StoredResponse | null;

/** 'Idempotent-Replayed': the header that marks a replay. */
export declare const REPLAYED: string;

/** 65536: claimd's limit for a stored response, the default and maximum. */
export declare const DEFAULT_MAX_RESPONSE_BYTES: number;
