'use strict';
// @claimd/client/express mounted the way Express users mount middleware: app.use after
// express.json() (no `verify`), router.use in nested routers, `paths` to limit it; under
// the same rules as on a route (one run per key, 5xx stored, 422, 400, 503, a handler that
// failed gives the key back). Real HTTP and a real claimd, as test/express.test.js (which
// says how to run the express suites). Callers are told apart by their Authorization
// header (the default scope).

const { test } = require('node:test');
const assert = require('node:assert/strict');
const crypto = require('node:crypto');
const express = require('express');
const { State } = require('@claimd/client');
const { idempotency, decodeResponse, REPLAYED } = require('@claimd/client/express');
const {
  NS, clients, gate, serve, startAppWide, startAppsWide, bearer, post, receiptOf, assertProblem,
  downClaims,
} = require('./express-support.js');

class LedgerDown extends Error {}

/** POSTs as `who` (bearer()), with no X-Tenant. */
const postAs = (base, who, key, body, options = {}) =>
  post(base, null, key, body, { ...options, headers: { ...who.headers, ...options.headers } });

test('with app.use, 20 concurrent requests with one key run the handler once; all get its answer', async () => {
  const who = bearer();
  const inside = gate();
  let runs = 0;
  const apps = await startAppsWide((app) => {
    app.post('/orders', async (req, res) => {
      runs += 1;
      inside.open();
      await new Promise((resolve) => setTimeout(resolve, 300));
      res.status(201).set('X-Order', 'ord-1').json({ order: crypto.randomUUID(), item: req.body.item });
    });
  });
  const key = crypto.randomUUID();
  const answers = await Promise.all(
    Array.from({ length: 20 }, (_, i) => postAs(apps[i % 2], who, key, { item: 'book' }, { path: '/orders' })),
  );
  assert.equal(runs, 1, 'the handler ran exactly once');
  for (const answer of answers) {
    assert.equal(answer.status, 201, answer.text);
    assert.equal(answer.text, answers[0].text, 'every caller gets the identical body');
    assert.equal(answer.headers.get('x-order'), 'ord-1');
  }
  assert.equal(answers.filter((a) => a.headers.get(REPLAYED) === 'true').length, 19);
  const receipt = await receiptOf(who.client, key);
  assert.equal(receipt.state, State.COMPLETED);
  assert.equal(decodeResponse(receipt.response).body.toString(), answers[0].text);
});

test('with app.use, a 5xx the handler answered is stored and replayed; it never runs again', async () => {
  const who = bearer();
  let runs = 0;
  const [app] = await startAppsWide((a) => {
    a.post('/orders', (req, res) => {
      runs += 1;
      res.status(502).json({ error: 'the bank said no', run: runs });
    });
  });
  const key = crypto.randomUUID();
  const first = await postAs(app, who, key, { amount: 3 }, { path: '/orders' });
  assert.equal(first.status, 502);
  const again = await postAs(app, who, key, { amount: 3 }, { path: '/orders' });
  assert.equal(again.status, 502);
  assert.equal(again.text, first.text);
  assert.equal(again.headers.get(REPLAYED), 'true');
  assert.equal(runs, 1);
});

test('with app.use after express.json() without verify, the parsed body is the fingerprint: ' +
  'the same JSON replays (1.0 and 1 alike), another body or route is 422, no key is 400', async () => {
  const who = bearer();
  let runs = 0;
  const [app] = await startAppsWide((a) => {
    const handler = (req, res) => {
      runs += 1;
      res.status(201).json({ run: runs, amount: req.body.amount });
    };
    a.post('/orders', handler);
    a.post('/payments', handler);
  });
  const key = crypto.randomUUID();
  const send = (body, path = '/orders', k = key) => postAs(app, who, k, body, { path });
  const first = await send('{ "amount": 1.0, "currency": "EUR" }');
  assert.equal(first.status, 201, first.text);
  for (const same of ['{"currency":"EUR","amount":1}', '{"amount":1.0,"currency":"EUR"}']) {
    const replay = await send(same);
    assert.equal(replay.headers.get(REPLAYED), 'true', same);
    assert.equal(replay.text, first.text);
  }
  assertProblem(await send('{"amount":2,"currency":"EUR"}'), 422, 'idempotency-key-reused');
  assertProblem(await send('{"amount":1,"currency":"EUR"}', '/payments'), 422, 'idempotency-key-reused');
  assertProblem(await send('{"amount":1}', '/orders', null), 400, 'idempotency-key-missing');
  assert.equal(runs, 1);
});

