'use strict';
// @claimd/client against a real claimd: `CLAIMD_ADDR=127.0.0.1:50051 npm test`.
// `cargo test --test it polyglot::clients_node` packs the package, installs the tarball into
// an empty directory, copies this file next to it (so `require('@claimd/client')` loads the
// INSTALLED package, not this checkout) and runs it against claimd on its embedded store and
// on PostgreSQL. Every test uses keys (and, where it lists, a namespace) of its own, so the
// file can run against a shared server. The quota tests need CLAIMD_QUOTA_ADDR too: a claimd
// whose anonymous tenant gets one Claim, then one per thousand seconds
// (`[tenants.default]` with `claims_per_second = 0.001` and `burst = 1` in its policy file).

const { test, after } = require('node:test');
const assert = require('node:assert/strict');
const crypto = require('node:crypto');
const fs = require('node:fs');
const path = require('node:path');
const util = require('node:util');
const {
  Claims,
  ClaimdError,
  QuotaError,
  PermanentError,
  Decision,
  State,
  OrphanReason,
  Outcome,
  fingerprintOf,
  toDate,
  status,
  PROTO_DIR,
  VERSION,
} = require('@claimd/client');

const ADDR = process.env.CLAIMD_ADDR;
if (!ADDR) throw new Error('set CLAIMD_ADDR to the host:port of a claimd serving anonymously');

const NS = 'node-client';
const claims = new Claims(ADDR, { deadlineMs: 10_000 });
after(() => claims.close());

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

/**
 * Asserts that `promise` rejects with a ClaimdError of `code`; with `field`, that claimd's
 * BadRequest details name that field (and the message does too).
 */
async function rejectsWith(promise, code, field) {
  let caught;
  await assert.rejects(promise, (error) => {
    assert.ok(error instanceof ClaimdError, `a ClaimdError, got ${error}`);
    assert.equal(error.code, code, error.message);
    if (field !== undefined) {
      assert.equal(error.field, field, `the BadRequest field of: ${error.message}`);
      assert.equal(error.violations[0].field, field);
      assert.ok(error.violations[0].description.length > 0, 'the violation says what is wrong');
      assert.match(error.message, new RegExp(`\\b${field}\\b`));
    }
    caught = error;
    return true;
  });
  return caught;
}

test('the installed package is the version of its proto and loads the proto it ships', () => {
  const manifest = JSON.parse(
    fs.readFileSync(path.join(path.dirname(require.resolve('@claimd/client')), 'package.json'), 'utf8'),
  );
  assert.equal(VERSION, manifest.version);
  assert.equal(path.dirname(PROTO_DIR), path.dirname(require.resolve('@claimd/client')));
  const proto = fs.readFileSync(path.join(PROTO_DIR, 'claimd/v1/claims.proto'), 'utf8');
  assert.match(proto, /^package claimd\.v1;$/m);
  assert.ok(Object.isFrozen(Decision) && Object.isFrozen(State), 'the name tables cannot change');
});

test('the low-level calls answer every decision: CLAIMED, IN_FLIGHT, COMPLETED, RETRY_SCHEDULED, QUARANTINED, CONFLICT', async () => {
  const fp = fingerprintOf('every decision');

  const done = uniqueKey('decisions-done');
  const won = await claims.claim(NS, done, fp, { leaseMs: 30_000 });
  assert.equal(won.decision, Decision.CLAIMED);
  assert.ok(won.claim_token.length > 0);
  assert.equal(won.receipt.attempt, 1);
  const busy = await claims.claim(NS, done, fp);
  assert.equal(busy.decision, Decision.IN_FLIGHT);
  assert.equal(busy.claim_token, '', 'a token only for CLAIMED');
  assert.ok(toDate(busy.receipt.lease_expires_at) > new Date(Date.now() - 60_000));
  await claims.complete(NS, done, won.claim_token, 'stored');
  const replay = await claims.claim(NS, done, fp);
  assert.equal(replay.decision, Decision.COMPLETED);
  assert.deepEqual(replay.receipt.response, Buffer.from('stored'));
  const conflict = await claims.claim(NS, done, fingerprintOf('another event'));
  assert.equal(conflict.decision, Decision.CONFLICT);

  const later = uniqueKey('decisions-later');
  const first = await claims.claim(NS, later, fp);
  await claims.retry(NS, later, first.claim_token, 'not yet', { retryAfterMs: 60_000 });
  const scheduled = await claims.claim(NS, later, fp);
  assert.equal(scheduled.decision, Decision.RETRY_SCHEDULED);
  assert.equal(scheduled.receipt.state, State.RETRY_WAIT);
  assert.ok(toDate(scheduled.receipt.next_attempt_at) instanceof Date);

  const poison = uniqueKey('decisions-poison');
  const held = await claims.claim(NS, poison, fp);
  await claims.quarantine(NS, poison, held.claim_token, 'cannot parse');
  const dead = await claims.claim(NS, poison, fp);
  assert.equal(dead.decision, Decision.QUARANTINED);
  assert.equal(dead.receipt.last_error, 'cannot parse');
});

