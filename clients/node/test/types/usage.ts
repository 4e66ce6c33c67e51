// A typed use of @claimd/client, checked with `tsc --noEmit -p test/types` (strict mode)
// against the package's declarations: nothing here runs. The `@ts-expect-error` lines are
// misuses the declarations must reject; were a declaration `any`, tsc would report the
// directive unused and fail.

import {
  Claims,
  ClaimdError,
  Decision,
  Outcome,
  PermanentError,
  QuotaError,
  State,
  credentials,
  fingerprintOf,
  status,
  toDate,
  VERSION,
} from '@claimd/client';
import type {
  ClaimResponse,
  DecisionName,
  FieldViolation,
  ListResponse,
  Receipt,
  RunResult,
  WorkContext,
} from '@claimd/client';

const claims = new Claims('127.0.0.1:50051', {
  apiKey: 'from the environment',
  credentials: credentials.createInsecure(),
  deadlineMs: 5_000,
});

/** A webhook route: every decision handled, the stored response replayed. */
export async function handle(eventId: string, body: Buffer): Promise<{ status: number; body: Buffer | string }> {
  const outcome: RunResult = await claims.run(
    'stripe-webhooks',
    eventId,
    fingerprintOf(body),
    async (ctx: WorkContext) => {
      const attempt: number = ctx.attempt;
      const resumed: Buffer = ctx.receipt.checkpoint;
      if (ctx.signal.aborted || ctx.lost) throw new PermanentError('gone', { cause: resumed });
      await ctx.checkpoint(`step ${attempt}`);
      return JSON.stringify({ ok: true });
    },
    { leaseMs: 30_000, recoveryPayload: body, deliveryAttempt: 1, waitMs: 0, heartbeatMs: 10_000 },
  );
  switch (outcome.decision) {
    case Decision.CLAIMED:
      if (outcome.outcome === Outcome.COMPLETED) return { status: 200, body: outcome.response };
      return { status: outcome.outcome === 'lost' ? 409 : 500, body: String(outcome.error) };
    case Decision.COMPLETED:
      return { status: 200, body: outcome.response ?? '' };
    case Decision.IN_FLIGHT:
    case Decision.RETRY_SCHEDULED:
    case Decision.QUARANTINED:
    case Decision.CONFLICT:
      return { status: 409, body: outcome.receipt.last_error };
    default: {
      const never: never = outcome;
      return never;
    }
  }
}

/** The low-level calls, with a wait, and an error's BadRequest field. */
export async function lowLevel(): Promise<void> {
  const answer: ClaimResponse = await claims.claim('ns', 'key', 'fp', { leaseMs: 1_000, waitMs: 5_000 });
  const decision: DecisionName = answer.decision;
  if (decision === Decision.CLAIMED) {
    const receipt: Receipt = await claims.heartbeat('ns', 'key', answer.claim_token, { checkpoint: 'half' });
    const due: Date | null = toDate(receipt.lease_expires_at);
    await claims.retry('ns', 'key', answer.claim_token, 'busy', { retryAfterMs: 1_000, countAttempt: false });
    await claims.quarantine('ns', 'key', answer.claim_token, new Error('poison'));
    await claims.complete('ns', 'key', answer.claim_token, Buffer.from([1, 2]));
    void due;
  }
  const page: ListResponse = await claims.list({ namespace: 'ns', states: [State.QUARANTINED], pageSize: 10 });
  for (const dead of page.receipts) await claims.redrive(dead.namespace, dead.key);
  const orphans = await claims.listOrphaned({ overdueByMs: 60_000, pageToken: page.next_page_token });
  const first: string | undefined = orphans.orphans[0]?.reason;
  void first;
  try {
    await claims.get('ns', '');
  } catch (error) {
    if (error instanceof ClaimdError && error.code === status.INVALID_ARGUMENT) {
      const field: string | null = error.field;
      const violations: FieldViolation[] = error.violations;
      void [field, violations, error.codeName, error.rpc];
    }
  }
  try {
    await claims.claim('ns', 'key', fingerprintOf('body'));
  } catch (error) {
    if (error instanceof QuotaError) {
      const quota: string = error.quota;
      const retryAfterMs: number = error.retryAfterMs;
      const isClaimdError: ClaimdError = error;
      void [quota, retryAfterMs, isClaimdError];
    }
  }
  const version: string = VERSION;
  void version;
  claims.close();
}

/** Misuses the declarations reject. */
export async function misuse(): Promise<void> {
  // @ts-expect-error: there is no such decision
  const wrong: DecisionName = 'DECISION_MAYBE';
  // @ts-expect-error: leaseMs is a number of milliseconds
  await claims.claim('ns', 'key', 'fp', { leaseMs: '30s' });
  // @ts-expect-error: a fingerprint is bytes, not a number
  await claims.claim('ns', 'key', 42);
  // @ts-expect-error: the work's result is bytes or nothing
  await claims.run('ns', 'key', 'fp', async () => 42);
  const receipt = await claims.get('ns', 'key');
  // @ts-expect-error: receipts use the proto's field names
  void receipt.leaseExpiresAt;
  // @ts-expect-error: the client has no Delete call
  await claims.delete('ns', 'key');
  void wrong;
}
