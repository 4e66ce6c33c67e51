'use strict';
// @claimd/client: claimd for Node.js, as an installable package (CommonJS, Node 18+).
//
//   const { Claims, PermanentError, fingerprintOf } = require('@claimd/client');
//   const claims = new Claims('127.0.0.1:50051', { apiKey: process.env.CLAIMD_API_KEY });
//   const outcome = await claims.run('slack-events', eventId, fingerprintOf(body),
//     async (ctx) => replyBytes, { leaseMs: 30_000, recoveryPayload: body });
//
// `run` claims the event; when this caller wins it runs the work with a heartbeat every
// third of the lease, then settles the receipt exactly once: Complete with the work's
// result, Retry when the work throws, Quarantine when it throws a PermanentError. Every
// other decision (IN_FLIGHT, COMPLETED, RETRY_SCHEDULED, QUARANTINED, CONFLICT) comes back
// at once, with the stored response for a replay; with `waitMs`, an IN_FLIGHT answer waits
// in claimd for the holder to settle (docs/DESIGN.md §2.9). The low-level calls cover every
// RPC of claimd.v1.ClaimService.
//
// The proto (`proto/claimd/v1/claims.proto`, a copy of the claimd repository's, version
// `VERSION`) ships inside the package and is loaded relative to this file.
//
// Messages (receipts, Claim answers) use the proto's own field names (`claim_token`,
// `lease_expires_at`, `last_error`), as grpcurl and the contract do; enums are their names
// as strings ('DECISION_CLAIMED', 'STATE_COMPLETED'), 64-bit integers are strings, bytes
// are Buffers, and unset fields have their defaults (unset timestamps are null).
//
// Nothing here logs. Errors name the RPC, the status code, claimd's message and the fields
// of its BadRequest details — never a claim token, an API key or a payload. A call refused
// by a tenant quota (RESOURCE_EXHAUSTED with google.rpc.RetryInfo and QuotaFailure details)
// rejects with a QuotaError, a ClaimdError with `quota` and `retryAfterMs`.

const crypto = require('node:crypto');
const path = require('node:path');
const grpc = require('@grpc/grpc-js');
const protoLoader = require('@grpc/proto-loader');
const protobuf = require('protobufjs');

/** This package's version: the version of the claimd.v1 proto it ships (proto/VERSION). */
const VERSION = require('./package.json').version;

/** The OpenTelemetry API, when the caller's process has it (an optional peer dependency). */
const otel = (() => {
  try {
    return require('@opentelemetry/api');
  } catch {
    return null;
  }
})();

/**
 * Adds the caller's current trace context (`traceparent`, `tracestate`) to `metadata`,
 * through the process's registered propagator, so claimd's spans join the caller's trace.
 * Nothing without the OpenTelemetry API, and never `baggage`.
 * @param {grpc.Metadata} metadata
 */
function injectTraceContext(metadata) {
  if (!otel) return;
  const carrier = {};
  otel.propagation.inject(otel.context.active(), carrier);
  for (const name of ['traceparent', 'tracestate']) {
    if (typeof carrier[name] === 'string') metadata.set(name, carrier[name]);
  }
}

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

/** Why ListOrphaned lists a receipt. */
const OrphanReason = Object.freeze({
  LEASE_EXPIRED: 'ORPHAN_REASON_LEASE_EXPIRED',
  RETRY_DUE: 'ORPHAN_REASON_RETRY_DUE',
});

/** What `run` did with a claim it won. */
const Outcome = Object.freeze({
  COMPLETED: 'completed',
  RETRIED: 'retried',
  QUARANTINED: 'quarantined',
  LOST: 'lost',
});

/** The directory holding `claimd/v1/claims.proto`: the copy inside this package. */
const PROTO_DIR = path.join(__dirname, 'proto');
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
/** The trailer carrying a serialized google.rpc.Status with the error's details. */
const STATUS_DETAILS = 'grpc-status-details-bin';
/** The type URL of google.rpc.BadRequest, as an Any names it. */
const BAD_REQUEST = 'type.googleapis.com/google.rpc.BadRequest';
/** The type URLs of the details of a quota refusal (docs/DESIGN.md §5.15). */
const RETRY_INFO = 'type.googleapis.com/google.rpc.RetryInfo';
const QUOTA_FAILURE = 'type.googleapis.com/google.rpc.QuotaFailure';

