'use strict';
// @claimd/client/express mounted on routes, when things go wrong around the handler: a
// response too large to store, a holder that died (a claim never settled, and an app in a
// child process killed mid-request), and claimd down. Real HTTP and a real claimd, as
// test/express.test.js (which says how to run the express suites).

const { test } = require('node:test');
const assert = require('node:assert/strict');
const crypto = require('node:crypto');
const path = require('node:path');
const { spawn } = require('node:child_process');
const { once } = require('node:events');
const { ClaimdError, Decision, State, status } = require('@claimd/client');
const { claimKey, requestFingerprint, decodeResponse, REPLAYED } = require('@claimd/client/express');
const {
  ADDRS, NS, ROUTE, JSON_TYPE, clients, uniqueTenant, startApp, startApps, post, receiptOf,
  assertProblem, downClaims,
} = require('./express-support.js');

for (const [name, limit, size] of [
  ['the default limit', undefined, 70 * 1024],
  ['a per-route limit', 1024, 2000],
]) {
  test(`a response too large to store (${name}) settles the key; retries get its status`, async () => {
    const tenant = uniqueTenant('large');
    let runs = 0;
    const [app] = await startApps((req, res) => {
      runs += 1;
      res.status(201).set('X-Order', 'big');
      return res.type('text/plain').send('x'.repeat(size));
    }, limit === undefined ? {} : { maxResponseBytes: limit });
    const key = crypto.randomUUID();
    const first = await post(app, tenant, key, { item: 'atlas' });
    assert.equal(first.status, 201);
    assert.equal(first.text.length, size, 'the first caller gets the whole response');
    assert.equal(first.headers.get(REPLAYED), null);

    for (let i = 0; i < 3; i++) {
      const again = await post(app, tenant, key, { item: 'atlas' });
      const problem = assertProblem(again, 201, 'idempotency-response-not-stored');
      assert.match(problem.detail, new RegExp(`handled.*\\(${size} bytes\\) was too large`));
      assert.equal(again.headers.get('x-order'), 'big', 'the stored headers');
      assert.equal(again.headers.get(REPLAYED), 'true');
    }
    assert.equal(runs, 1);
    const receipt = await receiptOf(tenant, key);
    assert.equal(receipt.state, State.COMPLETED);
    const stored = decodeResponse(receipt.response);
    assert.equal(stored.body, null);
    assert.equal(stored.bytes, size);
  });
}

test('a waiter whose holder died takes over at the lease end and runs the handler', async () => {
  const tenant = uniqueTenant('takeover');
  const key = crypto.randomUUID();
  const body = JSON.stringify({ item: 'chair' });
  // The "dead" holder: a claim of the same request with a 1 s lease, never settled.
  const holder = clients[0];
  const dead = await holder.claim(
    NS,
    claimKey(tenant, key),
    requestFingerprint('POST', ROUTE, Buffer.from(body), JSON_TYPE),
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
  const answer = await post(apps[apps.length - 1], tenant, key, { item: 'chair' });
  assert.equal(answer.status, 201, answer.text);
  assert.equal(answer.headers.get(REPLAYED), null);
  assert.equal(runs, 1);
  assert.equal(attempt, 2, 'a takeover is the second attempt');
  const receipt = await receiptOf(tenant, key);
  assert.equal(receipt.state, State.COMPLETED);
  await assert.rejects(
    holder.complete(NS, receipt.key, dead.claim_token, 'late'),
    (error) => error instanceof ClaimdError && error.code === status.ABORTED,
  );
});

/** An app in a child process whose handler never answers; killed by the test. */
const CHILD = `
const express = require('express');
const { Claims } = require('@claimd/client');
const { idempotency, keepRawBody } = require('@claimd/client/express');
const claims = new Claims(process.env.CHILD_CLAIMD_ADDR);
const app = express();
app.post('/orders', express.json({ verify: keepRawBody }),
  idempotency({ claims, namespace: process.env.CHILD_NS, leaseMs: 1000,
    clientOf: (req) => req.get('x-tenant') }),
  () => process.stdout.write('inside\\n'));
const server = app.listen(0, '127.0.0.1', () =>
  process.stdout.write('port ' + server.address().port + '\\n'));
`;

test('a holder process killed mid-request is taken over by a retry, which runs the handler', async () => {
  const tenant = uniqueTenant('killed');
  const key = crypto.randomUUID();
  const child = spawn(process.execPath, ['-e', CHILD], {
    cwd: path.join(__dirname, '..'),
    env: { ...process.env, CHILD_CLAIMD_ADDR: ADDRS[0], CHILD_NS: NS },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  try {
    const lines = [];
    const heard = (word) => new Promise((resolve, reject) => {
      const check = () => {
        const line = lines.find((l) => l.startsWith(word));
        if (line) resolve(line);
      };
      child.stdout.on('data', (chunk) => {
        lines.push(...chunk.toString().split('\n'));
        check();
      });
      child.once('exit', () => reject(new Error('the child app exited')));
      check();
    });
    const port = (await heard('port')).split(' ')[1];
    const dying = post(`http://127.0.0.1:${port}`, tenant, key, { item: 'sofa' }).catch(() => null);
    await heard('inside');
    child.kill('SIGKILL');
    await once(child, 'exit');
    assert.equal(await dying, null, 'the killed holder never answered');
  } finally {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  }

  let runs = 0;
  const apps = await startApps((req, res) => {
    runs += 1;
    res.status(201).json({ attempt: req.idempotency.attempt });
  });
  const answer = await post(apps[apps.length - 1], tenant, key, { item: 'sofa' });
  assert.equal(answer.status, 201, answer.text);
  assert.deepEqual(JSON.parse(answer.text), { attempt: 2 });
  assert.equal(runs, 1);
});

test('claimd down: 503 with Retry-After, and the handler is not run', async () => {
  const down = await downClaims();
  try {
    let runs = 0;
    const app = await startApp(down, (req, res) => {
      runs += 1;
      res.json({ ok: true });
    });
    const answer = await post(app, uniqueTenant('down'), crypto.randomUUID(), { item: 'vase' });
    const problem = assertProblem(answer, 503, 'idempotency-store-unavailable');
    assert.equal(answer.headers.get('retry-after'), '1');
    assert.doesNotMatch(problem.detail, /vase/);
    assert.equal(runs, 0);
  } finally {
    down.close();
  }
});
