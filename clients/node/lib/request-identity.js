'use strict';
// What identifies an HTTP request for the Idempotency-Key integrations: the header's value
// (`parseKey`), the client of a request when the app names none (`defaultClient`: a digest
// of its credentials, or "anonymous"), the claim key (`claimKey`: the client and the key,
// never the method or the path) and the fingerprint (`requestFingerprint`: method, path
// with query, and the body, as canonical JSON when it is JSON). Pure functions, no I/O;
// used by `express.js`.

const crypto = require('node:crypto');

/** The longest Idempotency-Key value accepted, after unquoting. */
const MAX_KEY_CHARS = 255;
/** claimd's limit for a key; a longer claim key is hashed. */
const MAX_CLAIM_KEY_BYTES = 512;
/** Deeper JSON is fingerprinted by its raw bytes (no recursion limit to hit). */
const MAX_JSON_DEPTH = 512;
/** The detail of a 400 for a malformed key: the rule, never the value. */
const KEY_RULE =
  'Idempotency-Key must be 1–255 printable ASCII characters, or a quoted string of them';

const printable = (c) => c >= 0x20 && c <= 0x7e;

/**
 * The value of an Idempotency-Key header: the draft's sf-string (`"…"` with `\"` and `\\`
 * escapes) or a bare value of printable ASCII (no space first or last); null when it is
 * neither, or not 1 to 255 characters once unquoted.
 * @param {string} header
 * @returns {string|null}
 */
function parseKey(header) {
  const text = String(header);
  let value = '';
  if (text.startsWith('"')) {
    let i = 1;
    for (; i < text.length; i++) {
      const c = text.charCodeAt(i);
      if (c === 0x22) break;
      if (!printable(c)) return null;
      if (c === 0x5c) {
        i += 1;
        const escaped = text.charCodeAt(i);
        if (escaped !== 0x22 && escaped !== 0x5c) return null;
        value += text[i];
      } else {
        value += text[i];
      }
    }
    if (i !== text.length - 1) return null; // unterminated, or something after the string
  } else {
    for (let i = 0; i < text.length; i++) {
      if (!printable(text.charCodeAt(i))) return null;
    }
    if (text.startsWith(' ') || text.endsWith(' ')) return null;
    value = text;
  }
  return value.length >= 1 && value.length <= MAX_KEY_CHARS ? value : null;
}

/** Lowercase hex SHA-256 of a header value's bytes (Node reads header bytes as latin1). */
const digest = (text) => crypto.createHash('sha256').update(Buffer.from(text, 'latin1')).digest('hex');

/** A header's lines: `headers[name]` as an array (a string is one line), or []. */
function lines(headers, name) {
  const value = headers ? headers[name] : undefined;
  if (value === undefined || value === null) return [];
  return (Array.isArray(value) ? value : [value]).map(String);
}

/** The value of cookie `name` in Cookie header lines, exactly as sent; the first wins. */
function cookieValue(cookieLines, name) {
  for (const line of cookieLines) {
    for (const part of line.split(';')) {
      const pair = part.replace(/^[ \t]+|[ \t]+$/g, '');
      const eq = pair.indexOf('=');
      if (eq > 0 && pair.slice(0, eq) === name) return pair.slice(eq + 1);
    }
  }
  return undefined;
}

/**
 * The client of a request when the app gives no client function (the same in claimd's
 * four packages): `auth:` + SHA-256 of its Authorization header lines (joined with ", "),
 * else `cookie:` + SHA-256 of the value of the session cookie `sessionCookie` names, else
 * `anonymous` (one key space shared by every request without credentials).
 * @param {Record<string, string|string[]|undefined>} headers lowercase names, one line or
 *   several per name (Node's `req.headersDistinct`, or `req.headers`).
 * @param {string} [sessionCookie] the name of the app's session cookie.
 * @returns {string}
 */
function defaultClient(headers, sessionCookie) {
  const authorization = lines(headers, 'authorization');
  if (authorization.length > 0) return `auth:${digest(authorization.join(', '))}`;
  if (sessionCookie) {
    const value = cookieValue(lines(headers, 'cookie'), sessionCookie);
    if (value !== undefined) return `cookie:${digest(value)}`;
  }
  return 'anonymous';
}

/**
 * The claimd key of a request: `<client or '-'> <key>` (the client percent-encoded), or
 * `sha256:<hex>` of it when longer than claimd allows. Method and path are not part of
 * it: they are in the fingerprint, so the same key on another route is a conflict.
 * @param {string} client the tenant or API user (see defaultClient; '' is written '-').
 * @param {string} key the Idempotency-Key value.
 * @returns {string}
 */
