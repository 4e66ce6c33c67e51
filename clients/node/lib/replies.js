'use strict';
// The answers the Express Idempotency-Key middleware sends itself: problems (RFC 9457,
// `sendProblem`), replays of a stored response (`sendReplay`: marked
// `Idempotent-Replayed: true`, never with cookies or hop-by-hop headers) and the
// `Retry-After` of a receipt's timestamp (`secondsUntil`). Used by `express.js`.

const { timestampMs } = require('../index.js');
const { keptHeader, connectionNamed, REPLAYED } = require('./stored-response.js');

/** Headers of a response whose body was not stored that do not fit the problem body. */
const BODY_HEADERS = new Set(['content-type', 'content-length', 'content-encoding']);

/** A problem (RFC 9457) sent as application/problem+json. */
function sendProblem(res, docsUrl, status, code, title, detail, headers = {}) {
  const body = { type: 'about:blank', title, status, detail, code };
  if (docsUrl) {
    body.type = `${docsUrl}#${code}`;
    res.setHeader('Link', `<${docsUrl}>; rel="describedby"; type="text/html"`);
  }
  for (const [name, value] of Object.entries(headers)) res.setHeader(name, value);
  res.statusCode = status;
  res.setHeader('Content-Type', 'application/problem+json');
  res.end(JSON.stringify(body));
}

/** Replays a stored response, marked as a replay (never its cookies or hop-by-hop headers). */
function sendReplay(res, record, docsUrl) {
  const notStored = record.body === null;
  const values = new Map();
  const named = connectionNamed(record.headers.filter(([n]) => n === 'connection').map(([, v]) => v));
  for (const [name, value] of record.headers) {
    if (notStored && BODY_HEADERS.has(name)) continue;
    if (!keptHeader(name, named)) continue;
    if (!values.has(name)) values.set(name, []);
    values.get(name).push(value);
  }
  for (const [name, list] of values) res.setHeader(name, list.length === 1 ? list[0] : list);
  res.setHeader(REPLAYED, 'true');
  if (!notStored) {
    res.statusCode = record.status;
    return res.end(record.body);
  }
  return sendProblem(res, docsUrl, record.status, 'idempotency-response-not-stored',
    'Response not stored',
    `This request was handled; its response body (${record.bytes} bytes) was too large to ` +
      'keep, so only its status and headers are replayed.');
}

/** Whole seconds (at least 1) until a timestamp. */
function secondsUntil(ts) {
  const at = timestampMs(ts);
  return String(Math.max(1, Math.ceil(((at ?? 0) - Date.now()) / 1000)));
}

module.exports = { sendProblem, sendReplay, secondsUntil };
