'use strict';
// The Idempotency-Key HTTP header for Express, on claimd: one file, on the @claimd/client
// package (clients/node; `npm install --install-links path/to/claimd/clients/node`).
//
//   const express = require('express');
//   const { Claims } = require('@claimd/client');
//   const { idempotency, keepRawBody } = require('./idempotency');
//   const claims = new Claims('127.0.0.1:50051');
//   app.post('/orders', express.json({ verify: keepRawBody }),
//     idempotency({ claims, namespace: 'orders-api', clientOf: (req) => req.user.id }),
//     async (req, res) => res.status(201).json(await createOrder(req.body)));
//
// It follows the IETF HTTPAPI working group's draft "The Idempotency-Key HTTP Header
// Field". A request with a key is claimed in claimd under (client, method, path, key) with
// a fingerprint of its method, URL and raw body:
// - the first one runs the handler, whose response (status, its own headers, body) is
//   captured before it reaches the client, stored with Complete, then sent;
// - a retry while the first still runs waits for it (Claim with `wait`) and gets the
//   stored response replayed, marked `Idempotent-Replayed: true`; so does a retry after it;
// - the same key with another request is 422, a missing key 400, a request still running
//   once the wait is over 409 with Retry-After (all application/problem+json);
// - a handler that fails (it throws, calls next(err) or answers 5xx) gives the receipt
//   back with Retry, so a later retry runs it again; the client gets the 5xx;
// - a response too large for claimd (64 KiB, `maxResponseBytes`) is not stored: Retry,
//   and the client gets 500 saying so;
// - a retry that finds the first holder gone (its lease ran out) takes over and runs it.
//
// A stored response is `IDK1`, the status (u16), the number of headers (u16), each header
// as name length (u8), lowercase name, value length (u16) and value (latin1), then the body.
//
// Nothing here logs; no error or problem body carries a key, a token or a body.

const crypto = require('node:crypto');
const { Decision, ClaimdError, status: grpcStatus } = require('@claimd/client');

