'use strict';
// The example's wiring (idempotency.js) through real HTTP and a real claimd:
// `CLAIMD_ADDR=127.0.0.1:50051 node --test test/idempotency.test.js`. The middleware's own
// suite is the package's (clients/node/test/express.test.js); this one checks the example
// app uses it: a retry replays, another body is 422, a missing key 400.

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

test('the example app runs an order once per key and replays it', async () => {
  const orders = [];
  const app = createApp({
    claims,
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
  const user = `user-${crypto.randomUUID()}`;
  const send = async (key, body) => {
    const headers = { 'content-type': 'application/json', 'x-api-user': user };
    if (key) headers['idempotency-key'] = key;
    const res = await fetch(url, { method: 'POST', headers, body });
    return { status: res.status, replayed: res.headers.get('idempotent-replayed'), text: await res.text() };
  };

  const key = `order-${crypto.randomUUID()}`;
  const first = await send(key, '{"item": "book"}');
  assert.equal(first.status, 201, first.text);
  const again = await send(key, '{ "item":"book" }');
  assert.equal(again.status, 201);
  assert.equal(again.replayed, 'true');
  assert.equal(again.text, first.text);
  assert.equal(orders.length, 1);

  assert.equal((await send(key, '{"item": "pen"}')).status, 422);
  assert.equal((await send(null, '{"item": "pen"}')).status, 400);
  assert.equal(orders.length, 1);
});
