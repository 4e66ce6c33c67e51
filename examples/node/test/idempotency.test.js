'use strict';
// The Idempotency-Key middleware through real HTTP and a real claimd: Express apps on port 0
// in this process, fetch as the client. `CLAIMD_ADDR=127.0.0.1:50051 node --test
// test/idempotency.test.js`; with `CLAIMD_ADDRS=a,b` (two replicas on one PostgreSQL
// database) the two apps each talk to their own replica. `cargo test --test it
// polyglot::express` runs it against claimd on its embedded store, on PostgreSQL, and on two
// replicas. Every test uses keys of its own, so the file can run against a shared server.
// The claimd client is the @claimd/client package (clients/node), installed by `npm ci`.

require('./package-current');
const { test, after } = require('node:test');
const assert = require('node:assert/strict');
const crypto = require('node:crypto');
const { once } = require('node:events');
const express = require('express');
const { Claims, ClaimdError, Decision, State, status } = require('@claimd/client');
const {
  idempotency,
  keepRawBody,
  claimKey,
  requestFingerprint,
  decodeResponse,
  REPLAYED,
} = require('../idempotency');

const ADDRS = (process.env.CLAIMD_ADDRS || process.env.CLAIMD_ADDR || '')
  .split(',')
  .map((a) => a.trim())
  .filter(Boolean);
if (ADDRS.length === 0) {
  throw new Error('set CLAIMD_ADDR (one claimd) or CLAIMD_ADDRS (replicas, comma-separated)');
}

const NS = 'node-idempotency';
const ROUTE = '/orders';
/** One client per address; the apps and the direct calls use them in turn. */
const clients = ADDRS.map((addr) => new Claims(addr, { deadlineMs: 10_000 }));
const servers = [];
after(async () => {
  await Promise.all(servers.map(close));
  for (const client of clients) client.close();
});

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
/** A tenant no other test (or earlier run) uses, so its keys are its own. */
const uniqueTenant = (name) => `${name}-${crypto.randomUUID()}`;

/** A promise with its resolve function outside, to hold the handler at a known point. */
function gate() {
  let open;
  const opened = new Promise((resolve) => {
    open = resolve;
  });
  return { opened, open };
}

function close(server) {
  return new Promise((resolve) => {
    server.closeAllConnections();
    server.close(() => resolve());
  });
}

/**
 * Starts an Express app on a free loopback port with `handler` behind the middleware on
 * POST /orders (and POST /optional, where the key is optional), talking to `claims`.
 * The tenant comes from the `X-Tenant` header. Resolves to its base URL.
 */
async function startApp(claims, handler, options = {}) {
  const app = express();
  app.set('env', 'test'); // the default error handler does not print the handler's errors
  const json = express.json({ verify: keepRawBody, limit: '1mb' });
  const clientOf = (req) => req.get('x-tenant');
  const guard = (more) => idempotency({ claims, namespace: NS, clientOf, ...options, ...more });
  app.post(ROUTE, json, guard(), handler);
  app.post('/optional', json, guard({ required: false }), handler);
  const server = app.listen(0, '127.0.0.1');
  await once(server, 'listening');
  servers.push(server);
  return `http://127.0.0.1:${server.address().port}`;
}

/** Two apps, on the replicas in turn (both on the one claimd with CLAIMD_ADDR). */
async function startApps(handler, options) {
  return Promise.all([0, 1].map((i) => startApp(clients[i % clients.length], handler, options)));
}

/** POSTs `body` (JSON) as `tenant` with `Idempotency-Key: "<key>"` (none when key is null). */
async function post(base, tenant, key, body, path = ROUTE) {
  const headers = { 'content-type': 'application/json', 'x-tenant': tenant };
  if (key !== null) headers['idempotency-key'] = `"${key}"`;
  const res = await fetch(base + path, { method: 'POST', headers, body: JSON.stringify(body) });
  return { status: res.status, headers: res.headers, text: await res.text() };
}

/** The receipt the middleware keeps for a POST /orders of `tenant` with `key`. */
function receiptOf(tenant, key) {
  return clients[0].get(NS, claimKey(tenant, 'POST', ROUTE, key));
}

/** Asserts an application/problem+json answer of `code` with `status`. */
function assertProblem(answer, expected, code) {
  assert.equal(answer.status, expected, answer.text);
  assert.match(answer.headers.get('content-type'), /^application\/problem\+json/);
  const problem = JSON.parse(answer.text);
  assert.equal(problem.status, expected);
  assert.equal(problem.code, code);
  assert.equal(typeof problem.title, 'string');
  return problem;
}