/** The request header, as the draft names it. */
const HEADER = 'idempotency-key';
/** The response header that marks a replayed response. */
const REPLAYED = 'Idempotent-Replayed';
/** claimd's limit for a stored response (docs/DESIGN.md §2.8). */
const DEFAULT_MAX_RESPONSE_BYTES = 65_536;
/** claimd's limit for a key; a longer one is hashed. */
const MAX_CLAIM_KEY_BYTES = 512;
/** The longest Idempotency-Key value accepted. */
const MAX_KEY_CHARS = 255;
/** The longest wait claimd allows a Claim. */
const MAX_WAIT_MS = 60_000;
/** The start of an encoded response. */
const MAGIC = Buffer.from('IDK1', 'latin1');
/** Response headers never stored: hop-by-hop, recomputed, or credentials. */
const UNSTORED = new Set([
  'connection',
  'keep-alive',
  'proxy-authenticate',
  'proxy-authorization',
  'proxy-connection',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  'content-length',
  'date',
  'set-cookie',
  REPLAYED.toLowerCase(),
]);
/** An unquoted key, as many clients send one: an sf-token-like run of characters. */
const BARE_KEY = /^[A-Za-z0-9!#$%&'*+.^_`|~:/-]+$/;

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * A `verify` function for `express.json`, `express.raw`, `express.text` and
 * `express.urlencoded`: keeps the exact bytes of the body as `req.rawBody`, which the
 * fingerprint needs.
 * @param {import('express').Request} req
 * @param {import('express').Response} _res
 * @param {Buffer} buf
 */
function keepRawBody(req, _res, buf) {
  req.rawBody = buf;
}

/**
 * The value of an Idempotency-Key header: an sf-string (`"…"`, as the draft defines it)
 * or, leniently, a bare token; null when it is malformed, empty or longer than 255.
 * @param {string} header
 * @returns {string|null}
 */
function parseKey(header) {
  const text = String(header).trim();
  let value;
  if (text.startsWith('"')) {
    value = '';
    let i = 1;
    for (; i < text.length; i++) {
      const c = text[i];
      if (c === '"') break;
      if (c === '\\') {
        i += 1;
        if (text[i] !== '"' && text[i] !== '\\') return null;
        value += text[i];
      } else if (c < ' ' || c > '~') {
        return null;
      } else {
        value += c;
      }
    }
    if (i !== text.length - 1) return null; // unterminated, or something after the string
  } else if (BARE_KEY.test(text)) {
    value = text;
  } else {
    return null;
  }
  return value.length >= 1 && value.length <= MAX_KEY_CHARS ? value : null;
}

/**
 * The claimd key for a request: client, method, path and Idempotency-Key value, or
 * `sha256:<hex>` of them when that is longer than claimd allows.
 * @param {string} client the tenant or API user ('' for anonymous).
 * @param {string} method e.g. 'POST'.
 * @param {string} path the request's path without the query, e.g. '/orders'.
 * @param {string} value the Idempotency-Key value.
 * @returns {string}
 */
function claimKey(client, method, path, value) {
  const key = `${encodeURIComponent(client || '-')} ${method} ${path} ${value}`;
  if (Buffer.byteLength(key, 'utf8') <= MAX_CLAIM_KEY_BYTES) return key;
  return `sha256:${crypto.createHash('sha256').update(key).digest('hex')}`;
}

/**
 * The fingerprint of a request: SHA-256 of its method, URL (path and query) and raw body.
 * @param {string} method
 * @param {string} url
 * @param {Buffer|string} body
 * @returns {Buffer}
 */
function requestFingerprint(method, url, body) {
  return crypto.createHash('sha256').update(`${method}\n${url}\n`).update(body).digest();
}

/**
 * Encodes a response for claimd: see the format at the top of this file.
 * @param {{status: number, headers: Array<[string, string]>, body: Buffer}} response
 * @returns {Buffer}
 */
function encodeResponse({ status, headers, body }) {
  const parts = [MAGIC, u16(status), u16(headers.length)];
  for (const [name, value] of headers) {
    const n = Buffer.from(name.toLowerCase(), 'latin1');
    const v = Buffer.from(value, 'latin1');
    if (n.length > 0xff || v.length > 0xffff) throw new RangeError(`header ${name} is too long`);
    parts.push(Buffer.from([n.length]), n, u16(v.length), v);
  }
  parts.push(body);
  return Buffer.concat(parts);
}

/**
 * Decodes what {@link encodeResponse} made; null for anything else.
 * @param {Buffer} bytes
 * @returns {{status: number, headers: Array<[string, string]>, body: Buffer}|null}
 */
function decodeResponse(bytes) {
  if (!Buffer.isBuffer(bytes) || bytes.length < 8 || !bytes.subarray(0, 4).equals(MAGIC)) {
    return null;
  }
  const status = bytes.readUInt16BE(4);
  const count = bytes.readUInt16BE(6);
  const headers = [];
  let at = 8;
  for (let i = 0; i < count; i++) {
    if (at + 1 > bytes.length) return null;
    const nameEnd = at + 1 + bytes[at];
    if (nameEnd + 2 > bytes.length) return null;
    const valueEnd = nameEnd + 2 + bytes.readUInt16BE(nameEnd);
    if (valueEnd > bytes.length) return null;
    const name = bytes.toString('latin1', at + 1, nameEnd);
    headers.push([name, bytes.toString('latin1', nameEnd + 2, valueEnd)]);
    at = valueEnd;
  }
  if (status < 100 || status > 999) return null;
  return { status, headers, body: bytes.subarray(at) };
}

function u16(n) {
  const b = Buffer.alloc(2);
  b.writeUInt16BE(n);
  return b;
}

/** A problem (RFC 9457) sent as application/problem+json. */
function sendProblem(res, options, status, code, title, detail, extraHeaders = {}) {
  const body = { type: 'about:blank', title, status, detail, code };
  if (options.docsUrl) {
    body.type = `${options.docsUrl}#${code}`;
    res.setHeader('Link', `<${options.docsUrl}>; rel="describedby"; type="text/html"`);
  }
  for (const [name, value] of Object.entries(extraHeaders)) res.setHeader(name, value);
  res.status(status);
  res.setHeader('Content-Type', 'application/problem+json');
  res.end(JSON.stringify(body));
}

/** A snapshot of the response's headers, to tell the handler's own ones later. */
function headerSnapshot(res) {
  const snapshot = new Map();
  for (const name of res.getHeaderNames()) snapshot.set(name, headerText(res.getHeader(name)));
  return snapshot;
}

function headerText(value) {
  return Array.isArray(value) ? value.map(String).join('\n') : String(value);
}

/** Puts the response's headers back as they were in `snapshot`. */
function restoreHeaders(res, snapshot) {
  for (const name of res.getHeaderNames()) {
    if (!snapshot.has(name)) res.removeHeader(name);
  }
  for (const [name, text] of snapshot) {
    const values = text.split('\n');
    res.setHeader(name, values.length === 1 ? values[0] : values);
  }
}

/**
 * Holds back everything the handler writes to `res`: resolves, once it ends the
 * response, to `{status, headers, body, bytes, tooLarge}` (`body` null when a non-5xx
 * response grew past `limit`; 5xx bodies are kept to pass them on). `release()` gives
 * `res` its own methods back and returns the real `end`.
 */
function capture(res, limit) {
  const own = {
    writeHead: Object.prototype.hasOwnProperty.call(res, 'writeHead'),
    write: Object.prototype.hasOwnProperty.call(res, 'write'),
    end: Object.prototype.hasOwnProperty.call(res, 'end'),
    flushHeaders: Object.prototype.hasOwnProperty.call(res, 'flushHeaders'),
  };
  const saved = {
    writeHead: res.writeHead,
    write: res.write,
    end: res.end,
    flushHeaders: res.flushHeaders,
  };
  let chunks = [];
  let bytes = 0;
  let tooLarge = false;
  let ended = false;
  let resolve;
  const done = new Promise((r) => {
    resolve = r;
  });

  const add = (chunk, encoding) => {
    if (chunk === undefined || chunk === null || ended) return;
    const buf = Buffer.isBuffer(chunk)
      ? chunk
      : chunk instanceof Uint8Array
        ? Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength)
        : Buffer.from(String(chunk), typeof encoding === 'string' ? encoding : 'utf8');
    bytes += buf.length;
    if (tooLarge) return;
    chunks.push(buf);
    if (bytes > limit && res.statusCode < 500) {
      tooLarge = true;
      chunks = [];
    }
  };
  const later = (cb) => {
    if (typeof cb === 'function') process.nextTick(cb);
  };

  res.writeHead = function writeHead(statusCode, reason, headers) {
    res.statusCode = statusCode;
    if (typeof reason === 'string') res.statusMessage = reason;
    else headers = reason;
    if (Array.isArray(headers)) {
      for (let i = 0; i + 1 < headers.length; i += 2) res.setHeader(headers[i], headers[i + 1]);
    } else if (headers) {
      for (const [name, value] of Object.entries(headers)) res.setHeader(name, value);
    }
    return res;
  };
  res.flushHeaders = function flushHeaders() {};
  res.write = function write(chunk, encoding, cb) {
    add(chunk, encoding);
    later(typeof encoding === 'function' ? encoding : cb);
    return true;
  };
  res.end = function end(chunk, encoding, cb) {
    if (typeof chunk === 'function') {
      cb = chunk;
      chunk = undefined;
    } else if (typeof encoding === 'function') {
      cb = encoding;
      encoding = undefined;
    }
    add(chunk, encoding);
    later(cb);
    if (!ended) {
      ended = true;
      const headers = [];
      for (const name of res.getHeaderNames()) {
        const value = res.getHeader(name);
        for (const v of Array.isArray(value) ? value : [value]) headers.push([name, String(v)]);
      }
      resolve({
        status: res.statusCode,
        headers,
        body: tooLarge ? null : Buffer.concat(chunks),
        bytes,
        tooLarge,
      });
    }
    return res;
  };

  const release = () => {
    for (const name of Object.keys(saved)) {
      if (own[name]) res[name] = saved[name];
      else delete res[name];
    }
    return res.end;
  };
  return { done, release };
}

