'use strict';
// Whose key is it: @claimd/client/express's default scope (no clientOf: a digest of the
// Authorization header, else of the session cookie the app names, else "anonymous"), the
// spec's vectors for it (the same in claimd's four packages), and what a stored response
// never carries to another caller (Set-Cookie, hop-by-hop headers). Real HTTP and a real
// claimd, as test/express.test.js (which says how to run the express suites).

const { test } = require('node:test');
const assert = require('node:assert/strict');
const crypto = require('node:crypto');
const { Decision } = require('@claimd/client');
const {
  idempotency, defaultClient, claimKey, requestFingerprint, encodeResponse, decodeResponse, REPLAYED,
} = require('@claimd/client/express');
const { NS, clients, startAppWide, bearer, post, receiptOf } = require('./express-support.js');

test("the default client is the spec's: Authorization digest, else the session cookie's, else anonymous", () => {
  assert.equal(
    claimKey(defaultClient({ authorization: 'Bearer token-A' }), 'order-1'),
    'auth%3A554b8cec38a5a3f3b9baf98b21f33155c74c0520c6e4db8bd91ac366fa3775ed order-1',
  );
  assert.equal(
    defaultClient({ authorization: 'Bearer token-A' }),
    'auth:554b8cec38a5a3f3b9baf98b21f33155c74c0520c6e4db8bd91ac366fa3775ed',
  );
  const cookie = { cookie: 'a=1; sid=s%3Aabc.def; b=2' };
  assert.equal(
    defaultClient(cookie, 'sid'),
    'cookie:b55bfccadad2d5e3cd608c839d764d9b794fed8effba825a3fdbade6fd7de562',
  );
  assert.equal(
    claimKey(defaultClient(cookie, 'sid'), 'order-1'),
    'cookie%3Ab55bfccadad2d5e3cd608c839d764d9b794fed8effba825a3fdbade6fd7de562 order-1',
  );
  assert.equal(claimKey(defaultClient({}), 'order-1'), 'anonymous order-1');
});

test('several Authorization lines are joined with ", "; the first session cookie wins, as sent', () => {
  const sha = (text) => crypto.createHash('sha256').update(text).digest('hex');
  assert.equal(defaultClient({ authorization: ['Bearer a', 'Bearer b'] }), `auth:${sha('Bearer a, Bearer b')}`);
  assert.equal(
    defaultClient({ authorization: 'Basic x', cookie: 'sid=1' }, 'sid'),
    defaultClient({ authorization: 'Basic x' }),
    'Authorization comes first',
  );
  assert.equal(defaultClient({ cookie: ['x=1;  sid=first ', 'sid=second'] }, 'sid'), `cookie:${sha('first')}`);
  assert.equal(defaultClient({ cookie: 'sid=a=b' }, 'sid'), `cookie:${sha('a=b')}`, 'after the first =');
  assert.equal(defaultClient({ cookie: 'sidx=1; other=2' }, 'sid'), 'anonymous');
  assert.equal(defaultClient({ cookie: 'sid=1' }), 'anonymous', 'no cookie named, none used');
  assert.equal(defaultClient({ authorization: 'Bearer caf\u00e9' }), `auth:${sha(Buffer.from([
    ...Buffer.from('Bearer caf'), 0xe9]))}`, 'the bytes as received (Node reads them as latin1)');
});

test('sessionCookie with clientOf, or a malformed option, fails when idempotency() is called', () => {
  const base = { claims: clients[0], namespace: NS };
  assert.throws(() => idempotency({ ...base, sessionCookie: 'sid', clientOf: () => 'x' }), /one or the other/);
  assert.throws(() => idempotency({ ...base, sessionCookie: 'a b' }), /sessionCookie/);
  assert.throws(() => idempotency({ ...base, paths: ['orders'] }), /paths/);
  assert.throws(() => idempotency({ ...base, clientOf: 'x-tenant' }), /clientOf/);
});

/** An app-wide app whose POST /orders creates a new order each run; `runs` counts them. */
async function orderApp(options) {
  const runs = { count: 0 };
  const base = await startAppWide(clients[0], (app) => {
    app.post('/orders', (req, res) => {
      runs.count += 1;
      res.status(201).json({ order: crypto.randomUUID(), item: req.body.item });
    });
  }, options);
  return { base, runs };
}

test('two users (other Authorization), one key and one body: each runs the handler and gets its own order', async () => {
  const { base, runs } = await orderApp();
  const [alice, bob] = [bearer(), bearer()];
  const key = crypto.randomUUID();
  const first = await post(base, null, key, { item: 'book' }, { path: '/orders', headers: alice.headers });
  const second = await post(base, null, key, { item: 'book' }, { path: '/orders', headers: bob.headers });
  assert.equal(first.status, 201);
  assert.equal(second.status, 201);
  assert.equal(second.headers.get(REPLAYED), null, "bob never gets alice's stored response");
  assert.notEqual(JSON.parse(second.text).order, JSON.parse(first.text).order);
  assert.equal(runs.count, 2);
  const again = await post(base, null, key, { item: 'book' }, { path: '/orders', headers: alice.headers });
  assert.equal(again.headers.get(REPLAYED), 'true');
  assert.equal(again.text, first.text, 'alice still gets her own');
});

