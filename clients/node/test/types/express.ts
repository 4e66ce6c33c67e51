// A typed use of @claimd/client/express with Express's own types, checked with `tsc --noEmit
// -p test/types` (strict mode) against the package's declarations: nothing here runs. The
// `@ts-expect-error` lines are misuses the declarations must reject.

import express = require('express');
import type { Request, Response } from 'express';
import { Claims } from '@claimd/client';
import {
  claimKey,
  decodeResponse,
  defaultClient,
  idempotency,
  keepRawBody,
  parseKey,
  requestFingerprint,
  DEFAULT_MAX_RESPONSE_BYTES,
  REPLAYED,
} from '@claimd/client/express';
import type { IdempotencyInfo, IdempotencyOptions, StoredResponse } from '@claimd/client/express';

const claims = new Claims('127.0.0.1:50051');
const app = express();

// The three-line integration.
app.post(
  '/orders',
  express.json({ verify: keepRawBody }),
  idempotency({ claims, namespace: 'orders-api' }),
  async (req: Request, res: Response) => {
    const info: IdempotencyInfo | undefined = req.idempotency;
    const raw: Buffer | undefined = req.rawBody;
    res.status(201).json({ attempt: info?.attempt ?? 0, bytes: raw?.length ?? 0, aborted: info?.signal.aborted });
  },
);

// App-wide, after express.json() (no verify), with the default scope on a session cookie.
app.use(express.json());
app.use(idempotency({ claims, namespace: 'orders-api', sessionCookie: 'sid', paths: ['/orders'] }));

// Every option; clientOf over Express's own Request.
const options: IdempotencyOptions<Request> = {
  claims,
  namespace: 'payments-api',
  required: false,
  waitMs: 5_000,
  leaseMs: 10_000,
  clientOf: (req) => req.get('x-tenant') ?? '',
  maxResponseBytes: 16_384,
  retryAfterMs: 2_000,
  retryServerErrors: true,
  canonicalJson: false,
  methods: ['POST', 'PUT'],
  docsUrl: 'https://example.com/docs/idempotency',
};
const router = express.Router();
router.put('/payments/:id', express.raw({ type: '*/*' }), idempotency(options), (req, res) => {
  res.send(req.params.id);
});
app.use(router);

/** The helpers. */
export function helpers(bytes: Buffer): number {
  const key: string | null = parseKey('"abc"');
  const client: string = defaultClient({ authorization: 'Bearer t', cookie: ['sid=1'] }, 'sid');
  const claim: string = claimKey(client, key ?? 'k');
  const fingerprint: Buffer = requestFingerprint('POST', '/orders', bytes, 'application/json');
  const stored: StoredResponse | null = decodeResponse(bytes);
  const header: string = REPLAYED;
  void [claim, fingerprint, header];
  return (stored?.body?.length ?? stored?.bytes ?? 0) + DEFAULT_MAX_RESPONSE_BYTES;
}

/** Misuses the declarations reject. */
export function misuse(): void {
  // @ts-expect-error: the namespace is required
  idempotency({ claims });
  // @ts-expect-error: maxResponseBytes is a number of bytes
  idempotency({ claims, namespace: 'ns', maxResponseBytes: '64k' });
  // @ts-expect-error: the client is a string
  idempotency<Request>({ claims, namespace: 'ns', clientOf: (req) => req.ips.length });
  // @ts-expect-error: paths is a list of prefixes
  idempotency({ claims, namespace: 'ns', paths: '/orders' });
  // @ts-expect-error: retryServerErrors is a boolean
  idempotency({ claims, namespace: 'ns', retryServerErrors: 'yes' });
}