/** Sends a captured response as the handler made it (its headers are still on `res`). */
function sendCaptured(res, captured) {
  res.statusCode = captured.status;
  res.removeHeader('content-length');
  res.end(captured.body);
}

/** Replays a stored response, marked as a replay. */
function sendReplay(res, stored) {
  const values = new Map();
  for (const [name, value] of stored.headers) {
    if (!values.has(name)) values.set(name, []);
    values.get(name).push(value);
  }
  for (const [name, list] of values) res.setHeader(name, list.length === 1 ? list[0] : list);
  res.setHeader(REPLAYED, 'true');
  res.statusCode = stored.status;
  res.end(stored.body);
}

/** An error the handler's attempt ends with: `run` gives the receipt back with Retry. */
class AttemptFailed extends Error {
  constructor(message, retryAfterMs) {
    super(message);
    this.name = 'AttemptFailed';
    this.retryAfterMs = retryAfterMs;
    this.countAttempt = true;
  }
}

/**
 * Express middleware for the Idempotency-Key header on claimd. Mount it on a route after
 * a body parser that keeps the raw body (`express.json({ verify: keepRawBody })`,
 * `express.raw()`), before the handler.
 *
 * @param {object} options
 * @param {import('@claimd/client').Claims} options.claims the claimd client.
 * @param {string} options.namespace the claimd namespace of the receipts.
 * @param {boolean} [options.required] answer 400 to a request without the header
 *   (default true); false lets such a request through, without idempotency.
 * @param {number} [options.waitMs] how long a retry waits for the first request (0 to
 *   60000; default 10000); then 409.
 * @param {number} [options.leaseMs] the lease of a running request, kept alive with a
 *   heartbeat every third of it (default 30000); a retry takes over after it ran out.
 * @param {(req: object) => string} [options.clientOf] the tenant or API user of a
 *   request (default: '' — one anonymous client: set it whenever requests authenticate).
 * @param {(req: object, value: string) => string} [options.keyOf] the claimd key of a
 *   request (default: `claimKey(clientOf(req), method, path, value)`).
 * @param {number} [options.maxResponseBytes] the largest encoded response to store
 *   (default 65536, claimd's limit).
 * @param {number} [options.retryAfterMs] how soon a failed request may run again (default
 *   1000, claimd's shortest).
 * @param {number} [options.retryAfterS] the Retry-After of a 409 (default 1: a retry
 *   waits again anyway).
 * @param {string[]} [options.methods] the methods it applies to (default POST and PATCH);
 *   others pass through.
 * @param {string} [options.docsUrl] documentation to link from problem bodies (`type`
 *   and a `Link` header), as the draft suggests.
 * @returns {(req: object, res: object, next: Function) => Promise<void>}
 */