function claimKey(client, key) {
  const claim = `${encodeURIComponent(client || '-')} ${key}`;
  if (Buffer.byteLength(claim, 'utf8') <= MAX_CLAIM_KEY_BYTES) return claim;
  return `sha256:${crypto.createHash('sha256').update(claim).digest('hex')}`;
}

/** Whether a Content-Type is JSON: `application/json` or `*\/*+json`, any parameters. */
function isJsonType(contentType) {
  if (typeof contentType !== 'string') return false;
  const type = contentType.split(';')[0].trim().toLowerCase();
  return type === 'application/json' || /^[a-z0-9!#$&^_.+-]+\/[a-z0-9!#$&^_.+-]+\+json$/.test(type);
}

/** Orders strings by code point (not UTF-16 unit), as Python's sort_keys does. */
function byCodePoint(a, b) {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    if (a.charCodeAt(i) !== b.charCodeAt(i)) return a.codePointAt(i) - b.codePointAt(i);
  }
  return a.length - b.length;
}

const NUMBER = /-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?/y;
const STRING = /"(?:[^"\\\u0000-\u001f]|\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4}))*"/y;
const SPACE = /[ \t\n\r]*/y;

/**
 * The canonical form of a JSON text: object keys sorted by code point, no insignificant
 * whitespace, strings as JSON.stringify writes them, numbers as they were written (so two
 * different numbers never look alike). Null when `text` is not JSON (or nests deeper
 * than 512).
 * @param {string} text
 * @returns {string|null}
 */
function canonicalJson(text) {
  let at = 0;
  const token = (re) => {
    re.lastIndex = at;
    const m = re.exec(text);
    if (!m) return null;
    at = re.lastIndex;
    return m[0];
  };
  const space = () => token(SPACE);
  const value = (depth) => {
    if (depth > MAX_JSON_DEPTH) return null;
    space();
    const c = text[at];
    if (c === '{') {
      at += 1;
      const members = [];
      space();
      if (text[at] === '}') {
        at += 1;
        return '{}';
      }
      for (;;) {
        space();
        const name = token(STRING);
        if (name === null) return null;
        space();
        if (text[at] !== ':') return null;
        at += 1;
        const inner = value(depth + 1);
        if (inner === null) return null;
        members.push([JSON.parse(name), inner]);
        space();
        if (text[at] === ',') at += 1;
        else if (text[at] === '}') break;
        else return null;
      }
      at += 1;
      // Duplicate names: the last one wins, as JSON.parse and json.loads have it.
      const unique = new Map(members);
      const names = [...unique.keys()].sort(byCodePoint);
      return `{${names.map((n) => `${JSON.stringify(n)}:${unique.get(n)}`).join(',')}}`;
    }
    if (c === '[') {
      at += 1;
      const items = [];
      space();
      if (text[at] === ']') {
        at += 1;
        return '[]';
      }
      for (;;) {
        const inner = value(depth + 1);
        if (inner === null) return null;
        items.push(inner);
        space();
        if (text[at] === ',') at += 1;
        else if (text[at] === ']') break;
        else return null;
      }
      at += 1;
      return `[${items.join(',')}]`;
    }
    if (c === '"') {
      const s = token(STRING);
      return s === null ? null : JSON.stringify(JSON.parse(s));
    }
    for (const literal of ['true', 'false', 'null']) {
      if (text.startsWith(literal, at)) {
        at += literal.length;
        return literal;
      }
    }
    return token(NUMBER);
  };
  const result = value(0);
  if (result === null) return null;
  space();
  return at === text.length ? result : null;
}

const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/**
 * The fingerprint of a request: SHA-256 of `METHOD\n`, the path with its query, `\n`, and
 * the body: its canonical JSON when the Content-Type is JSON and it parses (unless
 * `canonical` is false), else its raw bytes.
 * @param {string} method e.g. 'POST'.
 * @param {string} url the path with the query, e.g. '/orders?dry=1'.
 * @param {Buffer} body the raw request body.
 * @param {string|undefined} contentType the request's Content-Type.
 * @param {boolean} [canonical] default true.
 * @returns {Buffer}
 */
function requestFingerprint(method, url, body, contentType, canonical = true) {
  let input = body;
  if (canonical && body.length > 0 && isJsonType(contentType)) {
    let text = null;
    try {
      text = utf8.decode(body);
    } catch {
      text = null; // not UTF-8: the raw bytes
    }
    const json = text === null ? null : canonicalJson(text);
    if (json !== null) input = Buffer.from(json, 'utf8');
  }
  return crypto.createHash('sha256').update(`${method}\n${url}\n`).update(input).digest();
}

module.exports = {
  parseKey,
  defaultClient,
  claimKey,
  isJsonType,
  canonicalJson,
  requestFingerprint,
  KEY_RULE,
  MAX_KEY_CHARS,
};