test('20 concurrent retries of one POST run the handler once; all get its response', async () => {
  const tenant = uniqueTenant('concurrent');
  let runs = 0;
  const apps = await startApps(async (req, res) => {
    runs += 1;
    await sleep(500);
    res.status(201).set('X-Order', 'ord-1');
    res.json({ order: crypto.randomUUID(), item: req.body.item });
  });
  const key = crypto.randomUUID();
  const answers = await Promise.all(
    Array.from({ length: 20 }, (_, i) => post(apps[i % 2], tenant, key, { item: 'book' })),
  );

  assert.equal(runs, 1, 'the handler ran exactly once');
  const first = answers[0];
  for (const answer of answers) {
    assert.equal(answer.status, 201);
    assert.equal(answer.text, first.text, 'every caller gets the identical body');
    assert.equal(answer.headers.get('x-order'), 'ord-1');
    assert.match(answer.headers.get('content-type'), /^application\/json/);
  }
  const replayed = answers.filter((a) => a.headers.get(REPLAYED) === 'true');
  assert.equal(replayed.length, 19, 'all but the one that ran are marked as replays');
  assert.equal(JSON.parse(first.text).item, 'book');

  const receipt = await receiptOf(tenant, key);
  assert.equal(receipt.state, State.COMPLETED);
  assert.equal(receipt.attempt, 1);
  const stored = decodeResponse(receipt.response);
  assert.equal(stored.status, 201);
  assert.equal(stored.body.toString(), first.text);
  assert.ok(stored.headers.some(([name, value]) => name === 'x-order' && value === 'ord-1'));
  assert.ok(!stored.headers.some(([name]) => name === 'x-powered-by'), "the app's own header");
});

test('a retry after completion gets the stored response replayed at once', async () => {
  const tenant = uniqueTenant('after');
  let runs = 0;
  const apps = await startApps((req, res) => {
    runs += 1;
    res.status(201).json({ order: crypto.randomUUID() });
  });
  const key = crypto.randomUUID();
  const first = await post(apps[0], tenant, key, { item: 'pen' });
  assert.equal(first.status, 201);
  assert.equal(first.headers.get(REPLAYED), null, 'the original is not a replay');

  const startedAt = Date.now();
  const again = await post(apps[1], tenant, key, { item: 'pen' });
  assert.ok(Date.now() - startedAt < 2_000, 'a completed key is answered without waiting');
  assert.equal(again.status, 201);
  assert.equal(again.text, first.text);
  assert.equal(again.headers.get(REPLAYED), 'true');
  assert.equal(runs, 1);
});

test('the same key with a different body is 422 and does not run the handler', async () => {
  const tenant = uniqueTenant('reused');
  let runs = 0;
  const [app] = await startApps((req, res) => {
    runs += 1;
    res.json({ ok: true });
  });
  const key = crypto.randomUUID();
  assert.equal((await post(app, tenant, key, { amount: 10 })).status, 200);
  const other = await post(app, tenant, key, { amount: 11 });
  assertProblem(other, 422, 'idempotency-key-reused');
  assert.equal(runs, 1);
  // Another tenant's request under the same key is a request of its own.
  assert.equal((await post(app, uniqueTenant('other'), key, { amount: 11 })).status, 200);
  assert.equal(runs, 2);
});

test('a missing key is 400 where one is required and passes through where it is not', async () => {
  const tenant = uniqueTenant('missing');
  let runs = 0;
  const [app] = await startApps((req, res) => {
    runs += 1;
    res.json({ ok: true });
  });
  const missing = await post(app, tenant, null, { item: 'cup' });
  assertProblem(missing, 400, 'idempotency-key-missing');
  const malformed = await fetch(app + ROUTE, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'idempotency-key': '"unterminated' },
    body: '{}',
  });
  assert.equal(malformed.status, 400);
  assert.equal((await malformed.json()).code, 'idempotency-key-invalid');
  assert.equal(runs, 0);

  const optional = await post(app, tenant, null, { item: 'cup' }, '/optional');
  assert.equal(optional.status, 200);
  assert.equal(runs, 1);
});

test('a body no parser kept the raw bytes of is refused with an error naming the fix', async () => {
  const app = express();
  app.set('env', 'test');
  let runs = 0;
  const guard = idempotency({ claims: clients[0], namespace: NS });
  app.post(ROUTE, express.json(), guard, (req, res) => {
    runs += 1;
    res.json({ ok: true });
  });
  const server = app.listen(0, '127.0.0.1');
  await once(server, 'listening');
  servers.push(server);
  const answer = await post(`http://127.0.0.1:${server.address().port}`, 'raw', 'k-1', { a: 1 });
  assert.equal(answer.status, 500);
  assert.match(answer.text, /keepRawBody/);
  assert.equal(runs, 0);
});

test('a retry while the first still runs after the wait is 409 with Retry-After', async () => {
  const tenant = uniqueTenant('running');
  const inside = gate();
  const release = gate();
  let runs = 0;
  const apps = await startApps(
    async (req, res) => {
      runs += 1;
      inside.open();
      await release.opened;
      res.status(201).json({ done: true });
    },
    { waitMs: 300 },
  );
  const key = crypto.randomUUID();
  const first = post(apps[0], tenant, key, { item: 'lamp' });
  await inside.opened;
  try {
    const startedAt = Date.now();
    const busy = await post(apps[1], tenant, key, { item: 'lamp' });
    assert.ok(Date.now() - startedAt >= 250, 'the retry waited before giving up');
    assertProblem(busy, 409, 'idempotency-request-in-progress');
    assert.match(busy.headers.get('retry-after'), /^[1-9][0-9]*$/);
  } finally {
    release.open();
  }
  assert.equal((await first).status, 201);
  const later = await post(apps[1], tenant, key, { item: 'lamp' });
  assert.equal(later.status, 201);
  assert.equal(later.headers.get(REPLAYED), 'true');
  assert.equal(runs, 1);
});