test('with app.use, a handler that throws, rejects or calls next(err) gives the key back; ' +
  "Express's error handler answers, and a retry runs the handler", async () => {
  const who = bearer();
  const runs = { throws: 0, rejects: 0, next: 0 };
  const [app] = await startAppsWide((a) => {
    a.post('/throws', (req, res) => {
      runs.throws += 1;
      if (runs.throws === 1) throw new LedgerDown('password=hunter2');
      res.status(201).json({ run: runs.throws });
    });
    a.post('/rejects', async (req, res) => {
      runs.rejects += 1;
      if (runs.rejects === 1) throw new LedgerDown('password=hunter2');
      res.status(201).json({ run: runs.rejects });
    });
    a.post('/next', (req, res, next) => {
      runs.next += 1;
      if (runs.next === 1) return next(Object.assign(new LedgerDown('timed out'), { status: 503 }));
      return res.status(201).json({ run: runs.next });
    });
  });
  for (const [route, status] of [['/throws', 500], ['/rejects', 500], ['/next', 503]]) {
    const key = crypto.randomUUID();
    const failed = await postAs(app, who, key, { item: 'desk' }, { path: route });
    assert.equal(failed.status, status, route);
    assert.deepEqual(JSON.parse(failed.text), { error: 'LedgerDown' }, "the app's error handler answered");
    const receipt = await receiptOf(who.client, key);
    assert.equal(receipt.state, State.RETRY_WAIT, route);
    assert.equal(receipt.last_error, 'LedgerDown');
    const retried = await postAs(app, who, key, { item: 'desk' }, { path: route });
    assert.equal(retried.status, 201, retried.text);
    assert.deepEqual(JSON.parse(retried.text), { run: 2 });
    assert.equal(retried.headers.get(REPLAYED), null, 'the retry ran the handler');
  }
});

test('with app.use, claimd down is 503 with Retry-After and no handler runs', async () => {
  const down = await downClaims();
  try {
    let runs = 0;
    const app = await startAppWide(down, (a) => {
      a.post('/orders', (req, res) => {
        runs += 1;
        res.json({ ok: true });
      });
    });
    const answer = await postAs(app, bearer(), crypto.randomUUID(), { item: 'vase' }, { path: '/orders' });
    assertProblem(answer, 503, 'idempotency-store-unavailable');
    assert.equal(answer.headers.get('retry-after'), '1');
    assert.equal(runs, 0);
  } finally {
    down.close();
  }
});

test('with router.use in nested express.Router()s, a failed handler gives the key back, an answer is ' +
  'replayed, and routes outside the router are not covered', async () => {
  const who = bearer();
  let runs = 0;
  const app = express();
  app.set('env', 'test');
  app.use(express.json());
  const api = express.Router();
  const v2 = express.Router();
  api.use(idempotency({ claims: clients[0], namespace: NS }));
  v2.post('/orders', (req, res) => {
    runs += 1;
    if (runs === 1) throw new LedgerDown('down');
    res.status(201).json({ run: runs });
  });
  api.use('/v2', v2);
  app.use('/api', api);
  app.post('/health', (req, res) => res.json({ ok: true }));
  // eslint-disable-next-line no-unused-vars
  app.use((error, req, res, next) => res.status(500).json({ error: error.constructor.name }));
  const base = await serve(app);

  const key = crypto.randomUUID();
  const failed = await postAs(base, who, key, {}, { path: '/api/v2/orders' });
  assert.deepEqual([failed.status, JSON.parse(failed.text)], [500, { error: 'LedgerDown' }]);
  assert.equal((await receiptOf(who.client, key)).state, State.RETRY_WAIT);
  const retried = await postAs(base, who, key, {}, { path: '/api/v2/orders' });
  assert.deepEqual([retried.status, JSON.parse(retried.text)], [201, { run: 2 }]);
  const replay = await postAs(base, who, key, {}, { path: '/api/v2/orders' });
  assert.equal(replay.headers.get(REPLAYED), 'true');
  assert.equal(runs, 2);
  assert.equal((await postAs(base, who, null, {}, { path: '/health' })).status, 200);
});

