'use strict';
// claimd for Node.js: one file to copy into a service, next to a package.json that depends
// on @grpc/grpc-js and @grpc/proto-loader.
//
//   const { Claims, PermanentError } = require('./claimd');
//   const claims = new Claims('127.0.0.1:50051', { apiKey: process.env.CLAIMD_API_KEY });
//   const outcome = await claims.run('slack-events', eventId, fingerprintOf(body),
//     async (ctx) => replyBytes, { leaseMs: 30_000, recoveryPayload: body });
//
// `run` claims the event; when this caller wins it runs the work with a heartbeat every
// third of the lease, then settles the receipt exactly once: Complete with the work's
// result, Retry when the work throws, Quarantine when it throws a PermanentError. Every
// other decision (IN_FLIGHT, COMPLETED, RETRY_SCHEDULED, QUARANTINED, CONFLICT) comes back
// at once, with the stored response for a replay.
//
// Messages (receipts, Claim answers) use the proto's own field names (`claim_token`,
// `lease_expires_at`, `last_error`), as grpcurl and the contract do; enums are their names
// as strings ('DECISION_CLAIMED', 'STATE_COMPLETED'), 64-bit integers are strings, bytes
// are Buffers, and unset fields have their defaults (unset timestamps are null).
//
// Nothing here logs. Errors name the RPC, the status code and claimd's message — never a
// claim token, an API key or a payload.

const crypto = require('node:crypto');
const path = require('node:path');
const grpc = require('@grpc/grpc-js');
const protoLoader = require('@grpc/proto-loader');

/** Decision names, as Claim answers them. */
const Decision = Object.freeze({
  CLAIMED: 'DECISION_CLAIMED',
  IN_FLIGHT: 'DECISION_IN_FLIGHT',
  COMPLETED: 'DECISION_COMPLETED',
  RETRY_SCHEDULED: 'DECISION_RETRY_SCHEDULED',
  QUARANTINED: 'DECISION_QUARANTINED',
  CONFLICT: 'DECISION_CONFLICT',
});

/** Receipt state names. */
const State = Object.freeze({
  PROCESSING: 'STATE_PROCESSING',
  RETRY_WAIT: 'STATE_RETRY_WAIT',
  COMPLETED: 'STATE_COMPLETED',
  QUARANTINED: 'STATE_QUARANTINED',
});

/** What `run` did with a claim it won. */
const Outcome = Object.freeze({
  COMPLETED: 'completed',
  RETRIED: 'retried',
  QUARANTINED: 'quarantined',
  LOST: 'lost',
});

/** Where the proto files are by default: `proto/` at the root of the claimd repository. */
const DEFAULT_PROTO_DIR = path.join(__dirname, '..', '..', 'proto');
/** The per-call deadline unless one is given. */
const DEFAULT_DEADLINE_MS = 5_000;
/** The longest error text sent to Retry or Quarantine (claimd allows 64 KiB). */
const MAX_ERROR_BYTES = 4_096;
/** Status codes that mean "this claim token is no longer yours": stop working. */
const LOST_CODES = new Set([
  grpc.status.ABORTED,
  grpc.status.FAILED_PRECONDITION,
  grpc.status.NOT_FOUND,
]);

const STATUS_NAMES = Object.fromEntries(
  Object.entries(grpc.status).map(([name, code]) => [code, name]),
);

/**
 * A gRPC error from claimd: `code` is the numeric status (compare with `grpc.status.*`),
 * `codeName` its name ('ABORTED'), `details` claimd's message, `rpc` the method.
 */
class ClaimdError extends Error {
  constructor(rpc, source) {
    const code = typeof source.code === 'number' ? source.code : grpc.status.UNKNOWN;
    const codeName = STATUS_NAMES[code] || 'UNKNOWN';
    const details = source.details || source.message || '';
    super(`claimd ${rpc}: ${codeName}: ${details}`);
    this.name = 'ClaimdError';
    this.rpc = rpc;
    this.code = code;
    this.codeName = codeName;
    this.details = details;
  }
}

