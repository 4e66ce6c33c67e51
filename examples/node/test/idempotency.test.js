'use strict';
// The example's wiring (idempotency.js) through real HTTP and a real claimd:
// `CLAIMD_ADDR=127.0.0.1:50051 node --test test/idempotency.test.js`. The middleware's own
// suites are the package's (clients/node/test/express*.test.js); this one checks the
// example app uses it as documented: mounted with app.use, keys scoped by the signed-in
// user (a retry after a token refresh replays; another user's same key runs anew), another
// body 422, a missing key 400, no sign-in 401.

require('./package-current');
const { test, after } = require('node:test');
const assert = require('node:assert/strict');
const crypto = require('node:crypto');
const { once } = require('node:events');
const { Claims } = require('@claimd/client');
const { createApp } = require('../idempotency');

const ADDR = process.env.CLAIMD_ADDR;
if (!ADDR) throw new Error('set CLAIMD_ADDR to the host:port of a claimd serving anonymously');
const claims = new Claims(ADDR, { deadlineMs: 10_000 });
const servers = [];
after(() => {
  for (const server of servers) {
    server.closeAllConnections();
    server.close();
  }
  claims.close();
});

/** The example app on a free port, with its orders; resolves to a `send` for its POST /orders. */
async function start(tokens) {
  const orders = [];
  const app = createApp({
    claims,
    tokens,
    namespace: 'node-example-orders',
    create: async (body) => {
      const order = { id: crypto.randomUUID(), item: body.item };
      orders.push(order);
      return order;
    },
  });
  const server = app.listen(0, '127.0.0.1');
  await once(server, 'listening');
  servers.push(server);
  const url = `http://127.0.0.1:${server.address().port}/orders`;
  const send = async (token, key, body) => {
    const headers = { 'content-type': 'application/json' };
    if (token) headers.authorization = `Bearer ${token}`;
    if (key) headers['idempotency-key'] = key;
    const res = await fetch(url, { method: 'POST', headers, body });
    return { status: res.status, replayed: res.headers.get('idempotent-replayed'), text: await res.text() };
  };
  return { send, orders };
}

test('the example app runs an order once per key and replays it', async () => {
  const token = crypto.randomUUID();
  const { send, orders } = await start(new Map([[token, { id: `user-${crypto.randomUUID()}` }]]));
  const key = `order-${crypto.randomUUID()}`;
  const first = await send(token, key, '{"item": "book"}');
  assert.equal(first.status, 201, first.text);
  const again = await send(token, key, '{ "item":"book" }');
  assert.equal(again.status, 201);
  assert.equal(again.replayed, 'true');
  assert.equal(again.text, first.text);
  assert.equal(orders.length, 1);

  assert.equal((await send(token, key, '{"item": "pen"}')).status, 422);
  assert.equal((await send(token, null, '{"item": "pen"}')).status, 400);
  assert.equal((await send(null, key, '{"item": "book"}')).status, 401);
  assert.equal(orders.length, 1);
});

test("keys are the signed-in user's: a new token of the same user replays, another user runs anew", async () => {
  const alice = { id: `alice-${crypto.randomUUID()}` };
  const bob = { id: `bob-${crypto.randomUUID()}` };
  const [old, refreshed, bobs] = [crypto.randomUUID(), crypto.randomUUID(), crypto.randomUUID()];
  const { send, orders } = await start(new Map([[old, alice], [refreshed, alice], [bobs, bob]]));
  const key = `order-${crypto.randomUUID()}`;
  const first = await send(old, key, '{"item": "lamp"}');
  assert.equal(first.status, 201, first.text);
  const retry = await send(refreshed, key, '{"item": "lamp"}');
  assert.equal(retry.replayed, 'true', "alice's retry after a token refresh finds her key");
  assert.equal(retry.text, first.text);
  const other = await send(bobs, key, '{"item": "lamp"}');
  assert.equal(other.status, 201);
  assert.equal(other.replayed, null, "bob never gets alice's order");
  assert.notEqual(JSON.parse(other.text).id, JSON.parse(first.text).id);
  assert.equal(orders.length, 2);
});
