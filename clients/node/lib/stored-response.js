'use strict';
// The responses the Express Idempotency-Key middleware keeps in claimd: holding back what a
// handler writes (`capture`), the stored form (`encodeResponse`, `decodeResponse`) and which
// response headers are kept. Used by `express.js`.
//
// A stored response is `IDK2`, the status (u16), flags (u8; 1 = the body was too large to
// keep), the number of headers (u16), each header as name length (u8), lowercase name,
// value length (u16) and value (latin1); then the body, or, when it was not kept, its
// length in bytes (u64).

/** The start of an encoded response. */
const MAGIC = Buffer.from('IDK2', 'latin1');
/** The flag of a response whose body was not kept. */
const BODY_NOT_STORED = 1;
/** The response header that marks a replayed response. */
const REPLAYED = 'Idempotent-Replayed';
/**
 * Response headers never stored nor replayed: hop-by-hop (and every `proxy-*`), recomputed,
 * or credentials (`set-cookie`: a cookie is for the caller it was made for).
 */
const UNSTORED = new Set([
  'connection',
  'keep-alive',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  'content-length',
  'date',
  'set-cookie',
  REPLAYED.toLowerCase(),
]);

/** The header names a Connection header's value lists (hop-by-hop by that), lowercase. */
function connectionNamed(value) {
  const named = new Set();
  if (value === undefined || value === null) return named;
  for (const line of Array.isArray(value) ? value : [value]) {
    for (const token of String(line).split(',')) {
      const name = token.trim().toLowerCase();
      if (name) named.add(name);
    }
  }
  return named;
}

/**
 * Whether a response header (lowercase name) may be stored or replayed; `named` holds the
 * names the response's Connection header lists.
 */
function keptHeader(name, named = new Set()) {
  return !UNSTORED.has(name) && !name.startsWith('proxy-') && !named.has(name);
}

function u16(n) {
  const b = Buffer.alloc(2);
  b.writeUInt16BE(n);
  return b;
}

/**
 * Encodes a response for claimd: see the format at the top of this file. With `body`
 * null, the record says the body (`bytes` long) was not kept.
 * @param {{status: number, headers: Array<[string, string]>, body: Buffer|null, bytes?: number}} response
 * @returns {Buffer}
 */
function encodeResponse({ status, headers, body, bytes = 0 }) {
  const parts = [MAGIC, u16(status), Buffer.from([body === null ? BODY_NOT_STORED : 0])];
  const kept = headers.filter(
    ([name, value]) => Buffer.byteLength(name, 'latin1') <= 0xff && Buffer.byteLength(value, 'latin1') <= 0xffff,
  );
  parts.push(u16(kept.length));
  for (const [name, value] of kept) {
    const n = Buffer.from(name.toLowerCase(), 'latin1');
    const v = Buffer.from(value, 'latin1');
    parts.push(Buffer.from([n.length]), n, u16(v.length), v);
  }
  if (body === null) {
    const length = Buffer.alloc(8);
    length.writeBigUInt64BE(BigInt(bytes));
    parts.push(length);
  } else {
    parts.push(body);
  }
  return Buffer.concat(parts);
}

/**
 * Decodes what {@link encodeResponse} made; null for anything else.
 * @param {Buffer} bytes
 * @returns {{status: number, headers: Array<[string, string]>, body: Buffer|null, bytes: number}|null}
 */
