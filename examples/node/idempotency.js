'use strict';
// The example's Express app: POST /orders behind the Idempotency-Key header, on claimd.
// The middleware is the package's (`require('@claimd/client/express')`, documented in
// clients/node/README.md); this file is only the wiring a service writes.
//
//   CLAIMD_ADDR=127.0.0.1:50051 PORT=3000 node idempotency.js
//   curl -X POST localhost:3000/orders -H 'Idempotency-Key: order-123' \
//     -H 'Content-Type: application/json' -d '{"item":"book"}'

const crypto = require('node:crypto');
const express = require('express');
const { Claims } = require('@claimd/client');
const { idempotency, keepRawBody } = require('@claimd/client/express');

/** Stands in for the service's real work: one new order per call. */
async function createOrder(body) {
  return { id: crypto.randomUUID(), item: body.item };
}

/**
 * The app: `claims` is the claimd client, `create` the work (default: createOrder). The
 * client of a request is the `X-Api-User` header here; a real service takes it from its
 * authentication (`req.user.id`), since keys are only unique per client.
 */
function createApp({ claims, create = createOrder, namespace = 'orders-api' }) {
  const app = express();
  app.post(
    '/orders',
    express.json({ verify: keepRawBody }), // the fingerprint needs the exact body bytes
    idempotency({ claims, namespace, clientOf: (req) => req.get('x-api-user') || '' }),
    async (req, res) => {
      const order = await create(req.body); // req.idempotency.attempt: 1, 2 after a takeover
      res.status(201).set('Location', `/orders/${order.id}`).json(order);
    },
  );
  return app;
}

if (require.main === module) {
  const claims = new Claims(process.env.CLAIMD_ADDR || '127.0.0.1:50051');
  createApp({ claims }).listen(Number(process.env.PORT || 3000), '127.0.0.1');
}

module.exports = { createApp, createOrder };