function idempotency(options) {
  const {
    claims,
    namespace,
    required = true,
    waitMs = 10_000,
    leaseMs = 30_000,
    clientOf = () => '',
    keyOf,
    maxResponseBytes = DEFAULT_MAX_RESPONSE_BYTES,
    retryAfterMs = 1_000,
    retryAfterS = 1,
    methods = ['POST', 'PATCH'],
  } = options || {};
  if (!claims || typeof claims.run !== 'function') throw new TypeError('claims: a Claims client');
  if (typeof namespace !== 'string' || !namespace) throw new TypeError('namespace: a string');
  if (!Number.isFinite(waitMs) || waitMs < 0 || waitMs > MAX_WAIT_MS) {
    throw new RangeError(`waitMs must be 0 to ${MAX_WAIT_MS}`);
  }
  if (!Number.isFinite(maxResponseBytes) || maxResponseBytes < 1) {
    throw new RangeError('maxResponseBytes must be a positive number');
  }
  const applies = new Set(methods.map((m) => m.toUpperCase()));
  const problem = (res, ...args) => sendProblem(res, options, ...args);

  return async function idempotencyKey(req, res, next) {
    if (!applies.has(req.method)) return next();
    const header = req.get(HEADER);
    if (header === undefined) {
      if (!required) return next();
      return problem(res, 400, 'idempotency-key-missing', 'Idempotency-Key is missing',
        'This operation is idempotent and requires an Idempotency-Key header.');
    }
    const value = parseKey(header);
    if (value === null) {
      return problem(res, 400, 'idempotency-key-invalid', 'Idempotency-Key is invalid',
        `The Idempotency-Key must be a quoted string of 1 to ${MAX_KEY_CHARS} printable ` +
          'ASCII characters.');
    }
    const body = rawBodyOf(req);
    if (body === null) {
      return next(new TypeError('idempotency needs the raw request body: mount ' +
        'express.json({ verify: keepRawBody }) or express.raw() before it'));
    }
    const [path] = req.originalUrl.split('?');
    let key;
    try {
      key = keyOf ? keyOf(req, value) : claimKey(clientOf(req), req.method, path, value);
    } catch (error) {
      return next(error);
    }
    const fingerprint = requestFingerprint(req.method, req.originalUrl, body);
    const before = headerSnapshot(res);

    // What the handler answered, once it ran here.
    let captured = null;
    const work = async (ctx) => {
      req.idempotency = { key: value, attempt: ctx.attempt, signal: ctx.signal };
      const held = capture(res, maxResponseBytes);
      next();
      const answer = await held.done;
      held.release();
      captured = answer;
      if (answer.status >= 500) {
        throw new AttemptFailed(`the handler answered ${answer.status}`, retryAfterMs);
      }
      if (!answer.tooLarge) {
        // content-type, and the headers the handler set or changed (not the app's own).
        const headers = answer.headers.filter(
          ([name]) =>
            name === 'content-type' ||
            (!UNSTORED.has(name) && before.get(name) !== headerText(res.getHeader(name))),
        );
        const encoded = encodeResponse({ status: answer.status, headers, body: answer.body });
        if (encoded.length <= maxResponseBytes) return encoded;
        answer.bytes = encoded.length;
      }
      answer.tooLarge = true;
      throw new AttemptFailed(
        `the response is too large to store for replay (${answer.bytes} bytes)`,
        retryAfterMs,
      );
    };

    const started = Date.now();
    try {
      for (;;) {
        const left = Math.max(0, waitMs - (Date.now() - started));
        const outcome = await claims.run(namespace, key, fingerprint, work, {
          leaseMs,
          waitMs: left,
          retryAfterMs,
        });
        switch (outcome.decision) {
          case Decision.CLAIMED:
            // Completed, retried, or lost to a takeover: the client gets what the handler
            // answered here, unless it could not be stored.
            return finish(res, captured, before, problem, maxResponseBytes);
          case Decision.COMPLETED: {
            const receipt = outcome.receipt;
            if (receipt.response_pruned_at || receipt.response.length === 0) {
              return problem(res, 422, 'idempotency-key-expired', 'Idempotency-Key is used up',
                'This key was used and its response is no longer kept; use a new key.');
            }
            const stored = decodeResponse(receipt.response);
            if (!stored) {
              return problem(res, 500, 'idempotency-response-unreadable',
                'Stored response cannot be replayed',
                'The stored response of this key is not one this middleware wrote.');
            }
            return sendReplay(res, stored);
          }
          case Decision.IN_FLIGHT:
            return problem(res, 409, 'idempotency-request-in-progress',
              'A request with this Idempotency-Key is still being processed',
              'Retry the request later; it will get the same response.',
              { 'Retry-After': String(retryAfterS) });
          case Decision.RETRY_SCHEDULED: {
            // The last attempt failed; the next may start at next_attempt_at.
            const due = nextAttemptIn(outcome.receipt);
            const remaining = waitMs - (Date.now() - started);
            if (due <= remaining) {
              await sleep(Math.max(due, 20));
              continue;
            }
            return problem(res, 503, 'idempotency-retry-scheduled',
              'The last attempt of this request failed',
              'Retry the request later to run it again.',
              { 'Retry-After': String(Math.max(1, Math.ceil(due / 1000))) });
          }
          case Decision.QUARANTINED:
            return problem(res, 500, 'idempotency-request-failed',
              'This request failed too often',
              'Every attempt of this request failed; use a new Idempotency-Key to try again.');
          case Decision.CONFLICT:
            return problem(res, 422, 'idempotency-key-reused', 'Idempotency-Key is already used',
              'This key was used with a different request; use a new key for a new request.');
          default:
            throw new Error(`unexpected decision ${outcome.decision}`);
        }
      }
    } catch (error) {
      // The handler ran (settling it failed): its answer is real, so the client gets it.
      if (captured) return finish(res, captured, before, problem, maxResponseBytes);
      if (error instanceof ClaimdError) {
        const busy = error.code === grpcStatus.UNAVAILABLE ||
          error.code === grpcStatus.DEADLINE_EXCEEDED ||
          error.code === grpcStatus.RESOURCE_EXHAUSTED;
        return problem(res, busy ? 503 : 500, 'idempotency-store-error',
          'Idempotency store unavailable',
          `The idempotency store could not be asked (${error.codeName}); retry later.`,
          busy ? { 'Retry-After': '1' } : {});
      }
      return next(error);
    }
  };
}