function decodeResponse(bytes) {
  if (!Buffer.isBuffer(bytes) || bytes.length < 9 || !bytes.subarray(0, 4).equals(MAGIC)) {
    return null;
  }
  const status = bytes.readUInt16BE(4);
  const flags = bytes[6];
  const count = bytes.readUInt16BE(7);
  const headers = [];
  let at = 9;
  for (let i = 0; i < count; i++) {
    if (at + 1 > bytes.length) return null;
    const nameEnd = at + 1 + bytes[at];
    if (nameEnd + 2 > bytes.length) return null;
    const valueEnd = nameEnd + 2 + bytes.readUInt16BE(nameEnd);
    if (valueEnd > bytes.length) return null;
    headers.push([bytes.toString('latin1', at + 1, nameEnd), bytes.toString('latin1', nameEnd + 2, valueEnd)]);
    at = valueEnd;
  }
  if (status < 100 || status > 999) return null;
  if (flags & BODY_NOT_STORED) {
    if (at + 8 !== bytes.length) return null;
    return { status, headers, body: null, bytes: Number(bytes.readBigUInt64BE(at)) };
  }
  const body = bytes.subarray(at);
  return { status, headers, body, bytes: body.length };
}

/** A header's value as one string (several values joined by newlines). */
function headerText(value) {
  return Array.isArray(value) ? value.map(String).join('\n') : String(value);
}

/** A snapshot of the response's headers, to tell the handler's own ones later. */
function headerSnapshot(res) {
  const snapshot = new Map();
  for (const name of res.getHeaderNames()) snapshot.set(name, headerText(res.getHeader(name)));
  return snapshot;
}

/**
 * The headers to store of a finished response: content-type, and those the handler set
 * or changed (not the app's own, set before); never hop-by-hop ones (those the Connection
 * header names included), content-length, date or set-cookie.
 */
function storedHeaders(res, before) {
  const headers = [];
  const named = connectionNamed(res.getHeader('connection'));
  for (const name of res.getHeaderNames()) {
    if (!keptHeader(name, named)) continue;
    const value = res.getHeader(name);
    if (name !== 'content-type' && before.get(name) === headerText(value)) continue;
    for (const v of Array.isArray(value) ? value : [value]) headers.push([name, String(v)]);
  }
  return headers;
}

/**
 * Holds back everything written to `res` until it ends: `done` resolves to
 * `{status, body}` (the whole body, a Buffer) then, or to `{error}` when `fail(error)` comes
 * first (the handler threw or called next(err)): `res` gets its own methods back at once,
 * so the framework's error handler answers the client itself, and `fail` returns
 * `handedBack`, to pass the error on once the key is given back. Once the response was
 * produced, `fail` returns null: the response stands.
 * @param {import('node:http').ServerResponse} res
 * @param {Promise<void>} handedBack
 */
function capture(res, handedBack) {
  const names = ['writeHead', 'write', 'end', 'flushHeaders'];
  const own = new Map(names.map((n) => [n, Object.prototype.hasOwnProperty.call(res, n) ? res[n] : null]));
  const chunks = [];
  let settled = false;
  let resolve;
  const done = new Promise((r) => {
    resolve = r;
  });
  const release = () => {
    for (const [name, saved] of own) {
      if (saved) res[name] = saved;
      else delete res[name];
    }
  };
  const add = (chunk, encoding) => {
    if (chunk === undefined || chunk === null || settled) return;
    chunks.push(
      Buffer.isBuffer(chunk)
        ? chunk
        : chunk instanceof Uint8Array
          ? Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength)
          : Buffer.from(String(chunk), typeof encoding === 'string' ? encoding : 'utf8'),
    );
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
    if (typeof chunk === 'function') [cb, chunk] = [chunk, undefined];
    else if (typeof encoding === 'function') [cb, encoding] = [encoding, undefined];
    add(chunk, encoding);
    later(cb);
    if (!settled) {
      settled = true;
      release();
      resolve({ status: res.statusCode, body: Buffer.concat(chunks) });
    }
    return res;
  };

  const fail = (error) => {
    if (settled) return null; // the response was produced first: it stands
    settled = true;
    release();
    resolve({ error });
    return handedBack;
  };
  return { done, fail };
}

module.exports = {
  capture,
  encodeResponse,
  decodeResponse,
  headerSnapshot,
  storedHeaders,
  keptHeader,
  connectionNamed,
  REPLAYED,
};
