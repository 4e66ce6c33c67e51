'use strict';
// @claimd/client/express: the Idempotency-Key HTTP header for Express 4 and 5, on claimd.
//
//   const express = require('express');
//   const { Claims } = require('@claimd/client');
//   const { idempotency } = require('@claimd/client/express');
//   const claims = new Claims('127.0.0.1:50051');
//   app.use(express.json());
//   app.use(authenticate); // sets req.user
//   app.use(idempotency({ claims, namespace: 'orders-api', clientOf: (req) => req.user.id }));
//   app.post('/orders', async (req, res) => res.status(201).json(await createOrder(req.body)));
//
// Mounted with app.use, router.use or on a route: it wraps the handlers that can run after
// it (lib/route-errors.js) to see their errors. It follows the IETF HTTPAPI draft "The
// Idempotency-Key HTTP Header Field". A request is claimed in claimd under its client
// (`clientOf`, else a digest of its credentials, else "anonymous": defaultClient in
// lib/request-identity.js) and key (never its method or path); its fingerprint
// is its method, path with query and body (canonical JSON for JSON bodies), so the same
// key with another body or on another route is 422. The first request runs the handler;
// whatever response it produces (2xx, 4xx or 5xx) is stored with Complete, then sent, and
// every retry gets it replayed with `Idempotent-Replayed: true`: a handler that answered
// never runs again for that key. A response too large to store (`maxResponseBytes`) still
// settles the key: retries get its status and headers with a problem body saying so. Only
// a handler that throws or calls next(err) before answering gives the key back (Retry,
// with the error's class name only); the error goes on to Express's error handlers.
// A Claim refused by a tenant quota of claimd (a QuotaError) is 503 with `Retry-After` (the
// quota's delay in whole seconds, rounded up, at least 1), and the handler does not run.
//
// Nothing here logs; no problem body or error carries a key, a token or a body.

const { Decision, ClaimdError, QuotaError, status: grpcStatus, timestampMs } = require('./index.js');
const identity = require('./lib/request-identity.js');
const stored = require('./lib/stored-response.js');
const { watchHandlers, markGuard, WATCHING } = require('./lib/route-errors.js');
const { keepRawBody, bodyOf, headerLines, credentialHeaders, pathOf } = require('./lib/express-request.js');
const { sendProblem, sendReplay, secondsUntil } = require('./lib/replies.js');

const { parseKey, defaultClient, claimKey, requestFingerprint, KEY_RULE } = identity;
const { capture, encodeResponse, decodeResponse, headerSnapshot, storedHeaders, REPLAYED } = stored;

/** The request header, as the draft names it. */
const HEADER = 'idempotency-key';
/** claimd's limit for a stored response (docs/DESIGN.md §2.8): the default and maximum. */
const DEFAULT_MAX_RESPONSE_BYTES = 65_536;
/** The longest wait claimd allows a Claim. */
const MAX_WAIT_MS = 60_000;

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** The name of a thrown value's class: all a Retry says of it (a message may hold secrets). */
function className(error) {
  if (error instanceof Error) return error.constructor?.name || error.name || 'Error';
  return error === null ? 'null' : typeof error;
}

/** The error `work` ends with so that `run` gives the receipt back with Retry. */
function attemptFailed(text, retryAfterMs) {
  const error = new Error();
  error.name = text; // errorText() of a message-less error is its name alone
  error.retryAfterMs = retryAfterMs;
  return error;
}

/** A delay in milliseconds as `Retry-After` seconds: rounded up, at least 1. */
function retryAfterSeconds(ms) {
  return String(Math.max(1, Math.ceil(ms / 1000)));
}

/** A cookie name: a token (RFC 6265), as `sessionCookie` must be. */
const COOKIE_NAME = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;

/**
 * Express middleware for the Idempotency-Key header on claimd: mount it with app.use,
 * router.use or on a route, after a body parser and before the handlers. See express.d.ts
 * for the options.
 */
