'use strict';
// @claimd/client/express when claimd refuses the Claim by a tenant quota: 503 with
// `Retry-After` in whole seconds (the quota's delay, rounded up) and the handler does not
// run, mounted with app.use and on a route; a RESOURCE_EXHAUSTED without quota details is
// still the store-unavailable 503. Real HTTP and a real claimd, as test/express.test.js
// (which says how to run the express suites), plus CLAIMD_QUOTA_ADDR: a claimd whose
// anonymous tenant gets one Claim, then one per thousand seconds (`[tenants.default]` with
// `claims_per_second = 0.001` and `burst = 1`), so once a test has spent that Claim every
// request through the middleware is refused, whatever ran before.

const { test, after } = require('node:test');
const assert = require('node:assert/strict');
const crypto = require('node:crypto');
const express = require('express');
const { Claims, QuotaError } = require('@claimd/client');
const { idempotency } = require('@claimd/client/express');
const { ADDRS, NS, serve, startAppWide, bearer, post, assertProblem } = require('./express-support.js');

const QUOTA_ADDR = process.env.CLAIMD_QUOTA_ADDR;
if (!QUOTA_ADDR) {
  throw new Error('set CLAIMD_QUOTA_ADDR to a claimd whose anonymous tenant is over its Claims quota ' +
    'after one Claim ([tenants.default] claims_per_second = 0.001, burst = 1)');
}
const limited = new Claims(QUOTA_ADDR, { deadlineMs: 10_000 });
after(() => limited.close());

/** Spends the tenant's Claims until claimd refuses one by its quota (the second at the latest). */
async function spendTheQuota() {
  for (let n = 0; n < 3; n += 1) {
    try {
      await limited.claim(NS, `spent-${crypto.randomUUID()}`, 'fp');
    } catch (error) {
      assert.ok(error instanceof QuotaError, `a QuotaError, got ${error}`);
      return error;
    }
  }
  throw new Error('claimd at CLAIMD_QUOTA_ADDR did not refuse a Claim by its quota');
}

/** Asserts the quota's 503: the problem, and Retry-After as whole seconds, at least 1. */
function assertQuotaRefusal(answer) {
  assertProblem(answer, 503, 'idempotency-quota-exceeded');
  const retryAfter = answer.headers.get('retry-after');
  assert.match(retryAfter ?? '', /^[1-9][0-9]*$/, `Retry-After: ${retryAfter}`);
}

test('with app.use, a Claim refused by the tenant quota is 503 with Retry-After in whole seconds and the ' +
  'handler does not run', async () => {
  await spendTheQuota();
  let runs = 0;
  const app = await startAppWide(limited, (a) => {
    a.post('/orders', (req, res) => {
      runs += 1;
      res.status(201).json({ ok: true });
    });
  });
  const who = bearer();
  const answer = await post(app, null, crypto.randomUUID(), { item: 'lamp' },
    { path: '/orders', headers: who.headers });
  assertQuotaRefusal(answer);
  assert.equal(runs, 0, 'the handler did not run');
});

test('on a route, a Claim refused by the tenant quota is 503 with Retry-After and the handler does not run', async () => {
  await spendTheQuota();
  let runs = 0;
  const app = express();
  app.set('env', 'test');
  app.post('/orders', express.json(), idempotency({ claims: limited, namespace: NS }), (req, res) => {
    runs += 1;
    res.status(201).json({ ok: true });
  });
  const base = await serve(app);
  const answer = await post(base, null, crypto.randomUUID(), { item: 'rug' }, { headers: bearer().headers });
  assertQuotaRefusal(answer);
  assert.equal(runs, 0, 'the handler did not run');
});

test('a RESOURCE_EXHAUSTED without quota details is still 503 idempotency-store-unavailable with ' +
  'Retry-After: 1, and the handler does not run', async () => {
  // A channel limit below any Claim: grpc-js refuses to send it, RESOURCE_EXHAUSTED, no details.
  const small = new Claims(ADDRS[0], { deadlineMs: 10_000, channelOptions: { 'grpc.max_send_message_length': 8 } });
  try {
    let runs = 0;
    const app = await startAppWide(small, (a) => {
      a.post('/orders', (req, res) => {
        runs += 1;
        res.json({ ok: true });
      });
    });
    const answer = await post(app, null, crypto.randomUUID(), { item: 'cup' },
      { path: '/orders', headers: bearer().headers });
    assertProblem(answer, 503, 'idempotency-store-unavailable');
    assert.equal(answer.headers.get('retry-after'), '1');
    assert.equal(runs, 0);
  } finally {
    small.close();
  }
});