/** The raw request body, or null when a body came in but no parser kept its bytes. */
function rawBodyOf(req) {
  if (Buffer.isBuffer(req.rawBody)) return req.rawBody;
  if (Buffer.isBuffer(req.body)) return req.body;
  const length = req.headers['content-length'];
  const chunked = req.headers['transfer-encoding'] !== undefined;
  if (!chunked && (length === undefined || length === '0')) return Buffer.alloc(0);
  return null;
}

/** Milliseconds until a RETRY_WAIT receipt may be claimed again (local clock). */
function nextAttemptIn(receipt) {
  const at = receipt.next_attempt_at;
  if (!at) return 0;
  const ms = Number(at.seconds) * 1000 + Math.floor(at.nanos / 1e6);
  return Math.max(0, ms - Date.now());
}

/** Sends what the handler answered here, or 500 when it was too large to store. */
function finish(res, captured, before, problem, limit) {
  if (!captured) {
    return problem(res, 500, 'idempotency-handler-not-run', 'The request was not handled',
      'The handler could not be started; retry the request.');
  }
  if (!captured.tooLarge) return sendCaptured(res, captured);
  restoreHeaders(res, before);
  return problem(res, 500, 'idempotency-response-too-large',
    'Response too large to store for replay',
    `The response is ${captured.bytes} bytes, more than the ${limit} bytes that can be ` +
      'stored for replay; the request was not stored and may be retried.');
}

module.exports = {
  idempotency,
  keepRawBody,
  parseKey,
  claimKey,
  requestFingerprint,
  encodeResponse,
  decodeResponse,
  REPLAYED,
  DEFAULT_MAX_RESPONSE_BYTES,
};