test('with app.use, a route added after the first request is watched too', async () => {
  const who = bearer();
  let app;
  const base = await startAppWide(clients[0], (a) => {
    app = a;
    a.post('/first', (req, res) => res.json({ first: true }));
  });
  assert.equal((await postAs(base, who, crypto.randomUUID(), {}, { path: '/first' })).status, 200);
  // Express 4 and 5 add to the stack in place; the error handler stays before it, so the
  // late route gets its own.
  app.post('/late', () => {
    throw new LedgerDown('late');
  });
  // eslint-disable-next-line no-unused-vars
  app.use((error, req, res, next) => res.status(500).json({ late: error.constructor.name }));
  const key = crypto.randomUUID();
  const failed = await postAs(base, who, key, {}, { path: '/late' });
  assert.deepEqual([failed.status, JSON.parse(failed.text)], [500, { late: 'LedgerDown' }]);
  assert.equal((await receiptOf(who.client, key)).state, State.RETRY_WAIT);
});

test("with app.use, an error from an app.param callback gives the key back before the error handler answers", async () => {
  const who = bearer();
  let runs = 0;
  const base = await startAppWide(clients[0], (a) => {
    a.param('id', (req, res, next, id) => next(id === 'gone' ? Object.assign(new LedgerDown(), { status: 404 }) : undefined));
    a.post('/items/:id', (req, res) => {
      runs += 1;
      res.status(201).json({ id: req.params.id });
    });
  });
  const key = crypto.randomUUID();
  const gone = await postAs(base, who, key, {}, { path: '/items/gone' });
  assert.deepEqual([gone.status, JSON.parse(gone.text)], [404, { error: 'LedgerDown' }]);
  assert.equal((await receiptOf(who.client, key)).state, State.RETRY_WAIT);
  assert.equal(runs, 0);
});

test("with app.use, a request no route answers gets Express's 404, stored and replayed like any answer", async () => {
  const who = bearer();
  const base = await startAppWide(clients[0], () => {});
  const key = crypto.randomUUID();
  const first = await postAs(base, who, key, { item: 'x' }, { path: '/nowhere' });
  assert.equal(first.status, 404);
  const again = await postAs(base, who, key, { item: 'x' }, { path: '/nowhere' });
  assert.equal(again.status, 404);
  assert.equal(again.headers.get(REPLAYED), 'true');
  assert.equal((await receiptOf(who.client, key)).state, State.COMPLETED);
});

test('paths limits app-wide mounting to its prefixes; other requests need no key', async () => {
  const who = bearer();
  const base = await startAppWide(clients[0], (a) => {
    a.post('/login', (req, res) => res.json({ login: true }));
    a.post('/orders/new', (req, res) => res.status(201).json({ order: true }));
  }, { paths: ['/orders'] });
  assert.equal((await postAs(base, who, null, {}, { path: '/login' })).status, 200);
  assertProblem(await postAs(base, who, null, {}, { path: '/orders/new' }), 400, 'idempotency-key-missing');
  const key = crypto.randomUUID();
  assert.equal((await postAs(base, who, key, {}, { path: '/orders/new' })).status, 201);
  assert.equal((await postAs(base, who, key, {}, { path: '/orders/new' })).headers.get(REPLAYED), 'true');
});