/**
 * Thrown by the work when retrying cannot help (a poison event, a validation failure):
 * `run` quarantines the receipt instead of scheduling a retry. Any error with
 * `permanent === true` counts as well.
 */
class PermanentError extends Error {
  constructor(message, options) {
    super(message, options);
    this.name = 'PermanentError';
    this.permanent = true;
  }
}

const services = new Map();

/** The ClaimService client constructor for the protos under `protoDir` (loaded once). */
function loadService(protoDir) {
  let service = services.get(protoDir);
  if (!service) {
    const definition = protoLoader.loadSync('claimd/v1/claims.proto', {
      includeDirs: [protoDir],
      keepCase: true,
      longs: String,
      enums: String,
      bytes: Buffer,
      defaults: true,
      oneofs: true,
    });
    service = grpc.loadPackageDefinition(definition).claimd.v1.ClaimService;
    services.set(protoDir, service);
  }
  return service;
}

/** SHA-256 of `body` (a Buffer or a string): a fingerprint for Claim. */
function fingerprintOf(body) {
  return crypto.createHash('sha256').update(body).digest();
}

/** A google.protobuf.Duration for `ms` milliseconds, or undefined. */
function duration(ms) {
  if (ms === undefined || ms === null) return undefined;
  if (!Number.isFinite(ms) || ms < 0) {
    throw new TypeError('a duration must be a number of milliseconds >= 0');
  }
  const whole = Math.round(ms);
  return { seconds: String(Math.floor(whole / 1000)), nanos: (whole % 1000) * 1e6 };
}

/** Milliseconds since the epoch of a google.protobuf.Timestamp, or null when unset. */
function timestampMs(ts) {
  if (!ts) return null;
  return Number(ts.seconds) * 1000 + Math.floor(ts.nanos / 1e6);
}

/** A Date for a google.protobuf.Timestamp, or null when unset. */
function toDate(ts) {
  const ms = timestampMs(ts);
  return ms === null ? null : new Date(ms);
}

/** Bytes from a Buffer, a Uint8Array or a string (UTF-8); null and undefined are empty. */
function toBytes(value, what) {
  if (value === undefined || value === null) return Buffer.alloc(0);
  if (Buffer.isBuffer(value)) return value;
  if (value instanceof Uint8Array) return Buffer.from(value.buffer, value.byteOffset, value.byteLength);
  if (typeof value === 'string') return Buffer.from(value, 'utf8');
  throw new TypeError(`${what} must be a Buffer, a Uint8Array or a string`);
}

/** The text for Retry and Quarantine: the error's name and message, cut to fit. */
function errorText(error) {
  let text;
  if (error instanceof Error) {
    text = error.message ? `${error.name}: ${error.message}` : error.name;
  } else {
    text = String(error);
  }
  const bytes = Buffer.from(text, 'utf8');
  // Cutting inside a character leaves U+FFFD at the end; still valid UTF-8.
  return bytes.length <= MAX_ERROR_BYTES ? text : bytes.subarray(0, MAX_ERROR_BYTES).toString('utf8');
}

function isPermanent(error) {
  if (error instanceof PermanentError) return true;
  return error !== null && typeof error === 'object' && error.permanent === true;
}