test('two session cookies, one key and one body: each runs the handler and gets its own order', async () => {
  const { base, runs } = await orderApp({ sessionCookie: 'sid' });
  const cookie = () => ({ cookie: `theme=dark; sid=s%3A${crypto.randomUUID()}.sig` });
  const [one, two] = [cookie(), cookie()];
  const key = crypto.randomUUID();
  const first = await post(base, null, key, { item: 'lamp' }, { path: '/orders', headers: one });
  const second = await post(base, null, key, { item: 'lamp' }, { path: '/orders', headers: two });
  assert.equal(second.status, 201);
  assert.equal(second.headers.get(REPLAYED), null);
  assert.notEqual(JSON.parse(second.text).order, JSON.parse(first.text).order);
  assert.equal(runs.count, 2);
  const client = defaultClient(one, 'sid');
  assert.match(client, /^cookie:[0-9a-f]{64}$/);
  assert.equal((await receiptOf(client, key)).key, claimKey(client, key));
});

test('requests without credentials share the anonymous key space: one key, one run', async () => {
  const { base, runs } = await orderApp();
  const key = crypto.randomUUID(); // anonymous callers need keys nobody can guess
  const first = await post(base, null, key, { item: 'pen' }, { path: '/orders' });
  const second = await post(base, null, key, { item: 'pen' }, { path: '/orders' });
  assert.equal(second.headers.get(REPLAYED), 'true');
  assert.equal(second.text, first.text);
  assert.equal(runs.count, 1);
  assert.equal((await receiptOf('anonymous', key)).key, `anonymous ${key}`);
});

test('a stored response never carries Set-Cookie or hop-by-hop headers, those Connection names included', async () => {
  const who = bearer();
  const base = await startAppWide(clients[0], (app) => {
    app.post('/orders', (req, res) => {
      res.cookie('session', 'secret-of-the-first-caller');
      res.set({ Connection: 'keep-alive, X-Hop', 'X-Hop': 'per-connection', 'Keep-Alive': 'timeout=5' });
      res.set({ 'Proxy-Status': 'edge', 'X-Order': 'ord-9' });
      res.status(201).json({ ok: true });
    });
  });
  const key = crypto.randomUUID();
  const first = await post(base, null, key, {}, { path: '/orders', headers: who.headers });
  assert.match(first.headers.get('set-cookie'), /session=/, 'the caller who made it gets its cookie');
  const stored = decodeResponse((await receiptOf(who.client, key)).response);
  const names = stored.headers.map(([name]) => name);
  assert.ok(names.includes('x-order'), names.join());
  for (const name of ['set-cookie', 'connection', 'x-hop', 'keep-alive', 'proxy-status']) {
    assert.ok(!names.includes(name), `${name} is not stored`);
  }
  const replay = await post(base, null, key, {}, { path: '/orders', headers: who.headers });
  assert.equal(replay.headers.get(REPLAYED), 'true');
  assert.equal(replay.headers.get('set-cookie'), null);
  assert.equal(replay.headers.get('x-hop'), null);
  assert.equal(replay.headers.get('x-order'), 'ord-9');
});

test('a replay drops Set-Cookie and hop-by-hop headers another writer stored', async () => {
  const who = bearer();
  const base = await startAppWide(clients[0], () => {});
  const key = crypto.randomUUID();
  const fingerprint = requestFingerprint('POST', '/orders', Buffer.from('{}'), 'application/json');
  const claimed = await clients[0].claim(NS, claimKey(who.client, key), fingerprint);
  assert.equal(claimed.decision, Decision.CLAIMED);
  const headers = [['content-type', 'application/json'], ['set-cookie', 'sid=theirs'],
    ['connection', 'x-hop'], ['x-hop', '1'], ['transfer-encoding', 'chunked'], ['x-order', '5']];
  const response = encodeResponse({ status: 201, headers, body: Buffer.from('{"id":5}') });
  await clients[0].complete(NS, claimed.receipt.key, claimed.claim_token, response);
  const replay = await post(base, null, key, {}, { path: '/orders', headers: who.headers });
  assert.equal(replay.status, 201);
  assert.equal(replay.text, '{"id":5}');
  assert.equal(replay.headers.get('x-order'), '5');
  for (const name of ['set-cookie', 'x-hop']) assert.equal(replay.headers.get(name), null, name);
});
