'use strict';
// @claimd/client/express mounted on routes, through real HTTP and a real claimd: the stored
// format, one run per key, 422 for another request under a key, the key's syntax, 409
// while running, and handlers that throw, call next(err) or answer 5xx. Express apps on
// port 0 in this process, fetch as the client. The express suites are the files
// test/express*.test.js (test/express-support.js holds what they share):
// `CLAIMD_ADDR=127.0.0.1:50051 node --test test/express*.test.js`; with `CLAIMD_ADDRS=a,b`
// (two replicas on one PostgreSQL database) the two apps of a test each talk to their own
// replica. `cargo test --test it polyglot::express` installs the packed tarball (and
// express) into an empty directory, copies these files next to it and runs them against
// claimd on its embedded store, on PostgreSQL and on two replicas. Every test uses a
// tenant or credentials of its own, so the files can run against a shared server.

const { test } = require('node:test');
const assert = require('node:assert/strict');
const crypto = require('node:crypto');
const express = require('express');
const { State } = require('@claimd/client');
const { idempotency, encodeResponse, decodeResponse, REPLAYED } = require('@claimd/client/express');
const {
  NS, ROUTE, JSON_TYPE, clients, uniqueTenant, gate, serve, startApps, post, receiptOf, assertProblem,
} = require('./express-support.js');

// A response as the Python package's middleware stores it (clients/python's tests hold the
// same bytes): either package replays what the other stored.
const PYTHON_STORED = Buffer.from(
  '49444b3200c90000020c636f6e74656e742d7479706500106170706c69636174696f6e2f6a736f6e07782d6f726465720001377b226964223a377d',
  'hex',
);
const PYTHON_NOT_STORED = Buffer.from('49444b3200c901000107782d6f726465720001370000000000011170', 'hex');

test('stored responses are the bytes the Python middleware stores', () => {
  const headers = [['content-type', 'application/json'], ['x-order', '7']];
  const body = Buffer.from('{"id":7}');
  assert.deepEqual(encodeResponse({ status: 201, headers, body }), PYTHON_STORED);
  assert.deepEqual(decodeResponse(PYTHON_STORED), { status: 201, headers, body, bytes: 8 });
  const notStored = encodeResponse({ status: 201, headers: [['x-order', '7']], body: null, bytes: 70_000 });
  assert.deepEqual(notStored, PYTHON_NOT_STORED);
  assert.deepEqual(decodeResponse(PYTHON_NOT_STORED), {
    status: 201, headers: [['x-order', '7']], body: null, bytes: 70_000,
  });
});