function idempotency(options) {
  const {
    claims,
    namespace,
    required = true,
    waitMs = 10_000,
    leaseMs = 30_000,
    clientOf,
    sessionCookie,
    paths,
    maxResponseBytes = DEFAULT_MAX_RESPONSE_BYTES,
    retryAfterMs = 1_000,
    retryServerErrors = false,
    canonicalJson = true,
    methods = ['POST', 'PATCH'],
    docsUrl,
  } = options || {};
  if (!claims || typeof claims.run !== 'function') throw new TypeError('claims: a Claims client');
  if (typeof namespace !== 'string' || !namespace) throw new TypeError('namespace: a string');
  if (!Number.isFinite(waitMs) || waitMs < 0 || waitMs > MAX_WAIT_MS) {
    throw new RangeError(`waitMs must be 0 to ${MAX_WAIT_MS}`);
  }
  if (!Number.isInteger(maxResponseBytes) || maxResponseBytes < 1 ||
      maxResponseBytes > DEFAULT_MAX_RESPONSE_BYTES) {
    throw new RangeError(`maxResponseBytes must be 1 to ${DEFAULT_MAX_RESPONSE_BYTES}`);
  }
  if (clientOf !== undefined && typeof clientOf !== 'function') {
    throw new TypeError('clientOf: a function of the request');
  }
  if (sessionCookie !== undefined) {
    if (typeof sessionCookie !== 'string' || !COOKIE_NAME.test(sessionCookie)) {
      throw new TypeError('sessionCookie: the name of a cookie');
    }
    if (clientOf !== undefined) {
      throw new TypeError('sessionCookie applies only without clientOf: give one or the other');
    }
  }
  if (paths !== undefined &&
      (!Array.isArray(paths) || !paths.every((p) => typeof p === 'string' && p.startsWith('/')))) {
    throw new TypeError("paths: path prefixes, each starting with '/'");
  }
  const applies = new Set(methods.map((m) => m.toUpperCase()));
  const covers = (req) => applies.has(req.method) &&
    (paths === undefined || paths.some((prefix) => pathOf(req).startsWith(prefix)));
  const clientOfRequest = clientOf || ((req) => defaultClient(credentialHeaders(req), sessionCookie));
  const problem = (res, ...args) => sendProblem(res, docsUrl, ...args);

  return markGuard(async function idempotencyKey(req, res, next) {
    if (!covers(req)) return next();
    if (!watchHandlers(req, idempotencyKey)) {
      return next(new TypeError('idempotency() is not in the app\'s router: mount the function ' +
        'it returns itself, with app.use(idempotency(options)), router.use(...) or on a route'));
    }
    const values = headerLines(req, HEADER);
    if (values === undefined) {
      if (!required) return next();
      return problem(res, 400, 'idempotency-key-missing', 'Idempotency-Key is missing',
        'This operation is idempotent and requires an Idempotency-Key header.');
    }
    const key = values.length === 1 ? parseKey(values[0]) : null;
    if (key === null) {
      return problem(res, 400, 'idempotency-key-invalid', 'Idempotency-Key is invalid', KEY_RULE);
    }
    const body = bodyOf(req);
    if (body === null) {
      return next(new TypeError('idempotency needs the request body: mount express.json(), ' +
        'or a parser with { verify: keepRawBody }, or express.raw(), before it'));
    }
    if (body.parsed && !canonicalJson) {
      return next(new TypeError('canonicalJson: false fingerprints the exact body bytes: ' +
        'mount express.json({ verify: keepRawBody }) before idempotency()'));
    }
    let claim;
    try {
      claim = claimKey(clientOfRequest(req), key);
    } catch (error) {
      return next(error);
    }
    const contentType = body.parsed ? 'application/json' : req.headers['content-type'];
    const fingerprint = requestFingerprint(req.method, req.originalUrl, body.bytes, contentType, canonicalJson);
    const before = headerSnapshot(res);

    let produced = null; // what the handler answered here
    let propagated = false; // it threw or called next(err): Express's error handlers answer
    let handBack; // passes that error on, once the key is given back
    const handedBack = new Promise((resolve) => {
      handBack = resolve;
    });
    const work = async (ctx) => {
      req.idempotency = { key, attempt: ctx.attempt, signal: ctx.signal };
      const held = capture(res, handedBack);
      req[WATCHING] = held.fail;
      next();
      const result = await held.done;
      delete req[WATCHING];
      if (result.error !== undefined || !('status' in result)) {
        propagated = true;
        throw attemptFailed(className(result.error), retryAfterMs);
      }
      const { status, body: answer } = result;
      produced = result;
      if (retryServerErrors && status >= 500) throw attemptFailed(`HTTP ${status}`, retryAfterMs);
      const headers = storedHeaders(res, before);
      const full = encodeResponse({ status, headers, body: answer });
      if (full.length <= maxResponseBytes) return full;
      // Too large to keep: the key is settled all the same, with status and headers.
      const partial = encodeResponse({ status, headers, body: null, bytes: answer.length });
      if (partial.length <= maxResponseBytes) return partial;
      return encodeResponse({ status, headers: [], body: null, bytes: answer.length });
    };
    const sendProduced = () => {
      res.statusCode = produced.status;
      res.removeHeader('content-length');
      res.end(produced.body);
    };

    const started = Date.now();
    try {
      return await decide();
    } finally {
      handBack();
    }

    async function decide() {
      try {
        for (;;) {
          const left = Math.max(0, waitMs - (Date.now() - started));
          const outcome = await claims.run(namespace, claim, fingerprint, work, {
            leaseMs,
            waitMs: left,
            retryAfterMs,
          });
          switch (outcome.decision) {
            case Decision.CLAIMED:
              if (propagated) return undefined;
              if (produced) return sendProduced();
              return problem(res, 500, 'idempotency-handler-not-run', 'The request was not handled',
                'The handler could not be started; retry the request.');
            case Decision.COMPLETED: {
              const receipt = outcome.receipt;
              if (receipt.response_pruned_at || receipt.response.length === 0) {
                return problem(res, 422, 'idempotency-key-expired', 'Idempotency-Key is used up',
                  'This key was used and its response is no longer kept; use a new key.');
              }
              const record = decodeResponse(receipt.response);
              if (!record) {
                return problem(res, 500, 'idempotency-response-unreadable',
                  'Stored response cannot be replayed',
                  'The stored response of this key is not one this middleware wrote.');
              }
              return sendReplay(res, record, docsUrl);
            }
            case Decision.IN_FLIGHT:
              return problem(res, 409, 'idempotency-request-in-progress',
                'A request with this Idempotency-Key is still being processed',
                'Retry the request later; it will get the same response.',
                { 'Retry-After': secondsUntil(outcome.receipt.lease_expires_at) });
            case Decision.RETRY_SCHEDULED: {
              // The last attempt failed before answering; the next may start at next_attempt_at.
              const due = Math.max(0, (timestampMs(outcome.receipt.next_attempt_at) ?? 0) - Date.now());
              if (due <= waitMs - (Date.now() - started)) {
                await sleep(Math.max(due, 20));
                continue;
              }
              return problem(res, 503, 'idempotency-retry-scheduled',
                'The last attempt of this request failed',
                'Retry the request later to run it again.',
                { 'Retry-After': secondsUntil(outcome.receipt.next_attempt_at) });
            }
            case Decision.QUARANTINED:
              return problem(res, 422, 'idempotency-key-expired', 'Idempotency-Key is used up',
                'Every attempt of this request failed; use a new Idempotency-Key to try again.');
            case Decision.CONFLICT:
              return problem(res, 422, 'idempotency-key-reused', 'Idempotency-Key is already used',
                'This key was used with a different request (another body, method or path); ' +
                  'use a new key for a new request.');
            default:
              throw new Error(`unexpected decision ${outcome.decision}`);
          }
        }
      } catch (error) {
        if (propagated) return undefined; // the error went on to Express's error handlers
        // The handler ran (settling it failed): its answer is real, so the client gets it.
        if (produced) return sendProduced();
        if (error instanceof QuotaError && error.rpc === 'Claim') {
          // claimd took nothing from this request: its sender may come back once it is due.
          return problem(res, 503, 'idempotency-quota-exceeded', 'Idempotency store quota exceeded',
            'This service is over its quota of the idempotency store; retry after Retry-After seconds.',
            { 'Retry-After': retryAfterSeconds(error.retryAfterMs) });
        }
        if (error instanceof ClaimdError) {
          const busy = error.code === grpcStatus.UNAVAILABLE ||
            error.code === grpcStatus.DEADLINE_EXCEEDED ||
            error.code === grpcStatus.RESOURCE_EXHAUSTED;
          if (busy) {
            return problem(res, 503, 'idempotency-store-unavailable', 'Idempotency store unavailable',
              `The idempotency store could not be asked (${error.codeName}); retry later.`,
              { 'Retry-After': '1' });
          }
          return problem(res, 500, 'idempotency-store-error', 'Idempotency store error',
            `The idempotency store refused the request (${error.codeName}).`);
        }
        return next(error);
      }
    }
  });
}

module.exports = {
  idempotency,
  keepRawBody,
  parseKey,
  defaultClient,
  claimKey,
  requestFingerprint,
  canonicalJson: identity.canonicalJson,
  encodeResponse,
  decodeResponse,
  REPLAYED,
  DEFAULT_MAX_RESPONSE_BYTES,
};