/**
 * google.rpc.Status and the details of a quota refusal (google/rpc/status.proto and
 * error_details.proto, the fields claimd sends), for protobufjs: the runtime
 * @grpc/proto-loader loads the claimd proto with.
 */
const RPC_TYPES = protobuf.Root.fromJSON({
  nested: {
    google: {
      nested: {
        protobuf: {
          nested: {
            Any: { fields: { type_url: { type: 'string', id: 1 }, value: { type: 'bytes', id: 2 } } },
            Duration: { fields: { seconds: { type: 'int64', id: 1 }, nanos: { type: 'int32', id: 2 } } },
          },
        },
        rpc: {
          nested: {
            Status: {
              fields: {
                code: { type: 'int32', id: 1 },
                message: { type: 'string', id: 2 },
                details: { rule: 'repeated', type: 'google.protobuf.Any', id: 3 },
              },
            },
            RetryInfo: { fields: { retry_delay: { type: 'google.protobuf.Duration', id: 1 } } },
            QuotaFailure: {
              fields: { violations: { rule: 'repeated', type: 'Violation', id: 1 } },
              nested: {
                Violation: {
                  fields: { subject: { type: 'string', id: 1 }, description: { type: 'string', id: 2 } },
                },
              },
            },
          },
        },
      },
    },
  },
});
const RPC_STATUS = RPC_TYPES.lookupType('google.rpc.Status');
const RPC_RETRY_INFO = RPC_TYPES.lookupType('google.rpc.RetryInfo');
const RPC_QUOTA_FAILURE = RPC_TYPES.lookupType('google.rpc.QuotaFailure');
/** How protobufjs hands decoded messages over: 64-bit integers as numbers, defaults set. */
const AS_OBJECT = { longs: Number, defaults: true };

const STATUS_NAMES = Object.fromEntries(
  Object.entries(grpc.status).map(([name, code]) => [code, name]),
);

/**
 * The length-delimited fields numbered `number` of one protobuf message; varint and fixed
 * fields are skipped. Throws on malformed input.
 */
function lengthDelimited(buf, number) {
  const found = [];
  let pos = 0;
  const varint = () => {
    let value = 0;
    for (let shift = 0; shift < 49; shift += 7) {
      if (pos >= buf.length) throw new RangeError('truncated varint');
      const byte = buf[pos++];
      value += (byte & 0x7f) * 2 ** shift;
      if (byte < 0x80) return value;
    }
    throw new RangeError('varint too long');
  };
  while (pos < buf.length) {
    const tag = varint();
    const wire = tag % 8;
    const field = Math.floor(tag / 8);
    if (wire === 0) varint();
    else if (wire === 1) pos += 8;
    else if (wire === 5) pos += 4;
    else if (wire === 2) {
      const length = varint();
      if (pos + length > buf.length) throw new RangeError('truncated field');
      if (field === number) found.push(buf.subarray(pos, pos + length));
      pos += length;
    } else throw new RangeError(`unsupported wire type ${wire}`);
    if (pos > buf.length) throw new RangeError('truncated field');
  }
  return found;
}

/**
 * The field violations of the google.rpc.BadRequest details in a gRPC error's
 * `grpc-status-details-bin` trailer: `[{field, description}]`, empty when there are none
 * or they do not decode.
 */
function fieldViolations(source) {
  const metadata = source && source.metadata;
  if (!metadata || typeof metadata.get !== 'function') return [];
  const violations = [];
  try {
    for (const serialized of metadata.get(STATUS_DETAILS)) {
      if (!Buffer.isBuffer(serialized)) continue;
      // google.rpc.Status: 3 = repeated google.protobuf.Any details.
      for (const any of lengthDelimited(serialized, 3)) {
        // Any: 1 = type_url, 2 = value.
        const [typeUrl] = lengthDelimited(any, 1);
        if (!typeUrl || typeUrl.toString('utf8') !== BAD_REQUEST) continue;
        const [value] = lengthDelimited(any, 2);
        if (!value) continue;
        // BadRequest: 1 = repeated FieldViolation {1 = field, 2 = description}.
        for (const violation of lengthDelimited(value, 1)) {
          const [field] = lengthDelimited(violation, 1);
          const [description] = lengthDelimited(violation, 2);
          violations.push({
            field: field ? field.toString('utf8') : '',
            description: description ? description.toString('utf8') : '',
          });
        }
      }
    }
  } catch {
    return [];
  }
  return violations;
}

