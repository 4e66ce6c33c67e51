'use strict';
// The example's claimd.js (a re-export of the @claimd/client package in clients/node)
// against a real claimd: `CLAIMD_ADDR=127.0.0.1:50051 node --test test/claimd.test.js`.
// `cargo test --test it polyglot::node` runs this file against claimd on its embedded store and
// on PostgreSQL. Every test uses keys of its own, so the file can run against a shared server.
// The package's own, longer suite is clients/node/test/client.test.js.

require('./package-current');

const { test, after } = require('node:test');
const assert = require('node:assert/strict');
const crypto = require('node:crypto');
const util = require('node:util');
const {
  Claims,
  ClaimdError,
  PermanentError,
  Decision,
  State,
  Outcome,
  fingerprintOf,
  toDate,
  status,
} = require('../claimd');
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
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const never = () => assert.fail('the work must not run for this decision');

/** A promise with its resolve function outside, to hold the work at a known point. */
function gate() {
  let open;
  const opened = new Promise((resolve) => {
    open = resolve;
  });
  return { opened, open };
}

/** Resolves once `signal` is aborted, or after `ms` (so a failing test cannot hang). */
function abortedWithin(signal, ms) {
  if (signal.aborted) return Promise.resolve();
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal.addEventListener('abort', () => {
      clearTimeout(timer);
      resolve();
    }, { once: true });
  });
}

/** Asserts that `promise` rejects with a ClaimdError of `code` whose message says `words`. */
async function rejectsWith(promise, code, words) {
  await assert.rejects(promise, (error) => {
    assert.ok(error instanceof ClaimdError, `a ClaimdError, got ${error}`);
    assert.equal(error.code, code, `${error.message}`);
    if (words) assert.match(error.message, words);
    return true;
  });
}

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

