'use strict';
// The example's claimd.js (a re-export of the @claimd/client package in clients/node)
// against a real claimd: `CLAIMD_ADDR=127.0.0.1:50051 node --test test/claimd.test.js`.
// `cargo test --test it polyglot::node` runs this file against claimd on its embedded store and
// on PostgreSQL. Every test uses keys of its own, so the file can run against a shared server.
// It checks that the example is wired to the package and that a claim goes through it end to
// end; every behaviour of run() and the RPCs is tested once, in the package's own suite
// (clients/node/test/client.test.js), not again here.

require('./package-current');

const { test, after } = require('node:test');
const assert = require('node:assert/strict');
const crypto = require('node:crypto');
const { Claims, Decision, State, Outcome, fingerprintOf, toDate } = require('../claimd');
const pkg = require('@claimd/client');

const ADDR = process.env.CLAIMD_ADDR;
if (!ADDR) throw new Error('set CLAIMD_ADDR to the host:port of a claimd serving anonymously');

const NS = 'node-helper';
const claims = new Claims(ADDR, { deadlineMs: 10_000 });
after(() => claims.close());

test('claimd.js is the @claimd/client package, installed as clients/node is now', () => {
  assert.equal(require('../claimd'), pkg);
  assert.equal(Claims, pkg.Claims);
  assert.equal(pkg.VERSION, require('@claimd/client/package.json').version);
  assert.deepEqual(require('./package-current').staleFiles(), []);
});

/** A key no other test (or earlier run) uses. */
const uniqueKey = (name) => `${name}-${crypto.randomUUID()}`;
const never = () => assert.fail('the work must not run for this decision');

test('a won claim runs the work once and completes the receipt with its response', async () => {
  const key = uniqueKey('won');
  let runs = 0;
  const outcome = await claims.run(
    NS,
    key,
    fingerprintOf('body'),
    async (ctx) => {
      runs += 1;
      assert.equal(ctx.attempt, 1);
      assert.equal(ctx.key, key);
      assert.equal(ctx.lost, false);
      assert.equal(ctx.signal.aborted, false);
      assert.equal(ctx.receipt.state, State.PROCESSING);
      return 'reply';
    },
    { leaseMs: 30_000, deliveryAttempt: 0 },
  );
  assert.equal(runs, 1);
  assert.equal(outcome.decision, Decision.CLAIMED);
  assert.equal(outcome.outcome, Outcome.COMPLETED);
  assert.deepEqual(outcome.response, Buffer.from('reply'));
  assert.equal(outcome.receipt.state, State.COMPLETED);
  assert.ok(toDate(outcome.receipt.completed_at) instanceof Date);

  const receipt = await claims.get(NS, key);
  assert.equal(receipt.state, State.COMPLETED);
  assert.deepEqual(receipt.response, Buffer.from('reply'));
});

test('a later delivery replays the exact stored response bytes', async () => {
  const key = uniqueKey('replay');
  const fingerprint = fingerprintOf('replayed body');
  // Bytes that are not UTF-8, so nothing on the way may treat them as text.
  const reply = Buffer.concat([Buffer.from([0x00, 0xff, 0xfe, 0x80, 0x0a]), crypto.randomBytes(64)]);
  const won = await claims.run(NS, key, fingerprint, async () => reply, { leaseMs: 30_000 });
  assert.equal(won.outcome, Outcome.COMPLETED);

  const replay = await claims.run(NS, key, fingerprint, never);
  assert.equal(replay.decision, Decision.COMPLETED);
  assert.ok(Buffer.isBuffer(replay.response));
  assert.ok(replay.response.equals(reply), 'the stored response, byte for byte');

  const answer = await claims.claim(NS, key, fingerprint);
  assert.equal(answer.decision, Decision.COMPLETED);
  assert.equal(answer.claim_token, '', 'a token only for CLAIMED');
  assert.ok(answer.receipt.response.equals(reply));
});