test('a handler that throws answers 5xx and a later retry runs it again', async () => {
  const tenant = uniqueTenant('throws');
  let runs = 0;
  const [app] = await startApps(async (req, res) => {
    runs += 1;
    if (runs === 1) throw new Error('the database is down');
    res.status(201).json({ run: runs });
  });
  const key = crypto.randomUUID();
  const failed = await post(app, tenant, key, { item: 'desk' });
  assert.ok(failed.status >= 500 && failed.status < 600, `a 5xx, got ${failed.status}`);
  assert.equal(failed.headers.get(REPLAYED), null);
  const receipt = await receiptOf(tenant, key);
  assert.equal(receipt.state, State.RETRY_WAIT);
  assert.match(receipt.last_error, /500/);

  // At once: the middleware waits for the retry to come due (about a second), then runs it.
  const retried = await post(app, tenant, key, { item: 'desk' });
  assert.equal(retried.status, 201, retried.text);
  assert.deepEqual(JSON.parse(retried.text), { run: 2 });
  assert.equal(retried.headers.get(REPLAYED), null, 'the retry ran the handler');
  const replay = await post(app, tenant, key, { item: 'desk' });
  assert.equal(replay.text, retried.text);
  assert.equal(replay.headers.get(REPLAYED), 'true');
  assert.equal(runs, 2);
});

test('a handler that calls next(err) answers 5xx and a later retry runs it again', async () => {
  const tenant = uniqueTenant('next-err');
  let runs = 0;
  const [app] = await startApps((req, res, next) => {
    runs += 1;
    if (runs === 1) return next(Object.assign(new Error('upstream timed out'), { status: 503 }));
    return res.json({ run: runs });
  });
  const key = crypto.randomUUID();
  assert.equal((await post(app, tenant, key, {})).status, 503);
  const retried = await post(app, tenant, key, {});
  assert.equal(retried.status, 200);
  assert.deepEqual(JSON.parse(retried.text), { run: 2 });
  assert.equal(runs, 2);
});

test('a response too large to store is 500 and the key can be retried', async () => {
  const tenant = uniqueTenant('large');
  let runs = 0;
  const [app] = await startApps((req, res) => {
    runs += 1;
    res.set('X-Order', 'big');
    if (runs === 1) return res.type('text/plain').send('x'.repeat(70 * 1024));
    return res.json({ run: runs });
  });
  const key = crypto.randomUUID();
  const large = await post(app, tenant, key, { item: 'atlas' });
  const problem = assertProblem(large, 500, 'idempotency-response-too-large');
  assert.match(problem.detail, /too large|more than the 65536 bytes/);
  assert.match(problem.title, /too large to store for replay/);
  assert.equal(large.headers.get('x-order'), null, "the handler's headers are not sent");
  assert.equal((await receiptOf(tenant, key)).state, State.RETRY_WAIT);

  const retried = await post(app, tenant, key, { item: 'atlas' });
  assert.equal(retried.status, 200, retried.text);
  assert.deepEqual(JSON.parse(retried.text), { run: 2 });
  assert.equal(runs, 2);
});

test('a waiter whose holder died takes over at the lease end and runs the handler', async () => {
  const tenant = uniqueTenant('takeover');
  const key = crypto.randomUUID();
  const body = JSON.stringify({ item: 'chair' });
  // The "dead" holder: a claim of the same request with a 1 s lease, never settled.
  const holder = clients[0];
  const dead = await holder.claim(
    NS,
    claimKey(tenant, 'POST', ROUTE, key),
    requestFingerprint('POST', ROUTE, Buffer.from(body)),
    { leaseMs: 1_000 },
  );
  assert.equal(dead.decision, Decision.CLAIMED);

  let runs = 0;
  let attempt = null;
  const apps = await startApps((req, res) => {
    runs += 1;
    attempt = req.idempotency.attempt;
    res.status(201).json({ taken: true });
  });
  const startedAt = Date.now();
  const answer = await post(apps[apps.length - 1], tenant, key, { item: 'chair' });
  assert.equal(answer.status, 201, answer.text);
  assert.equal(answer.headers.get(REPLAYED), null);
  assert.ok(Date.now() - startedAt >= 500, 'it waited for the lease to run out');
  assert.equal(runs, 1);
  assert.equal(attempt, 2, 'a takeover is the second attempt');

  const receipt = await receiptOf(tenant, key);
  assert.equal(receipt.state, State.COMPLETED);
  assert.equal(receipt.attempt, 2);
  // The dead holder's token is no longer current.
  await assert.rejects(
    holder.complete(NS, receipt.key, dead.claim_token, 'late'),
    (error) => error instanceof ClaimdError && error.code === status.ABORTED,
  );
});