/**
 * The quota refusal in a gRPC error: `{quota, retryAfterMs}` when it is RESOURCE_EXHAUSTED
 * and its `grpc-status-details-bin` trailer (a google.rpc.Status) holds both a RetryInfo
 * with a delay and a QuotaFailure naming a quota; null otherwise (a RESOURCE_EXHAUSTED
 * without them, e.g. a message over a size limit, is not a quota's).
 */
function quotaRefusal(source) {
  if (!source || source.code !== grpc.status.RESOURCE_EXHAUSTED) return null;
  const metadata = source.metadata;
  if (!metadata || typeof metadata.get !== 'function') return null;
  let quota = null;
  let retryAfterMs = null;
  try {
    for (const serialized of metadata.get(STATUS_DETAILS)) {
      if (!Buffer.isBuffer(serialized)) continue;
      const rpcStatus = RPC_STATUS.toObject(RPC_STATUS.decode(serialized), AS_OBJECT);
      for (const any of rpcStatus.details) {
        if (any.type_url === RETRY_INFO) {
          const info = RPC_RETRY_INFO.toObject(RPC_RETRY_INFO.decode(any.value), AS_OBJECT);
          const delay = info.retry_delay;
          if (delay) retryAfterMs = Math.ceil(delay.seconds * 1000 + delay.nanos / 1e6);
        } else if (any.type_url === QUOTA_FAILURE) {
          const failure = RPC_QUOTA_FAILURE.toObject(RPC_QUOTA_FAILURE.decode(any.value), AS_OBJECT);
          const named = failure.violations.find((v) => v.subject);
          if (named) quota = named.subject;
        }
      }
    }
  } catch {
    return null;
  }
  return quota !== null && retryAfterMs !== null ? { quota, retryAfterMs } : null;
}

/**
 * A gRPC error from claimd: `code` is the numeric status (compare with `status.*`),
 * `codeName` its name ('ABORTED'), `details` claimd's message, `rpc` the method. For
 * INVALID_ARGUMENT, `violations` holds the `{field, description}` pairs of claimd's
 * google.rpc.BadRequest details and `field` the first field named ('key', 'lease_ttl'),
 * or null.
 */
class ClaimdError extends Error {
  /**
   * @param {string} rpc the method, e.g. 'Claim'.
   * @param {{code?: number, details?: string, message?: string, metadata?: grpc.Metadata}} source
   *   the error grpc-js reported.
   */
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
    this.violations = fieldViolations(source);
    this.field = this.violations.length > 0 ? this.violations[0].field : null;
  }
}

/**
 * A call claimd refused because the tenant is over one of its quotas (docs/DESIGN.md
 * §5.15): RESOURCE_EXHAUSTED with RetryInfo and QuotaFailure details. Nothing was written
 * and no attempt was spent. `quota` is the quota's key ('claims_per_second',
 * 'writes_per_second', 'max_waiting'), `retryAfterMs` the RetryInfo's delay, rounded up to
 * whole milliseconds: when claimd expects to take the call. A ClaimdError, so code that
 * tests `code === status.RESOURCE_EXHAUSTED` still sees it.
 */
class QuotaError extends ClaimdError {
  /**
   * @param {string} rpc the method, e.g. 'Claim'.
   * @param {{code?: number, details?: string, message?: string, metadata?: grpc.Metadata}} source
   * @param {{quota: string, retryAfterMs: number}} refusal what quotaRefusal found.
   */
  constructor(rpc, source, refusal) {
    super(rpc, source);
    this.name = 'QuotaError';
    this.quota = refusal.quota;
    this.retryAfterMs = refusal.retryAfterMs;
  }
}

/** The error a failed call of `rpc` rejects with: a QuotaError or a ClaimdError. */
function callError(rpc, source) {
  const refusal = quotaRefusal(source);
  return refusal ? new QuotaError(rpc, source, refusal) : new ClaimdError(rpc, source);
}

/**
 * Thrown by the work when retrying cannot help (a poison event, a validation failure):
 * `run` quarantines the receipt instead of scheduling a retry. Any error with
 * `permanent === true` counts as well.
 */