test('20 concurrent retries of one POST run the handler once; all get its response', async () => {
  const tenant = uniqueTenant('concurrent');
  const inside = gate();
  let runs = 0;
  const apps = await startApps(async (req, res) => {
    runs += 1;
    inside.open();
    await new Promise((resolve) => setTimeout(resolve, 300));
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
  assert.equal(answers.filter((a) => a.headers.get(REPLAYED) === 'true').length, 19);
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

test('another body or another route with the same key is 422; canonical JSON is not', async () => {
  const tenant = uniqueTenant('reused');
  let runs = 0;
  const [app] = await startApps((req, res) => {
    runs += 1;
    res.status(201).json({ run: runs });
  });
  const key = crypto.randomUUID();
  const first = await post(app, tenant, key, '{ "amount": 5, "currency": "EUR" }');
  assert.equal(first.status, 201);
  const same = await post(app, tenant, key, '{"currency":"EUR","amount":5}');
  assert.equal(same.status, 201, 'the same JSON, other whitespace and key order');
  assert.equal(same.headers.get(REPLAYED), 'true');
  assert.equal(same.text, first.text);

  const reused = await post(app, tenant, key, { amount: 6, currency: 'EUR' });
  assertProblem(reused, 422, 'idempotency-key-reused');
  assert.ok(!reused.text.includes(key) && !reused.text.includes('EUR'), 'no key, no body');
  const payments = await post(app, tenant, key, '{"amount":5,"currency":"EUR"}', { path: '/payments' });
  assertProblem(payments, 422, 'idempotency-key-reused');
  assert.equal(runs, 1);
  // Another tenant's request under the same key is a request of its own.
  assert.equal((await post(app, uniqueTenant('other'), key, { amount: 6 })).status, 201);
  assert.equal(runs, 2);
});

test('canonicalJson: false fingerprints the raw bytes', async () => {
  const tenant = uniqueTenant('raw-json');
  const [app] = await startApps((req, res) => res.json({ ok: true }), { canonicalJson: false });
  const key = crypto.randomUUID();
  assert.equal((await post(app, tenant, key, '{ "amount": 5 }')).status, 200);
  assertProblem(await post(app, tenant, key, '{"amount":5}'), 422, 'idempotency-key-reused');
});

test('bare and quoted keys are accepted; a missing key is 400, a malformed one 400', async () => {
  const tenant = uniqueTenant('keys');
  let runs = 0;
  const [app] = await startApps((req, res) => {
    runs += 1;
    res.json({ key: req.idempotency?.key, run: runs });
  });
  for (const bare of ['dGVzdA==', 'order@123']) {
    const answer = await post(app, tenant, bare, { item: 'cup' }, { raw: true });
    assert.equal(answer.status, 200, answer.text);
    assert.equal(JSON.parse(answer.text).key, bare);
    const quoted = await post(app, tenant, bare, { item: 'cup' });
    assert.equal(quoted.headers.get(REPLAYED), 'true', 'the quoted form is the same key');
  }
  const escaped = await post(app, tenant, String.raw`"a \"b\" \\c"`, { item: 'cup' }, { raw: true });
  assert.equal(JSON.parse(escaped.text).key, 'a "b" \\c');
  assert.equal(runs, 3);

  assertProblem(await post(app, tenant, null, { item: 'cup' }), 400, 'idempotency-key-missing');
  for (const malformed of ['"unterminated', '"a"b', 'x'.repeat(256), '""', 'caf\u00e9']) {
    const headers = { 'content-type': JSON_TYPE, 'idempotency-key': malformed };
    const res = await fetch(app + ROUTE, { method: 'POST', headers, body: '{}' });
    const answer = { status: res.status, headers: res.headers, text: await res.text() };
    const problem = assertProblem(answer, 400, 'idempotency-key-invalid');
    assert.equal(problem.detail,
      'Idempotency-Key must be 1–255 printable ASCII characters, or a quoted string of them');
  }
  assert.equal(runs, 3);
  assert.equal((await post(app, tenant, null, { item: 'cup' }, { path: '/optional' })).status, 200);
  assert.equal(runs, 4);
});

test('a body no parser read, or the middleware called by hand, is an error naming the fix', async () => {
  const app = express();
  app.set('env', 'test');
  let runs = 0;
  const guard = () => idempotency({ claims: clients[0], namespace: NS, clientOf: (req) => req.get('x-tenant') });
  const byHand = guard();
  const handler = (req, res) => {
    runs += 1;
    res.json({ ok: true });
  };
  app.post(ROUTE, guard(), handler); // no body parser before it
  app.post('/by-hand', express.json(), (req, res, next) => byHand(req, res, next), handler);
  const base = await serve(app);
  const answer = await post(base, uniqueTenant('raw'), 'k-1', { a: 1 });
  assert.equal(answer.status, 500);
  assert.match(answer.text, /mount express\.json\(\)/);
  const called = await post(base, uniqueTenant('by-hand'), 'k-1', { a: 1 }, { path: '/by-hand' });
  assert.equal(called.status, 500);
  assert.match(called.text, /app\.use\(idempotency\(options\)\)/);
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
    const busy = await post(apps[1], tenant, key, { item: 'lamp' });
    assertProblem(busy, 409, 'idempotency-request-in-progress');
    assert.match(busy.headers.get('retry-after'), /^[1-9][0-9]*$/);
    assert.ok(!busy.text.includes(key), 'no problem body carries the key');
  } finally {
    release.open();
  }
  assert.equal((await first).status, 201);
  const later = await post(apps[1], tenant, key, { item: 'lamp' });
  assert.equal(later.status, 201);
  assert.equal(later.headers.get(REPLAYED), 'true');
  assert.equal(runs, 1);
});

class LedgerDown extends Error {}

test('a handler that throws gives the key back (its class name only); a retry runs it', async () => {
  const tenant = uniqueTenant('throws');
  let runs = 0;
  const [app] = await startApps(async (req, res) => {
    runs += 1;
    if (runs === 1) throw new LedgerDown('password=hunter2 in the connection string');
    res.status(201).json({ run: runs });
  });
  const key = crypto.randomUUID();
  const failed = await post(app, tenant, key, { item: 'desk' });
  assert.equal(failed.status, 500, "Express's error handler answered");
  assert.equal(failed.headers.get(REPLAYED), null);
  const receipt = await receiptOf(tenant, key);
  assert.equal(receipt.state, State.RETRY_WAIT);
  assert.equal(receipt.last_error, 'LedgerDown', 'the class name, never the message');

  // At once: the middleware waits for the retry to come due, then runs the handler.
  const retried = await post(app, tenant, key, { item: 'desk' });
  assert.equal(retried.status, 201, retried.text);
  assert.deepEqual(JSON.parse(retried.text), { run: 2 });
  assert.equal(retried.headers.get(REPLAYED), null, 'the retry ran the handler');
  const replay = await post(app, tenant, key, { item: 'desk' });
  assert.equal(replay.text, retried.text);
  assert.equal(replay.headers.get(REPLAYED), 'true');
  assert.equal(runs, 2);
});

test('a retry before a failed attempt is due again is 503 with Retry-After', async () => {
  const tenant = uniqueTenant('scheduled');
  let runs = 0;
  const [app] = await startApps(async () => {
    runs += 1;
    throw new LedgerDown('down');
  }, { waitMs: 0, retryAfterMs: 30_000 });
  const key = crypto.randomUUID();
  assert.equal((await post(app, tenant, key, {})).status, 500);
  const early = await post(app, tenant, key, {});
  const problem = assertProblem(early, 503, 'idempotency-retry-scheduled');
  assert.match(early.headers.get('retry-after'), /^[1-9][0-9]*$/);
  assert.ok(!early.text.includes(key) && !JSON.stringify(problem).includes(tenant));
  assert.equal(runs, 1);
});

test('a handler that calls next(err) gives the key back; a retry runs it', async () => {
  const tenant = uniqueTenant('next-err');
  let runs = 0;
  const [app] = await startApps((req, res, next) => {
    runs += 1;
    if (runs === 1) return next(Object.assign(new Error('upstream timed out'), { status: 503 }));
    return res.json({ run: runs });
  });
  const key = crypto.randomUUID();
  assert.equal((await post(app, tenant, key, {})).status, 503);
  assert.equal((await receiptOf(tenant, key)).last_error, 'Error');
  const retried = await post(app, tenant, key, {});
  assert.equal(retried.status, 200);
  assert.deepEqual(JSON.parse(retried.text), { run: 2 });
  assert.equal(runs, 2);
});

test('a 5xx the handler answered is stored and replayed; it never runs again', async () => {
  const tenant = uniqueTenant('server-error');
  let runs = 0;
  const [app] = await startApps((req, res) => {
    runs += 1;
    res.status(502).set('X-Upstream', 'bank').json({ error: 'the bank said no', run: runs });
  });
  const key = crypto.randomUUID();
  const first = await post(app, tenant, key, { amount: 3 });
  assert.equal(first.status, 502);
  for (let i = 0; i < 3; i++) {
    const again = await post(app, tenant, key, { amount: 3 });
    assert.equal(again.status, 502);
    assert.equal(again.text, first.text);
    assert.equal(again.headers.get('x-upstream'), 'bank');
    assert.equal(again.headers.get(REPLAYED), 'true');
  }
  assert.equal(runs, 1);
  assert.equal((await receiptOf(tenant, key)).state, State.COMPLETED);
});

test('retryServerErrors: a 5xx gives the key back and a later retry runs the handler', async () => {
  const tenant = uniqueTenant('retry-5xx');
  let runs = 0;
  const [app] = await startApps((req, res) => {
    runs += 1;
    if (runs === 1) return res.status(503).json({ busy: true });
    return res.status(201).json({ run: runs });
  }, { retryServerErrors: true });
  const key = crypto.randomUUID();
  const first = await post(app, tenant, key, {});
  assert.equal(first.status, 503);
  assert.deepEqual(JSON.parse(first.text), { busy: true }, 'the client gets the 5xx itself');
  assert.equal((await receiptOf(tenant, key)).state, State.RETRY_WAIT);
  const retried = await post(app, tenant, key, {});
  assert.equal(retried.status, 201, retried.text);
  assert.equal(runs, 2);
});