test('run: a won claim runs the work once and completes the receipt with its response', async () => {
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
      assert.equal(ctx.namespace, NS);
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
  assert.equal(outcome.error, null);
  assert.equal(outcome.receipt.state, State.COMPLETED);
  assert.ok(toDate(outcome.receipt.completed_at) instanceof Date);

  const receipt = await claims.get(NS, key);
  assert.equal(receipt.state, State.COMPLETED);
  assert.deepEqual(receipt.response, Buffer.from('reply'));
});

test('run: a duplicate delivery while the work runs is IN_FLIGHT and does not run the work', async () => {
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
    const second = await claims.run(NS, key, fingerprint, never, { deliveryAttempt: 1 });
    assert.equal(second.decision, Decision.IN_FLIGHT);
    assert.equal(second.response, null);
    assert.equal(second.receipt.state, State.PROCESSING);
    assert.equal(second.receipt.attempt, 1);
  } finally {
    release.open(); // a failed assertion must not leave the work (and its heartbeats) running
  }
  assert.equal((await first).outcome, Outcome.COMPLETED);
});

test('run: a later delivery replays the exact stored response bytes', async () => {
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

  const other = await claims.run(NS, key, fingerprintOf('another body'), never);
  assert.equal(other.decision, Decision.CONFLICT);
  assert.equal(other.response, null);
});

test('run: work that throws gives the claim back with Retry: RETRY_WAIT, then RETRY_SCHEDULED', async () => {
  const key = uniqueKey('retry');
  const fingerprint = fingerprintOf('flaky');
  const outcome = await claims.run(NS, key, fingerprint, async () => {
    throw new Error('upstream timed out');
  });
  assert.equal(outcome.decision, Decision.CLAIMED);
  assert.equal(outcome.outcome, Outcome.RETRIED);
  assert.equal(outcome.error.message, 'upstream timed out');
  assert.equal(outcome.response, null);
  assert.equal(outcome.receipt.state, State.RETRY_WAIT);

  const receipt = await claims.get(NS, key);
  assert.equal(receipt.state, State.RETRY_WAIT);
  assert.match(receipt.last_error, /upstream timed out/);

  const again = await claims.run(NS, key, fingerprint, never);
  assert.equal(again.decision, Decision.RETRY_SCHEDULED);
});

test("run: an error's retryAfterMs sets when the retry is due", async () => {
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

test('run: a PermanentError quarantines the receipt at once', async () => {
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

test('run: the background heartbeat keeps a 1 s lease alive past 3 s', async () => {
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
      await sleep(3_300); // three of the claim's 1 s leases have run out by now
      during = await claims.run(NS, key, fingerprint, never, { leaseMs: 1_000 });
      assert.equal(ctx.lost, false);
      return 'slow reply';
    },
    { leaseMs: 1_000 },
  );
  assert.equal(during.decision, Decision.IN_FLIGHT, 'not taken over while heartbeats run');
  assert.equal(during.receipt.attempt, 1);
  const extended = toDate(during.receipt.lease_expires_at) - firstExpiry;
  assert.ok(extended >= 2_500, `the lease was extended by ${extended} ms, wanted over 2.5 s`);
  assert.equal(outcome.outcome, Outcome.COMPLETED);
  assert.equal(outcome.receipt.attempt, 1);
});

test('run: a lease taken over aborts ctx.signal with ABORTED and is reported lost; nothing is completed', async () => {
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
  assert.equal(reason.codeName, 'ABORTED');
  assert.equal(reason.rpc, 'Heartbeat');
  assert.equal(outcome.error, reason);
  const receipt = await claims.get(NS, key);
  assert.deepEqual(receipt.response, Buffer.from('the new holder'));
  assert.equal(receipt.attempt, 2);
});

test('run: ctx.checkpoint stores progress for the next holder, and is ABORTED once taken over', async () => {
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
      return 'too late';
    },
    { leaseMs: 1_000, heartbeatMs: 60_000, recoveryPayload: 'the body' },
  );
  assert.equal(outcome.outcome, Outcome.LOST);
  assert.deepEqual((await claims.get(NS, key)).response, Buffer.from('resumed'));
});