function isLost(error) {
  return error instanceof ClaimdError && LOST_CODES.has(error.code);
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Keeps one won claim alive: a Heartbeat every `intervalMs` until stopped or lost. A
 * Heartbeat answered ABORTED, FAILED_PRECONDITION or NOT_FOUND means the token is no
 * longer current (somebody took the work over): the lease is lost and the signal aborts.
 * Other failures (UNAVAILABLE, a deadline) are tried again at the next beat.
 */
class Lease {
  constructor(claims, namespace, key, token, leaseMs, intervalMs, deadlineMs) {
    this.claims = claims;
    this.namespace = namespace;
    this.key = key;
    this.token = token;
    this.leaseMs = leaseMs;
    this.intervalMs = intervalMs;
    this.deadlineMs = deadlineMs;
    this.controller = new AbortController();
    this.timer = null;
    this.inflight = null;
    this.stopped = false;
  }

  get lost() {
    return this.controller.signal.aborted;
  }

  start() {
    this.schedule();
  }

  schedule() {
    if (this.stopped || this.lost) return;
    this.timer = setTimeout(() => {
      this.timer = null;
      this.inflight = this.beat().finally(() => {
        this.inflight = null;
        this.schedule();
      });
    }, this.intervalMs);
  }

  /** One Heartbeat; `checkpoint` (optional) is stored with it. Resolves to the receipt. */
  async beat(checkpoint) {
    try {
      return await this.claims.heartbeat(this.namespace, this.key, this.token, {
        leaseMs: this.leaseMs,
        checkpoint,
        deadlineMs: this.deadlineMs,
      });
    } catch (error) {
      if (isLost(error)) this.markLost(error);
      if (checkpoint !== undefined) throw error;
      return null;
    }
  }

  markLost(error) {
    if (!this.lost) this.controller.abort(error);
  }

  /** Stops the heartbeats and waits for one in flight (it may report the lease lost). */
  async stop() {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    if (this.inflight) await this.inflight;
  }
}

/** A ClaimService client that sends the API key (if any) with every call. */
class Claims {
  /**
   * @param {string} address `host:port` of claimd, e.g. '127.0.0.1:50051'.
   * @param {object} [options]
   * @param {string} [options.apiKey] sent as `authorization: Bearer <key>` on every call.
   * @param {grpc.ChannelCredentials} [options.credentials] default: plaintext
   *   (`grpc.credentials.createInsecure()`); use `grpc.credentials.createSsl(...)` for TLS.
   * @param {string} [options.protoDir] the directory holding `claimd/v1/claims.proto`;
   *   default `../../proto` from this file (the claimd repository's `proto/`).
   * @param {number} [options.deadlineMs] the deadline of each call (default 5000).
   * @param {object} [options.channelOptions] passed to the grpc-js client.
   */
  constructor(address, options = {}) {
    const Service = loadService(path.resolve(options.protoDir || DEFAULT_PROTO_DIR));
    this.client = new Service(
      address,
      options.credentials || grpc.credentials.createInsecure(),
      options.channelOptions || {},
    );
    this.deadlineMs = options.deadlineMs ?? DEFAULT_DEADLINE_MS;
    // Not enumerable: the key must not show up when the client is logged or inspected.
    Object.defineProperty(this, 'apiKey', { value: options.apiKey, enumerable: false });
  }

  /** Closes the channel. */
  close() {
    this.client.close();
  }

  /** One unary call with the API key and a deadline; rejects with a ClaimdError. */
  call(rpc, request, deadlineMs) {
    const metadata = new grpc.Metadata();
    if (this.apiKey) metadata.set('authorization', `Bearer ${this.apiKey}`);
    const deadline = Date.now() + (deadlineMs ?? this.deadlineMs);
    return new Promise((resolve, reject) => {
      this.client[rpc](request, metadata, { deadline }, (error, response) => {
        if (error) reject(new ClaimdError(rpc, error));
        else resolve(response);
      });
    });
  }

  /**
   * Claim: may this caller do the work for (namespace, key)? Resolves to the ClaimResponse
   * `{decision, claim_token, receipt}`; `claim_token` is set only for DECISION_CLAIMED.
   * @param {Buffer|string} fingerprint your digest of the payload (≤ 64 bytes).
   * @param {object} [options] `leaseMs` (unset: the namespace's default), `recoveryPayload`
   *   (bytes returned to whoever takes the work over), `deliveryAttempt` (the platform's
   *   retry number, a hint only), `waitMs` (0 to 60000: when the answer would be
   *   DECISION_IN_FLIGHT, claimd holds the call until the receipt settles and answers what
   *   a Claim decides then, or IN_FLIGHT once the wait is over), `deadlineMs` (default: the
   *   client's deadline, plus `waitMs` when waiting).
   */
  async claim(namespace, key, fingerprint, options = {}) {
    const request = {
      namespace,
      key,
      fingerprint: toBytes(fingerprint, 'fingerprint'),
      lease_ttl: duration(options.leaseMs),
      recovery_payload: toBytes(options.recoveryPayload, 'recoveryPayload'),
      delivery_attempt: options.deliveryAttempt || 0,
    };
    let deadlineMs = options.deadlineMs;
    if (options.waitMs) {
      request.wait = duration(options.waitMs);
      deadlineMs ??= this.deadlineMs + options.waitMs;
    }
    return this.call('Claim', request, deadlineMs);
  }

  /** Complete: the work is done; `response` is replayed to duplicates. Resolves to the receipt. */
  async complete(namespace, key, claimToken, response, options = {}) {
    const request = { namespace, key, claim_token: claimToken, response: toBytes(response, 'response') };
    return (await this.call('Complete', request, options.deadlineMs)).receipt;
  }

  /**
   * Heartbeat: extends the lease to now + `leaseMs` (unset: the namespace's default) and,
   * with `checkpoint`, stores progress bytes that survive retries and takeovers. Resolves
   * to the receipt; ABORTED means somebody took the work over.
   */
  async heartbeat(namespace, key, claimToken, options = {}) {
    const request = { namespace, key, claim_token: claimToken, lease_ttl: duration(options.leaseMs) };
    if (options.checkpoint != null) request.checkpoint = toBytes(options.checkpoint, 'checkpoint');
    return (await this.call('Heartbeat', request, options.deadlineMs)).receipt;
  }

  /**
   * Retry: gives the work back, to be claimed again after `retryAfterMs` (unset: the
   * namespace's backoff). `countAttempt: false` leaves the attempt budget as it is (the
   * platform said "wait", e.g. HTTP 429). Resolves to the receipt (RETRY_WAIT, or
   * QUARANTINED when the budget is spent).
   */
  async retry(namespace, key, claimToken, error, options = {}) {
    const request = {
      namespace,
      key,
      claim_token: claimToken,
      error: String(error ?? ''),
      retry_after: duration(options.retryAfterMs),
    };
    if (options.countAttempt !== undefined) request.count_attempt = Boolean(options.countAttempt);
    return (await this.call('Retry', request, options.deadlineMs)).receipt;
  }

  /** Quarantine: the event is poison; the receipt becomes a dead letter. Resolves to the receipt. */
  async quarantine(namespace, key, claimToken, error, options = {}) {
    const request = { namespace, key, claim_token: claimToken, error: String(error ?? '') };
    return (await this.call('Quarantine', request, options.deadlineMs)).receipt;
  }

  /** Get: the receipt as this caller's tenant sees it (NOT_FOUND when there is none). */
  async get(namespace, key, options = {}) {
    return (await this.call('Get', { namespace, key }, options.deadlineMs)).receipt;
  }

  /**
   * Claims (namespace, key) and, when this caller wins, runs `work(ctx)` under a lease kept
   * alive in the background, then settles the receipt exactly once.
   *
   * `work(ctx)` resolves to the response to store (a Buffer, a Uint8Array, a string or
   * nothing). `ctx` holds `namespace`, `key`, `attempt` (the fencing number), `receipt`
   * (the claim's receipt: after a takeover its `checkpoint` and `recovery_payload`),
   * `signal` (an AbortSignal aborted when the lease is lost), `lost` (the same as a
   * boolean) and `checkpoint(bytes)` (stores progress now; resolves to the receipt).
   *
   * Resolves to
   * - `{decision, receipt, response}` for every decision but CLAIMED: `response` is the
   *   stored response (a Buffer) for DECISION_COMPLETED, null otherwise;
   * - `{decision: 'DECISION_CLAIMED', outcome, receipt, response, error}` when this caller
   *   won: outcome 'completed' (`response` is what the work returned), 'retried' (the work
   *   threw; `error`), 'quarantined' (it threw a PermanentError; `error`) or 'lost' (the
   *   lease was taken over: nothing was settled, `receipt` is the claim's).
   *
   * Rejects with a ClaimdError when Claim fails (UNAVAILABLE: reply 503) or when settling
   * fails for another reason than a lost lease.
   *
   * @param {object} [options] `leaseMs` (unset: the namespace's default), `recoveryPayload`,
   *   `deliveryAttempt`, `waitMs` (the Claim's wait, see `claim`), `deadlineMs` (each
   *   call), `heartbeatMs` (default: a third of the lease), `retryAfterMs` (default for a
   *   failed work; an error's own `retryAfterMs` and `countAttempt` properties win).
   */
  async run(namespace, key, fingerprint, work, options = {}) {
    if (typeof work !== 'function') throw new TypeError('work must be a function');
    const answer = await this.claim(namespace, key, fingerprint, options);
    const { decision, receipt } = answer;
    if (decision !== Decision.CLAIMED) {
      return { decision, receipt, response: decision === Decision.COMPLETED ? receipt.response : null };
    }

    const leaseMs = options.leaseMs ?? leaseOf(receipt);
    const lease = new Lease(
      this,
      namespace,
      key,
      answer.claim_token,
      options.leaseMs, // unset: every heartbeat asks for the namespace's default again
      options.heartbeatMs ?? Math.max(1, Math.floor(leaseMs / 3)),
      options.deadlineMs,
    );
    const ctx = {
      namespace,
      key,
      attempt: receipt.attempt,
      receipt,
      signal: lease.controller.signal,
      get lost() {
        return lease.lost;
      },
      checkpoint: (bytes) => lease.beat(toBytes(bytes, 'checkpoint')),
    };
    lease.start();

    let response;
    let failure;
    let failed = false;
    try {
      response = toBytes(await work(ctx), "the work's result");
    } catch (error) {
      failed = true;
      failure = error;
    }
    await lease.stop();

    const lost = () => ({
      decision,
      outcome: Outcome.LOST,
      receipt,
      response: null,
      error: failed ? failure : lease.controller.signal.reason,
    });
    if (lease.lost) return lost();
    const settle = { deadlineMs: options.deadlineMs };
    const token = answer.claim_token;
    try {
      if (!failed) {
        const done = await this.completeWithRetries(namespace, key, token, response, settle);
        return { decision, outcome: Outcome.COMPLETED, receipt: done, response, error: null };
      }
      if (isPermanent(failure)) {
        const dead = await this.quarantine(namespace, key, token, errorText(failure), settle);
        return { decision, outcome: Outcome.QUARANTINED, receipt: dead, response: null, error: failure };
      }
      const waiting = await this.retry(namespace, key, token, errorText(failure), {
        ...settle,
        retryAfterMs: failure?.retryAfterMs ?? options.retryAfterMs,
        countAttempt: failure?.countAttempt,
      });
      return { decision, outcome: Outcome.RETRIED, receipt: waiting, response: null, error: failure };
    } catch (error) {
      if (!isLost(error)) throw error;
      lease.markLost(error);
      return lost();
    }
  }

  /** Complete is idempotent for the same token: try it again when claimd is briefly away. */
  async completeWithRetries(namespace, key, token, response, options) {
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.complete(namespace, key, token, response, options);
      } catch (error) {
        const transient = error instanceof ClaimdError && error.code === grpc.status.UNAVAILABLE;
        if (!transient || attempt >= 3) throw error;
        await sleep(100 * 2 ** attempt);
      }
    }
  }
}

/** The lease a claim granted, measured on claimd's clock; 30 s if it cannot tell. */
function leaseOf(receipt) {
  const expires = timestampMs(receipt.lease_expires_at);
  const since = timestampMs(receipt.updated_at);
  return expires !== null && since !== null && expires > since ? expires - since : 30_000;
}

module.exports = {
  Claims,
  ClaimdError,
  PermanentError,
  Decision,
  State,
  Outcome,
  fingerprintOf,
  toDate,
  status: grpc.status,
  DEFAULT_PROTO_DIR,
};