class PermanentError extends Error {
  /**
   * @param {string} [message]
   * @param {{cause?: unknown}} [options]
   */
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

/**
 * SHA-256 of `body`: a fingerprint for Claim.
 * @param {Buffer|Uint8Array|string} body
 * @returns {Buffer}
 */
function fingerprintOf(body) {
  return crypto.createHash('sha256').update(body).digest();
}

/** A google.protobuf.Duration for `ms` milliseconds, or undefined. */
function duration(ms, what) {
  if (ms === undefined || ms === null) return undefined;
  if (typeof ms !== 'number' || !Number.isFinite(ms) || ms < 0) {
    throw new TypeError(`${what} must be a number of milliseconds >= 0`);
  }
  const whole = Math.round(ms);
  return { seconds: String(Math.floor(whole / 1000)), nanos: (whole % 1000) * 1e6 };
}

/**
 * Milliseconds since the epoch of a google.protobuf.Timestamp, or null when unset.
 * @param {{seconds: string|number, nanos: number}|null|undefined} ts
 * @returns {number|null}
 */
function timestampMs(ts) {
  if (!ts) return null;
  return Number(ts.seconds) * 1000 + Math.floor(ts.nanos / 1e6);
}

/**
 * A Date for a google.protobuf.Timestamp, or null when unset.
 * @param {{seconds: string|number, nanos: number}|null|undefined} ts
 * @returns {Date|null}
 */
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
    // Not enumerable: the token must not show up when the lease is logged or inspected.
    Object.defineProperty(this, 'token', { value: token, enumerable: false });
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
   *   (`credentials.createInsecure()`); use `credentials.createSsl(...)` (exported by this
   *   package) for TLS.
   * @param {string} [options.protoDir] the directory holding `claimd/v1/claims.proto`;
   *   default: the copy inside this package (`PROTO_DIR`).
   * @param {number} [options.deadlineMs] the deadline of each call (default 5000).
   * @param {object} [options.channelOptions] passed to the grpc-js client.
   */
  constructor(address, options = {}) {
    const Service = loadService(path.resolve(options.protoDir || PROTO_DIR));
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

  /**
   * One unary call with the API key and a deadline; rejects with a ClaimdError (a
   * QuotaError when a tenant quota refused it).
   * @param {string} rpc the method, e.g. 'Claim'.
   * @param {object} request the request message, with the proto's field names.
   * @param {number} [deadlineMs] default: the client's deadline.
   */
  call(rpc, request, deadlineMs) {
    const metadata = new grpc.Metadata();
    if (this.apiKey) metadata.set('authorization', `Bearer ${this.apiKey}`);
    injectTraceContext(metadata);
    const deadline = Date.now() + (deadlineMs ?? this.deadlineMs);
    return new Promise((resolve, reject) => {
      this.client[rpc](request, metadata, { deadline }, (error, response) => {
        if (error) reject(callError(rpc, error));
        else resolve(response);
      });
    });
  }

  /**
   * Claim: may this caller do the work for (namespace, key)? Resolves to the ClaimResponse
   * `{decision, claim_token, receipt}`; `claim_token` is set only for DECISION_CLAIMED.
   * @param {string} namespace
   * @param {string} key
   * @param {Buffer|Uint8Array|string} fingerprint your digest of the payload (≤ 64 bytes).
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
      lease_ttl: duration(options.leaseMs, 'leaseMs'),
      recovery_payload: toBytes(options.recoveryPayload, 'recoveryPayload'),
      delivery_attempt: options.deliveryAttempt || 0,
    };
    let deadlineMs = options.deadlineMs;
    if (options.waitMs) {
      request.wait = duration(options.waitMs, 'waitMs');
      deadlineMs ??= this.deadlineMs + options.waitMs;
    }
    return this.call('Claim', request, deadlineMs);
  }

  /**
   * Complete: the work is done; `response` is replayed to duplicates. Resolves to the
   * receipt. Completing again with the same token succeeds and changes nothing.
   * @param {object} [options] `deadlineMs`.
   */
  async complete(namespace, key, claimToken, response, options = {}) {
    const request = { namespace, key, claim_token: claimToken, response: toBytes(response, 'response') };
    return (await this.call('Complete', request, options.deadlineMs)).receipt;
  }

  /**
   * Heartbeat: extends the lease to now + `leaseMs` (unset: the namespace's default) and,
   * with `checkpoint`, stores progress bytes that survive retries and takeovers. Resolves
   * to the receipt; ABORTED means somebody took the work over.
   * @param {object} [options] `leaseMs`, `checkpoint`, `deadlineMs`.
   */
  async heartbeat(namespace, key, claimToken, options = {}) {
    const request = {
      namespace,
      key,
      claim_token: claimToken,
      lease_ttl: duration(options.leaseMs, 'leaseMs'),
    };
    if (options.checkpoint != null) request.checkpoint = toBytes(options.checkpoint, 'checkpoint');
    return (await this.call('Heartbeat', request, options.deadlineMs)).receipt;
  }

  /**
   * Retry: gives the work back, to be claimed again after `retryAfterMs` (unset: the
   * namespace's backoff). `countAttempt: false` leaves the attempt budget as it is (the
   * platform said "wait", e.g. HTTP 429). Resolves to the receipt (RETRY_WAIT, or
   * QUARANTINED when the budget is spent).
   * @param {object} [options] `retryAfterMs`, `countAttempt`, `deadlineMs`.
   */
  async retry(namespace, key, claimToken, error, options = {}) {
    const request = {
      namespace,
      key,
      claim_token: claimToken,
      error: String(error ?? ''),
      retry_after: duration(options.retryAfterMs, 'retryAfterMs'),
    };
    if (options.countAttempt !== undefined) request.count_attempt = Boolean(options.countAttempt);
    return (await this.call('Retry', request, options.deadlineMs)).receipt;
  }

  /**
   * Quarantine: the event is poison; the receipt becomes a dead letter. Resolves to the
   * receipt.
   * @param {object} [options] `deadlineMs`.
   */
  async quarantine(namespace, key, claimToken, error, options = {}) {
    const request = { namespace, key, claim_token: claimToken, error: String(error ?? '') };
    return (await this.call('Quarantine', request, options.deadlineMs)).receipt;
  }

  /**
   * Get: the receipt as this caller's tenant sees it (NOT_FOUND when there is none).
   * @param {object} [options] `deadlineMs`.
   */
  async get(namespace, key, options = {}) {
    return (await this.call('Get', { namespace, key }, options.deadlineMs)).receipt;
  }

  /**
   * ListOrphaned: one page of receipts nobody is working on (expired leases, due retries),
   * oldest due first. Resolves to `{orphans: [{receipt, reason}], next_page_token}`; pass
   * `next_page_token` as `pageToken` for the next page (empty on the last one).
   * @param {object} [options] `namespace` (unset: every namespace), `pageSize` (0: 100),
   *   `pageToken`, `overdueByMs` (only those due at least that long ago), `deadlineMs`.
   */
  async listOrphaned(options = {}) {
    const request = {
      namespace: options.namespace || '',
      page_size: options.pageSize || 0,
      page_token: options.pageToken || '',
      overdue_by: duration(options.overdueByMs, 'overdueByMs'),
    };
    return this.call('ListOrphaned', request, options.deadlineMs);
  }

  /**
   * List: one page of the caller's receipts in (namespace, key) order. Resolves to
   * `{receipts, next_page_token}`; `states: [State.QUARANTINED]` lists the dead letters.
   * @param {object} [options] `namespace` (unset: every namespace), `states` (state names;
   *   unset: every state), `pageSize` (0: 100), `pageToken`, `deadlineMs`.
   */
  async list(options = {}) {
    const request = {
      namespace: options.namespace || '',
      states: options.states || [],
      page_size: options.pageSize || 0,
      page_token: options.pageToken || '',
    };
    return this.call('List', request, options.deadlineMs);
  }

  /**
   * Redrive: gives a dead letter (a QUARANTINED receipt) another full attempt budget; it
   * becomes RETRY_WAIT, due at once. Resolves to the receipt; FAILED_PRECONDITION for a
   * receipt that is not QUARANTINED, NOT_FOUND for an unknown one.
   * @param {object} [options] `deadlineMs`.
   */
  async redrive(namespace, key, options = {}) {
    return (await this.call('Redrive', { namespace, key }, options.deadlineMs)).receipt;
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
   * @param {string} namespace
   * @param {string} key
   * @param {Buffer|Uint8Array|string} fingerprint
   * @param {(ctx: object) => unknown} work
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

/** gRPC status codes (grpc-js's), to compare with `ClaimdError.code`. */
const status = grpc.status;
/** grpc-js's channel credentials, from the grpc-js this package uses (TLS: `createSsl`). */
const credentials = grpc.credentials;
/** The name the examples' helper gave PROTO_DIR. */
const DEFAULT_PROTO_DIR = PROTO_DIR;

// Shorthand properties only, so that `import { Claims } from '@claimd/client'` finds them.
module.exports = {
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
  timestampMs,
  status,
  credentials,
  PROTO_DIR,
  DEFAULT_PROTO_DIR,
  VERSION,
};
