'use strict';
// The example's Express app: POST /orders behind the Idempotency-Key header, on claimd,
// mounted app-wide. The middleware is the package's (`require('@claimd/client/express')`,
// documented in clients/node/README.md); this file is only the wiring a service writes.
//
//   CLAIMD_ADDR=127.0.0.1:50051 PORT=3000 node idempotency.js
//   curl -X POST localhost:3000/orders -H 'Authorization: Bearer demo-token' \
//     -H 'Idempotency-Key: order-123' -H 'Content-Type: application/json' -d '{"item":"book"}'

const crypto = require('node:crypto');
const express = require('express');
const { Claims } = require('@claimd/client');
const { idempotency } = require('@claimd/client/express');

/** Stands in for the service's real work: one new order per call. */
async function createOrder(body) {
  return { id: crypto.randomUUID(), item: body.item };
}

/**
 * Stands in for the service's sign-in: `req.user` is the user whose API token the
 * Authorization header carries (`tokens`: token → user; a real service checks a session or
 * verifies a signed token here). 401 without a known token.
 */
function authenticate(tokens) {
  return (req, res, next) => {
    const header = req.get('authorization') || '';
    const user = header.startsWith('Bearer ') ? tokens.get(header.slice('Bearer '.length)) : undefined;
    if (!user) return res.status(401).json({ error: 'sign in first' });
    req.user = user;
    return next();
  };
}

/**
 * The app: `claims` is the claimd client, `tokens` the users' API tokens, `create` the work
 * (default: createOrder). Keys belong to the signed-in user (`req.user.id`), never to a
 * header a caller could copy: a user's token may change (a refresh) and a retry still
 * finds its key.
 */
function createApp({ claims, tokens, create = createOrder, namespace = 'orders-api' }) {
  const app = express();
  app.use(express.json());
  app.use(authenticate(tokens));
  app.use(idempotency({ claims, namespace, clientOf: (req) => req.user.id, paths: ['/orders'] }));
  app.post('/orders', async (req, res) => {
    const order = await create(req.body); // req.idempotency.attempt: 1, 2 after a takeover
    res.status(201).set('Location', `/orders/${order.id}`).json(order);
  });
  return app;
}

if (require.main === module) {
  const claims = new Claims(process.env.CLAIMD_ADDR || '127.0.0.1:50051');
  const tokens = new Map([['demo-token', { id: 'demo-user' }]]);
  createApp({ claims, tokens }).listen(Number(process.env.PORT || 3000), '127.0.0.1');
}

module.exports = { createApp, createOrder, authenticate };