test('a duplicate delivery while the work runs is IN_FLIGHT and does not run the work', async () => {
  const key = uniqueKey('dup');
  const fingerprint = fingerprintOf('same body');
  const inside = gate();
  const release = gate();
  const first = claims.run(
    NS,
    key,
    fingerprint,
    async () => {
      inside.open();
      await release.opened;
      return 'first';
    },
    { leaseMs: 30_000 },
  );
  await inside.opened;

  try {
    const second = await claims.run(NS, key, fingerprint, never, { leaseMs: 30_000, deliveryAttempt: 1 });
    assert.equal(second.decision, Decision.IN_FLIGHT);
    assert.equal(second.response, null);
    assert.equal(second.receipt.state, State.PROCESSING);
    assert.equal(second.receipt.attempt, 1);
    assert.ok(toDate(second.receipt.lease_expires_at) instanceof Date);
  } finally {
    release.open(); // a failed assertion must not leave the work (and its heartbeats) running
  }
  const won = await first;
  assert.equal(won.outcome, Outcome.COMPLETED);
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

test('the same key with another fingerprint is a CONFLICT and changes nothing', async () => {
  const key = uniqueKey('conflict');
  const won = await claims.run(NS, key, fingerprintOf('one body'), async () => 'one', { leaseMs: 30_000 });
  assert.equal(won.outcome, Outcome.COMPLETED);

  const other = await claims.run(NS, key, fingerprintOf('another body'), never);
  assert.equal(other.decision, Decision.CONFLICT);
  assert.equal(other.response, null);
  assert.equal((await claims.get(NS, key)).state, State.COMPLETED);
});

test('work that throws gives the claim back with Retry: RETRY_WAIT, then RETRY_SCHEDULED', async () => {
  const key = uniqueKey('retry');
  const fingerprint = fingerprintOf('flaky');
  const outcome = await claims.run(NS, key, fingerprint, async () => {
    throw new Error('upstream timed out');
  });
  assert.equal(outcome.decision, Decision.CLAIMED);
  assert.equal(outcome.outcome, Outcome.RETRIED);
  assert.equal(outcome.error.message, 'upstream timed out');
  assert.equal(outcome.receipt.state, State.RETRY_WAIT);

  const receipt = await claims.get(NS, key);
  assert.equal(receipt.state, State.RETRY_WAIT);
  assert.match(receipt.last_error, /upstream timed out/);
  assert.ok(toDate(receipt.next_attempt_at) instanceof Date);

  const again = await claims.run(NS, key, fingerprint, never);
  assert.equal(again.decision, Decision.RETRY_SCHEDULED);
});

test("an error's retryAfterMs sets when the retry is due", async () => {
  const key = uniqueKey('retry-after');
  const outcome = await claims.run(NS, key, fingerprintOf('rate limited'), async () => {
    throw Object.assign(new Error('HTTP 429'), { retryAfterMs: 60_000, countAttempt: false });
  });
  assert.equal(outcome.outcome, Outcome.RETRIED);
  const receipt = await claims.get(NS, key);
  // Both timestamps come from claimd's clock.
  const due = toDate(receipt.next_attempt_at) - toDate(receipt.updated_at);
  assert.ok(due >= 59_000 && due <= 61_000, `due in ${due} ms, wanted 60 s`);
});

test('a PermanentError quarantines the receipt at once', async () => {
  const key = uniqueKey('poison');
  const fingerprint = fingerprintOf('poison');
  const outcome = await claims.run(NS, key, fingerprint, async () => {
    throw new PermanentError('the payload cannot be parsed');
  });
  assert.equal(outcome.outcome, Outcome.QUARANTINED);
  assert.ok(outcome.error instanceof PermanentError);
  assert.equal(outcome.receipt.state, State.QUARANTINED);

  const again = await claims.run(NS, key, fingerprint, never);
  assert.equal(again.decision, Decision.QUARANTINED);
  assert.match(again.receipt.last_error, /the payload cannot be parsed/);
});

test('heartbeats keep a short lease: a claim after the first lease ran out is still IN_FLIGHT', async () => {
  const key = uniqueKey('heartbeat');
  const fingerprint = fingerprintOf('slow');
  let during;
  let firstExpiry;
  const outcome = await claims.run(
    NS,
    key,
    fingerprint,
    async (ctx) => {
      firstExpiry = toDate(ctx.receipt.lease_expires_at);
      await sleep(1_200); // the 1 s lease granted by the claim has run out by now
      during = await claims.run(NS, key, fingerprint, never, { leaseMs: 1_000 });
      await sleep(400);
      assert.equal(ctx.lost, false);
      return 'slow reply';
    },
    { leaseMs: 1_000 },
  );
  assert.equal(during.decision, Decision.IN_FLIGHT, 'not taken over while heartbeats run');
  assert.equal(during.receipt.attempt, 1);
  assert.ok(toDate(during.receipt.lease_expires_at) > firstExpiry, 'the lease was extended');
  assert.equal(outcome.outcome, Outcome.COMPLETED);
  assert.equal(outcome.receipt.attempt, 1);
});

test('a lease taken over aborts ctx.signal at the next heartbeat; nothing is completed', async () => {
  const key = uniqueKey('lost');
  const fingerprint = fingerprintOf('stalled');
  let taken;
  let reason;
  const outcome = await claims.run(
    NS,
    key,
    fingerprint,
    async (ctx) => {
      // Heartbeats slower than the lease: the holder stalls, and another delivery takes over.
      await sleep(1_200);
      taken = await claims.run(NS, key, fingerprint, async (rival) => {
        assert.equal(rival.attempt, 2);
        return 'the new holder';
      });
      await abortedWithin(ctx.signal, 10_000);
      assert.equal(ctx.lost, true);
      reason = ctx.signal.reason;
      return 'the old holder';
    },
    { leaseMs: 1_000, heartbeatMs: 2_000 },
  );
  assert.equal(taken.outcome, Outcome.COMPLETED);
  assert.equal(outcome.decision, Decision.CLAIMED);
  assert.equal(outcome.outcome, Outcome.LOST);
  assert.equal(outcome.response, null);
  assert.ok(reason instanceof ClaimdError);
  assert.equal(reason.code, status.ABORTED);
  const receipt = await claims.get(NS, key);
  assert.deepEqual(receipt.response, Buffer.from('the new holder'));
  assert.equal(receipt.attempt, 2);
});

test('ctx.checkpoint stores progress for the next holder, and is ABORTED once taken over', async () => {
  const key = uniqueKey('checkpoint');
  const fingerprint = fingerprintOf('checkpointed');
  const outcome = await claims.run(
    NS,
    key,
    fingerprint,
    async (ctx) => {
      const receipt = await ctx.checkpoint('step 1');
      assert.deepEqual(receipt.checkpoint, Buffer.from('step 1'));
      await sleep(1_200); // no heartbeat meanwhile: the lease runs out
      const rival = await claims.run(
        NS,
        key,
        fingerprint,
        async (next) => {
          assert.equal(next.attempt, 2);
          assert.deepEqual(next.receipt.checkpoint, Buffer.from('step 1'));
          assert.deepEqual(next.receipt.recovery_payload, Buffer.from('the body'));
          return 'resumed';
        },
        { leaseMs: 30_000 },
      );
      assert.equal(rival.outcome, Outcome.COMPLETED);
      await rejectsWith(ctx.checkpoint('step 2'), status.ABORTED);
      assert.equal(ctx.lost, true);
      assert.equal(ctx.signal.aborted, true);
      return 'too late';
    },
    { leaseMs: 1_000, heartbeatMs: 60_000, recoveryPayload: 'the body' },
  );
  assert.equal(outcome.outcome, Outcome.LOST);
  assert.deepEqual((await claims.get(NS, key)).response, Buffer.from('resumed'));
});

test('the low-level calls: takeover returns the recovery payload, a stale token is ABORTED', async () => {
  const key = uniqueKey('takeover');
  const fingerprint = fingerprintOf('takeover');
  const first = await claims.claim(NS, key, fingerprint, { leaseMs: 1_000, recoveryPayload: 'redo me' });
  assert.equal(first.decision, Decision.CLAIMED);
  assert.ok(first.claim_token);
  const checkpointed = await claims.heartbeat(NS, key, first.claim_token, {
    leaseMs: 1_000,
    checkpoint: 'step 1',
  });
  assert.deepEqual(checkpointed.checkpoint, Buffer.from('step 1'));
  await sleep(1_200);

  const second = await claims.claim(NS, key, fingerprint, { leaseMs: 30_000 });
  assert.equal(second.decision, Decision.CLAIMED);
  assert.equal(second.receipt.attempt, 2);
  assert.deepEqual(second.receipt.recovery_payload, Buffer.from('redo me'));
  assert.deepEqual(second.receipt.checkpoint, Buffer.from('step 1'));

  await rejectsWith(claims.heartbeat(NS, key, first.claim_token, { leaseMs: 1_000 }), status.ABORTED);
  await rejectsWith(claims.complete(NS, key, first.claim_token, 'stale'), status.ABORTED);
  const done = await claims.complete(NS, key, second.claim_token, 'fresh');
  assert.equal(done.state, State.COMPLETED);
  // Completing again with the same token changes nothing.
  assert.equal((await claims.complete(NS, key, second.claim_token, 'fresh')).state, State.COMPLETED);
  await rejectsWith(claims.get(NS, uniqueKey('never-claimed')), status.NOT_FOUND);
});

test('a bad request is INVALID_ARGUMENT naming the field, and the work never runs', async () => {
  const invalid = status.INVALID_ARGUMENT;
  const fp = fingerprintOf('x');
  await rejectsWith(claims.run('not a namespace!', uniqueKey('bad'), fp, never), invalid, /namespace/);
  await rejectsWith(claims.run(NS, '', fp, never), invalid, /key/);
  await rejectsWith(claims.claim(NS, uniqueKey('bad'), Buffer.alloc(65)), invalid, /fingerprint/);
  await rejectsWith(claims.claim(NS, uniqueKey('bad'), fp, { leaseMs: 500 }), invalid, /lease_ttl/);
});

test('the API key goes out as a bearer token and never into an error', async () => {
  const secret = `ck_${crypto.randomBytes(16).toString('hex')}`;
  const keyed = new Claims(ADDR, { apiKey: secret });
  try {
    await assert.rejects(keyed.claim(NS, uniqueKey('auth'), 'fp'), (error) => {
      assert.equal(error.code, status.UNAUTHENTICATED, error.message);
      assert.ok(!error.message.includes(secret), 'the key is not in the message');
      return true;
    });
    const inspected = util.inspect(keyed, { depth: 6 });
    assert.ok(!inspected.includes(secret), 'the key is not in the inspected client');
  } finally {
    keyed.close();
  }
});

test('an unreachable claimd is UNAVAILABLE', async () => {
  // Port 1 on loopback: nothing listens there.
  const nowhere = new Claims('127.0.0.1:1', { deadlineMs: 2_000 });
  try {
    await rejectsWith(nowhere.run(NS, uniqueKey('down'), 'fp', never), status.UNAVAILABLE);
  } finally {
    nowhere.close();
  }
});