test('the low-level calls: a takeover returns the recovery payload, a stale token is ABORTED and not echoed', async () => {
  const key = uniqueKey('takeover');
  const fingerprint = fingerprintOf('takeover');
  const first = await claims.claim(NS, key, fingerprint, { leaseMs: 1_000, recoveryPayload: 'redo me' });
  assert.equal(first.decision, Decision.CLAIMED);
  const checkpointed = await claims.heartbeat(NS, key, first.claim_token, { leaseMs: 1_000, checkpoint: 'step 1' });
  assert.deepEqual(checkpointed.checkpoint, Buffer.from('step 1'));
  await sleep(1_200);

  const second = await claims.claim(NS, key, fingerprint, { leaseMs: 30_000 });
  assert.equal(second.decision, Decision.CLAIMED);
  assert.equal(second.receipt.attempt, 2);
  assert.deepEqual(second.receipt.recovery_payload, Buffer.from('redo me'));
  assert.deepEqual(second.receipt.checkpoint, Buffer.from('step 1'));

  const stale = await rejectsWith(claims.heartbeat(NS, key, first.claim_token, { leaseMs: 1_000 }), status.ABORTED);
  assert.ok(!stale.message.includes(first.claim_token), 'the token is not in the message');
  assert.equal(stale.field, null, 'no BadRequest details for ABORTED');
  assert.deepEqual(stale.violations, []);
  await rejectsWith(claims.complete(NS, key, first.claim_token, 'stale'), status.ABORTED);
  await rejectsWith(claims.retry(NS, key, first.claim_token, 'stale'), status.ABORTED);
  await rejectsWith(claims.quarantine(NS, key, first.claim_token, 'stale'), status.ABORTED);
  const done = await claims.complete(NS, key, second.claim_token, 'fresh');
  assert.equal(done.state, State.COMPLETED);
  // Completing again with the same token changes nothing.
  assert.equal((await claims.complete(NS, key, second.claim_token, 'fresh')).state, State.COMPLETED);
  await rejectsWith(claims.heartbeat(NS, key, second.claim_token), status.FAILED_PRECONDITION);
  await rejectsWith(claims.get(NS, uniqueKey('never-claimed')), status.NOT_FOUND);
});

test('wait: a waiting claim is answered COMPLETED with the stored response once the holder completes', async () => {
  const key = uniqueKey('wait');
  const fingerprint = fingerprintOf('waited for');
  const holder = await claims.claim(NS, key, fingerprint, { leaseMs: 30_000 });
  assert.equal(holder.decision, Decision.CLAIMED);
  assert.equal((await claims.claim(NS, key, fingerprint)).decision, Decision.IN_FLIGHT, 'without wait');

  let answered = false;
  const waiting = claims.claim(NS, key, fingerprint, { waitMs: 20_000 }).finally(() => {
    answered = true;
  });
  await sleep(500);
  assert.equal(answered, false, 'the waiting claim is held while the holder works');
  await claims.complete(NS, key, holder.claim_token, 'the stored response');
  const answer = await waiting;
  assert.equal(answer.decision, Decision.COMPLETED);
  assert.deepEqual(answer.receipt.response, Buffer.from('the stored response'));
  assert.equal(answer.claim_token, '');
});

