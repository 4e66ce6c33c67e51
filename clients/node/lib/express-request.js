'use strict';
// What the Express Idempotency-Key middleware reads of a request, beyond the key: the body
// to fingerprint (`bodyOf`: the raw bytes a parser kept, or what express.json parsed), the
// lines of a header (`headerLines`), the credentials for the default client
// (`credentialHeaders`) and the path the client sent (`pathOf`). Used by `express.js`.

const { isJsonType } = require('./request-identity.js');

/**
 * A `verify` function for `express.json`, `express.raw`, `express.text` and
 * `express.urlencoded`: keeps the exact bytes of the body as `req.rawBody`, which the
 * fingerprint needs.
 */
function keepRawBody(req, _res, buf) {
  req.rawBody = buf;
}

/** Whether `value` is what JSON.parse makes of an object or an array. */
function jsonContainer(value) {
  if (Array.isArray(value)) return true;
  if (value === null || typeof value !== 'object') return false;
  const proto = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}

/**
 * The request body to fingerprint: its raw bytes (`req.rawBody`, or the Buffer of
 * express.raw), or, when express.json parsed it without keeping them, the body written
 * again as JSON (`parsed`: its canonical JSON is the fingerprint); null when a body came in
 * but neither is there.
 */
function bodyOf(req) {
  if (Buffer.isBuffer(req.rawBody)) return { bytes: req.rawBody, parsed: false };
  if (Buffer.isBuffer(req.body)) return { bytes: req.body, parsed: false };
  const length = req.headers['content-length'];
  const chunked = req.headers['transfer-encoding'] !== undefined;
  if (!chunked && (length === undefined || length === '0')) return { bytes: Buffer.alloc(0), parsed: false };
  // express.json ran: body-parser 1 (Express 4) sets req._body; 2 (Express 5) read it all.
  const read = req._body === true || req.readableEnded === true;
  if (read && isJsonType(req.headers['content-type']) && jsonContainer(req.body)) {
    return { bytes: Buffer.from(JSON.stringify(req.body), 'utf8'), parsed: true };
  }
  return null;
}

/** The lines of request header `name` (lowercase), or undefined when there are none. */
function headerLines(req, name) {
  if (req.headersDistinct) return req.headersDistinct[name];
  const found = [];
  for (let i = 0; i + 1 < req.rawHeaders.length; i += 2) {
    if (req.rawHeaders[i].toLowerCase() === name) found.push(req.rawHeaders[i + 1]);
  }
  return found.length > 0 ? found : undefined;
}

/** The request's credentials headers, for defaultClient. */
function credentialHeaders(req) {
  return { authorization: headerLines(req, 'authorization'), cookie: headerLines(req, 'cookie') };
}

/** The path of a request as the client sent it, without the query. */
function pathOf(req) {
  const url = req.originalUrl || req.url || '';
  const query = url.indexOf('?');
  return query < 0 ? url : url.slice(0, query);
}

module.exports = { keepRawBody, bodyOf, headerLines, credentialHeaders, pathOf };
