'use strict';
// What the express suites share (test/express*.test.js): the claimd clients of CLAIMD_ADDR
// or CLAIMD_ADDRS (closed after the file's tests), Express apps served on free loopback
// ports (closed likewise), `post` through fetch, and the problem-body assertion. Each test
// uses a tenant or credentials of its own, so the suites can run against a shared server.

const { after } = require('node:test');
const assert = require('node:assert/strict');
const crypto = require('node:crypto');
const net = require('node:net');
const { once } = require('node:events');
const express = require('express');
const { Claims } = require('@claimd/client');
const { idempotency, keepRawBody, claimKey, defaultClient } = require('@claimd/client/express');

const ADDRS = (process.env.CLAIMD_ADDRS || process.env.CLAIMD_ADDR || '')
  .split(',')
  .map((a) => a.trim())
  .filter(Boolean);
if (ADDRS.length === 0) {
  throw new Error('set CLAIMD_ADDR (one claimd) or CLAIMD_ADDRS (replicas, comma-separated)');
}

const NS = 'node-express';
const ROUTE = '/orders';
const JSON_TYPE = 'application/json';
/** One client per address; the apps and the direct calls use them in turn. */
const clients = ADDRS.map((addr) => new Claims(addr, { deadlineMs: 10_000 }));
const servers = [];
after(async () => {
  await Promise.all(servers.map(close));
  for (const client of clients) client.close();
});

/** A tenant no other test (or earlier run) uses, so its keys are its own. */
const uniqueTenant = (name) => `${name}-${crypto.randomUUID()}`;

/** A promise with its resolve function outside, to hold the handler at a known point. */
function gate() {
  let open;
  const opened = new Promise((resolve) => {
    open = resolve;
  });
  return { opened, open };
}

function close(server) {
  return new Promise((resolve) => {
    server.closeAllConnections();
    server.close(() => resolve());
  });
}

/** Serves `app` on a free loopback port; resolves to its base URL. */
async function serve(app) {
  const server = app.listen(0, '127.0.0.1');
  await once(server, 'listening');
  servers.push(server);
  return `http://127.0.0.1:${server.address().port}`;
}

/**
 * An Express app with `handler` behind the middleware on POST /orders and POST /payments
 * (and POST /optional, where the key is optional), talking to `claims`; the tenant comes
 * from the `X-Tenant` header. Resolves to its base URL.
 */
function startApp(claims, handler, options = {}) {
  const app = express();
  app.set('env', 'test'); // the default error handler does not print the handler's errors
  const json = express.json({ verify: keepRawBody, limit: '1mb' });
  const clientOf = (req) => req.get('x-tenant');
  const guard = (more) => idempotency({ claims, namespace: NS, clientOf, ...options, ...more });
  app.post(ROUTE, json, guard(), handler);
  app.post('/payments', json, guard(), handler);
  app.post('/optional', json, guard({ required: false }), handler);
  return serve(app);
}

/** Two apps, on the replicas in turn (both on the one claimd with CLAIMD_ADDR). */
function startApps(handler, options) {
  return Promise.all([0, 1].map((i) => startApp(clients[i % clients.length], handler, options)));
}

/**
 * An app as Express users write one: `express.json()` (no `verify`), the middleware with
 * app.use (the default scope unless `options` says otherwise), then what `routes(app)`
 * adds, then an error handler that answers `{ error: <class name> }` with the error's
 * status (500 by default). Resolves to its base URL.
 */
function startAppWide(claims, routes, options = {}) {
  const app = express();
  app.set('env', 'test');
  app.use(express.json());
  app.use(idempotency({ claims, namespace: NS, ...options }));
  routes(app);
  // eslint-disable-next-line no-unused-vars
  app.use((error, req, res, next) => {
    res.status(error.status || 500).json({ error: error.constructor.name });
  });
  return serve(app);
}

/** Two app-wide apps, on the replicas in turn. */
function startAppsWide(routes, options) {
  return Promise.all([0, 1].map((i) => startAppWide(clients[i % clients.length], routes, options)));
}

/** Credentials of a user of its own: its Authorization header and its default client. */
function bearer() {
  const authorization = `Bearer ${crypto.randomUUID()}`;
  return { headers: { authorization }, client: defaultClient({ authorization }) };
}

/**
 * POSTs `body` (JSON unless a string) as `tenant` (the X-Tenant header; none when null)
 * with `Idempotency-Key: "<key>"` (none when key is null; `raw: true` sends the key as it
 * is) and `headers` (Authorization, Cookie).
 */
async function post(base, tenant, key, body, { path: route = ROUTE, raw = false, headers: more = {} } = {}) {
  const headers = { 'content-type': JSON_TYPE, ...more };
  if (tenant !== null) headers['x-tenant'] = tenant;
  if (key !== null) headers['idempotency-key'] = raw ? key : `"${key}"`;
  const text = typeof body === 'string' ? body : JSON.stringify(body);
  const res = await fetch(base + route, { method: 'POST', headers, body: text });
  return { status: res.status, headers: res.headers, text: await res.text() };
}

/** The receipt the middleware keeps for the client's `key` (in namespace `ns`). */
function receiptOf(client, key, ns = NS) {
  return clients[0].get(ns, claimKey(client, key));
}

/** Asserts an application/problem+json answer of `code` with `status`. */
function assertProblem(answer, expected, code) {
  assert.equal(answer.status, expected, answer.text);
  assert.match(answer.headers.get('content-type'), /^application\/problem\+json/);
  const problem = JSON.parse(answer.text);
  assert.equal(problem.status, expected);
  assert.equal(problem.code, code);
  assert.equal(typeof problem.title, 'string');
  return problem;
}

/** A Claims client of a loopback port nobody listens on: claimd down. */
async function downClaims() {
  const probe = net.createServer().listen(0, '127.0.0.1');
  await once(probe, 'listening');
  const { port } = probe.address();
  await new Promise((resolve) => probe.close(resolve));
  return new Claims(`127.0.0.1:${port}`, { deadlineMs: 2_000 });
}

module.exports = {
  ADDRS,
  NS,
  ROUTE,
  JSON_TYPE,
  clients,
  uniqueTenant,
  gate,
  serve,
  startApp,
  startApps,
  startAppWide,
  startAppsWide,
  bearer,
  post,
  receiptOf,
  assertProblem,
  downClaims,
};