test('wait: run with waitMs replays the response of the run it waited for', async () => {
  const key = uniqueKey('wait-run');
  const fingerprint = fingerprintOf('run waited for');
  const inside = gate();
  const release = gate();
  const first = claims.run(
    NS,
    key,
    fingerprint,
    async () => {
      inside.open();
      await release.opened;
      return 'first reply';
    },
    { leaseMs: 30_000 },
  );
  await inside.opened;
  const second = claims.run(NS, key, fingerprint, never, { waitMs: 20_000 });
  await sleep(300);
  release.open();
  assert.equal((await first).outcome, Outcome.COMPLETED);
  const replay = await second;
  assert.equal(replay.decision, Decision.COMPLETED);
  assert.deepEqual(replay.response, Buffer.from('first reply'));
});

test('wait: a wait that runs out is IN_FLIGHT; one that outlasts the lease takes the work over', async () => {
  const key = uniqueKey('wait-out');
  const fingerprint = fingerprintOf('wait out');
  const holder = await claims.claim(NS, key, fingerprint, { leaseMs: 30_000 });
  const started = Date.now();
  const out = await claims.claim(NS, key, fingerprint, { waitMs: 400 });
  assert.equal(out.decision, Decision.IN_FLIGHT);
  assert.ok(Date.now() - started >= 300, 'claimd held the call for the wait');
  await claims.complete(NS, key, holder.claim_token, 'done');

  const gone = uniqueKey('wait-takeover');
  const stalled = await claims.claim(NS, gone, fingerprint, { leaseMs: 1_000 });
  const taken = await claims.claim(NS, gone, fingerprint, { waitMs: 20_000, leaseMs: 30_000 });
  assert.equal(taken.decision, Decision.CLAIMED, 'the stalled holder lease ran out while it waited');
  assert.equal(taken.receipt.attempt, 2);
  await rejectsWith(claims.complete(NS, gone, stalled.claim_token, 'stale'), status.ABORTED);
  await claims.complete(NS, gone, taken.claim_token, 'taken over');
});

test('List, Redrive and ListOrphaned page through dead letters and orphans of one namespace', async () => {
  const ns = `node-client-list-${crypto.randomUUID()}`;
  const fp = fingerprintOf('listed');
  const [a, b] = ['a', 'b'].map((name) => `${name}-${crypto.randomUUID()}`).sort();
  for (const key of [a, b]) {
    const outcome = await claims.run(ns, key, fp, async () => {
      throw new PermanentError('poison');
    });
    assert.equal(outcome.outcome, Outcome.QUARANTINED);
  }
  const expired = uniqueKey('expired');
  await claims.claim(ns, expired, fp, { leaseMs: 1_000 });

  const first = await claims.list({ namespace: ns, states: [State.QUARANTINED], pageSize: 1 });
  assert.deepEqual(first.receipts.map((r) => r.key), [a]);
  assert.ok(first.next_page_token, 'a page token while more are left');
  const second = await claims.list({ namespace: ns, states: [State.QUARANTINED], pageToken: first.next_page_token });
  assert.deepEqual(second.receipts.map((r) => r.key), [b]);
  assert.equal(second.next_page_token, '');
  assert.equal((await claims.list({ namespace: ns })).receipts.length, 3);

  const redriven = await claims.redrive(ns, a);
  assert.equal(redriven.state, State.RETRY_WAIT);
  await rejectsWith(claims.redrive(ns, a), status.FAILED_PRECONDITION);
  await rejectsWith(claims.redrive(ns, uniqueKey('unknown')), status.NOT_FOUND);

  await sleep(1_200); // the 1 s lease runs out
  const orphans = await claims.listOrphaned({ namespace: ns });
  const reasons = Object.fromEntries(orphans.orphans.map((o) => [o.receipt.key, o.reason]));
  assert.deepEqual(reasons, { [a]: OrphanReason.RETRY_DUE, [expired]: OrphanReason.LEASE_EXPIRED });
  assert.equal(orphans.next_page_token, '');
  const overdue = await claims.listOrphaned({ namespace: ns, overdueByMs: 3_600_000 });
  assert.deepEqual(overdue.orphans, [], 'nothing is an hour overdue');

  const again = await claims.claim(ns, a, fp);
  assert.equal(again.decision, Decision.CLAIMED, 'a redriven receipt is claimed again at once');
  assert.equal(again.receipt.attempt, 2);
});

test('a bad request is INVALID_ARGUMENT naming the field from BadRequest details, and the work never runs', async () => {
  const invalid = status.INVALID_ARGUMENT;
  const fp = fingerprintOf('x');
  const empty = await rejectsWith(claims.run(NS, '', fp, never), invalid, 'key');
  assert.equal(empty.codeName, 'INVALID_ARGUMENT');
  assert.equal(empty.rpc, 'Claim');
  await rejectsWith(claims.run('not a namespace!', uniqueKey('bad'), fp, never), invalid, 'namespace');
  await rejectsWith(claims.claim(NS, uniqueKey('bad'), Buffer.alloc(65)), invalid, 'fingerprint');
  await rejectsWith(claims.claim(NS, uniqueKey('bad'), fp, { leaseMs: 500 }), invalid, 'lease_ttl');
  await rejectsWith(claims.claim(NS, uniqueKey('bad'), fp, { waitMs: 61_000 }), invalid, 'wait');
  await rejectsWith(claims.list({ pageToken: 'not a page token' }), invalid, 'page_token');
  await rejectsWith(claims.get(NS, ''), invalid, 'key');
  await assert.rejects(claims.claim(NS, 'k', 42), TypeError, 'bytes are checked before sending');
});

test('the API key goes out as a bearer token and never into an error', async () => {
  const secret = `ck_${crypto.randomBytes(16).toString('hex')}`;
  const keyed = new Claims(ADDR, { apiKey: secret });
  try {
    await assert.rejects(keyed.claim(NS, uniqueKey('auth'), 'fp'), (error) => {
      assert.equal(error.code, status.UNAUTHENTICATED, error.message);
      assert.ok(!error.message.includes(secret), 'the key is not in the message');
      assert.ok(!util.inspect(error).includes(secret), 'the key is not in the inspected error');
      return true;
    });
    assert.ok(!util.inspect(keyed, { depth: 6 }).includes(secret), 'the key is not in the inspected client');
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

/** The claimd of CLAIMD_QUOTA_ADDR (the test fails, never skips, without it). */
function quotaClaims() {
  const addr = process.env.CLAIMD_QUOTA_ADDR;
  assert.ok(addr, 'set CLAIMD_QUOTA_ADDR to a claimd whose anonymous tenant is over its Claims ' +
    'quota after one Claim ([tenants.default] claims_per_second = 0.001, burst = 1)');
  return new Claims(addr, { deadlineMs: 10_000 });
}

test('a Claim over the tenant quota rejects with a QuotaError naming the quota with a positive retry delay; ' +
  'the work never runs', async () => {
  const limited = quotaClaims();
  try {
    // The bucket holds one Claim: the second at the latest is refused.
    let refused = null;
    for (let n = 0; n < 3 && refused === null; n += 1) {
      try {
        await limited.claim(NS, uniqueKey('quota'), 'fp');
      } catch (error) {
        refused = error;
      }
    }
    assert.ok(refused instanceof QuotaError, `a QuotaError, got ${refused}`);
    assert.ok(refused instanceof ClaimdError, 'a QuotaError is a ClaimdError');
    assert.equal(refused.name, 'QuotaError');
    assert.equal(refused.code, status.RESOURCE_EXHAUSTED);
    assert.equal(refused.rpc, 'Claim');
    assert.equal(refused.quota, 'claims_per_second');
    assert.ok(Number.isInteger(refused.retryAfterMs) && refused.retryAfterMs > 0, `${refused.retryAfterMs}`);

    await assert.rejects(limited.run(NS, uniqueKey('quota'), 'fp', never), (error) => {
      assert.ok(error instanceof QuotaError, `a QuotaError, got ${error}`);
      assert.equal(error.quota, 'claims_per_second');
      return true;
    });
  } finally {
    limited.close();
  }
});

test('a RESOURCE_EXHAUSTED without quota details (a message over the channel limit) stays a plain ClaimdError', async () => {
  const small = new Claims(ADDR, { channelOptions: { 'grpc.max_send_message_length': 8 } });
  try {
    const error = await rejectsWith(small.claim(NS, uniqueKey('too-large'), 'fp'), status.RESOURCE_EXHAUSTED);
    assert.ok(!(error instanceof QuotaError), `not a QuotaError: ${error}`);
    assert.equal(error.name, 'ClaimdError');
  } finally {
    small.close();
  }
});
