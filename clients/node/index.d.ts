// Type declarations for @claimd/client (index.js), written by hand: the messages as
// @grpc/proto-loader hands them over with the options index.js loads the proto with
// (proto field names, enums as their names, 64-bit integers as strings, bytes as Buffers,
// defaults filled in, unset messages null).

/// <reference types="node" />

import type { ChannelCredentials, ChannelOptions, Client, credentials as grpcCredentials, status as grpcStatus } from '@grpc/grpc-js';

/** Bytes a request takes: a Buffer, a Uint8Array or a string (sent as UTF-8). */
export type Bytes = Buffer | Uint8Array | string;

/** google.protobuf.Timestamp as received: `seconds` is a 64-bit integer as a string. */
export interface Timestamp {
  seconds: string;
  nanos: number;
}

/** The Claim decisions (claimd never sends DECISION_UNSPECIFIED). */
export type DecisionName =
  | 'DECISION_CLAIMED'
  | 'DECISION_IN_FLIGHT'
  | 'DECISION_COMPLETED'
  | 'DECISION_RETRY_SCHEDULED'
  | 'DECISION_QUARANTINED'
  | 'DECISION_CONFLICT';

/** The receipt states (claimd never sends STATE_UNSPECIFIED). */
export type StateName = 'STATE_PROCESSING' | 'STATE_RETRY_WAIT' | 'STATE_COMPLETED' | 'STATE_QUARANTINED';

/** Why ListOrphaned lists a receipt. */
export type OrphanReasonName = 'ORPHAN_REASON_LEASE_EXPIRED' | 'ORPHAN_REASON_RETRY_DUE';

/** What `run` did with a claim it won. */
export type OutcomeName = 'completed' | 'retried' | 'quarantined' | 'lost';

/** Decision names, as Claim answers them. */
export declare const Decision: Readonly<{
  CLAIMED: 'DECISION_CLAIMED';
  IN_FLIGHT: 'DECISION_IN_FLIGHT';
  COMPLETED: 'DECISION_COMPLETED';
  RETRY_SCHEDULED: 'DECISION_RETRY_SCHEDULED';
  QUARANTINED: 'DECISION_QUARANTINED';
  CONFLICT: 'DECISION_CONFLICT';
}>;

/** Receipt state names. */
export declare const State: Readonly<{
  PROCESSING: 'STATE_PROCESSING';
  RETRY_WAIT: 'STATE_RETRY_WAIT';
  COMPLETED: 'STATE_COMPLETED';
  QUARANTINED: 'STATE_QUARANTINED';
}>;

/** Why ListOrphaned lists a receipt. */
export declare const OrphanReason: Readonly<{
  LEASE_EXPIRED: 'ORPHAN_REASON_LEASE_EXPIRED';
  RETRY_DUE: 'ORPHAN_REASON_RETRY_DUE';
}>;

/** What `run` did with a claim it won. */
export declare const Outcome: Readonly<{
  COMPLETED: 'completed';
  RETRIED: 'retried';
  QUARANTINED: 'quarantined';
  LOST: 'lost';
}>;

/** The one durable record of an event, as the caller's tenant sees it. */
export interface Receipt {
  namespace: string;
  key: string;
  state: StateName;
  /** 1 at the first claim, +1 at every later claim: the fencing number. */
  attempt: number;
  fingerprint: Buffer;
  lease_expires_at: Timestamp | null;
  next_attempt_at: Timestamp | null;
  created_at: Timestamp | null;
  updated_at: Timestamp | null;
  completed_at: Timestamp | null;
  last_error: string;
  checkpoint: Buffer;
  response: Buffer;
  recovery_payload: Buffer;
  response_pruned_at: Timestamp | null;
}

/** The answer to a Claim. */
export interface ClaimResponse {
  decision: DecisionName;
  /** Set only for DECISION_CLAIMED (empty otherwise). Keep it secret. */
  claim_token: string;
  receipt: Receipt;
}

/** One receipt nobody is working on. */
export interface Orphan {
  receipt: Receipt;
  reason: OrphanReasonName;
}

/** One page of ListOrphaned. */
export interface ListOrphanedResponse {
  orphans: Orphan[];
  /** Empty on the last page. */
  next_page_token: string;
}

/** One page of List. */
export interface ListResponse {
  receipts: Receipt[];
  /** Empty on the last page. */
  next_page_token: string;
}

/** One violation of google.rpc.BadRequest: the request field and what is wrong with it. */
export interface FieldViolation {
  field: string;
  description: string;
}

/**
 * A gRPC error from claimd. `code` is the numeric status (compare with `status.*`),
 * `codeName` its name ('ABORTED'), `details` claimd's message, `rpc` the method; for
 * INVALID_ARGUMENT `violations` and `field` name the request's field.
 */
export declare class ClaimdError extends Error {
  constructor(rpc: string, source: { code?: number; details?: string; message?: string; metadata?: unknown });
  /** 'QuotaError' for the subclass. */
  readonly name: 'ClaimdError' | 'QuotaError';
  /** The method, e.g. 'Claim'. */
  readonly rpc: string;
  readonly code: grpcStatus;
  readonly codeName: string;
  readonly details: string;
  /** From claimd's google.rpc.BadRequest details; empty when it sent none. */
  readonly violations: FieldViolation[];
  /** The first violation's field ('key', 'lease_ttl', 'wait'), or null. */
  readonly field: string | null;
}

/**
 * A call claimd refused because the tenant is over one of its quotas: RESOURCE_EXHAUSTED
 * with google.rpc.RetryInfo and QuotaFailure details. Nothing was written and no attempt
 * was spent. A RESOURCE_EXHAUSTED without those details stays a plain ClaimdError.
 */
export declare class QuotaError extends ClaimdError {
  constructor(
    rpc: string,
    source: { code?: number; details?: string; message?: string; metadata?: unknown },
    refusal: { quota: string; retryAfterMs: number },
  );
  readonly name: 'QuotaError';
  /** The quota's key: 'claims_per_second', 'writes_per_second' or 'max_waiting'. */
  readonly quota: string;
  /** The RetryInfo's delay in milliseconds (rounded up): when claimd expects the call. */
  readonly retryAfterMs: number;
}

/** Thrown by the work when retrying cannot help: `run` quarantines instead of retrying. */
export declare class PermanentError extends Error {
  constructor(message?: string, options?: { cause?: unknown });
  readonly permanent: true;
}

/** Options of the client. */
export interface ClaimsOptions {
  /** Sent as `authorization: Bearer <key>` on every call. */
  apiKey?: string;
  /** Default plaintext; `credentials.createSsl(...)` for TLS. */
  credentials?: ChannelCredentials;
  /** The directory holding `claimd/v1/claims.proto`; default: the package's own copy. */
  protoDir?: string;
  /** The deadline of each call (default 5000). */
  deadlineMs?: number;
  /** Passed to the grpc-js client. */
  channelOptions?: ChannelOptions;
}

/** Every call's own deadline. */
export interface CallOptions {
  deadlineMs?: number;
}

/** Options of Claim. */
export interface ClaimOptions extends CallOptions {
  /** 1 s to 24 h; unset: the namespace's default lease. */
  leaseMs?: number;
  /** Bytes returned to whoever takes the work over (at most 64 KiB). */
  recoveryPayload?: Bytes;
  /** The platform's retry number, a hint only. */
  deliveryAttempt?: number;
  /**
   * 0 to 60000: when the answer would be DECISION_IN_FLIGHT, claimd holds the call until
   * the receipt settles, or answers IN_FLIGHT once the wait is over. The deadline grows by
   * it unless `deadlineMs` is given.
   */
  waitMs?: number;
}

/** Options of Heartbeat. */
export interface HeartbeatOptions extends CallOptions {
  leaseMs?: number;
  /** Progress bytes that survive retries and takeovers; unset keeps the stored one. */
  checkpoint?: Bytes | null;
}

/** Options of Retry. */
export interface RetryOptions extends CallOptions {
  /** 1 s to 24 h; unset: the namespace's backoff. */
  retryAfterMs?: number;
  /** false: this attempt does not spend the attempt budget. */
  countAttempt?: boolean;
}

/** Options of ListOrphaned. */
export interface ListOrphanedOptions extends CallOptions {
  namespace?: string;
  pageSize?: number;
  pageToken?: string;
  overdueByMs?: number;
}

/** Options of List. */
export interface ListOptions extends CallOptions {
  namespace?: string;
  states?: StateName[];
  pageSize?: number;
  pageToken?: string;
}

/** Options of `run`: the Claim's, and how the lease is kept and a failure given back. */
export interface RunOptions extends ClaimOptions {
  /** Default: a third of the lease. */
  heartbeatMs?: number;
  /** Default retry delay for a failed work; an error's own `retryAfterMs` wins. */
  retryAfterMs?: number;
}

/** What the work of `run` gets. */
export interface WorkContext {
  readonly namespace: string;
  readonly key: string;
  /** The fencing number. */
  readonly attempt: number;
  /** The Claim's receipt: after a takeover its `checkpoint` and `recovery_payload`. */
  readonly receipt: Receipt;
  /** Aborted when the lease is lost. */
  readonly signal: AbortSignal;
  /** Whether the lease is lost. */
  readonly lost: boolean;
  /** Stores progress now with a Heartbeat; rejects with ABORTED once taken over. */
  checkpoint(bytes: Bytes): Promise<Receipt>;
}

/** The work of `run`: resolves to the response to store. */
export type Work = (ctx: WorkContext) => Bytes | void | null | Promise<Bytes | void | null>;

/** `run` when the decision was not CLAIMED: the work did not run. */
export interface Answered {
  decision: Exclude<DecisionName, 'DECISION_CLAIMED'>;
  receipt: Receipt;
  /** The stored response for DECISION_COMPLETED, null otherwise. */
  response: Buffer | null;
  outcome?: undefined;
}

/** `run` won the claim and the work's response was stored. */
export interface Completed {
  decision: 'DECISION_CLAIMED';
  outcome: 'completed';
  receipt: Receipt;
  response: Buffer;
  error: null;
}

/** `run` won the claim, the work failed and the receipt was given back or quarantined. */
export interface Failed {
  decision: 'DECISION_CLAIMED';
  outcome: 'retried' | 'quarantined';
  receipt: Receipt;
  response: null;
  error: unknown;
}

/** `run` won the claim but lost the lease: nothing was settled. */
export interface Lost {
  decision: 'DECISION_CLAIMED';
  outcome: 'lost';
  /** The Claim's receipt. */
  receipt: Receipt;
  response: null;
  /** The work's failure, or what reported the lease lost (a ClaimdError, ABORTED). */
  error: unknown;
}

/** What `run` resolves to. */
export type RunResult = Answered | Completed | Failed | Lost;

/** A ClaimService client that sends the API key (if any) with every call. */
export declare class Claims {
  constructor(address: string, options?: ClaimsOptions);
  /** The grpc-js client. */
  readonly client: Client;
  readonly deadlineMs: number;
  /** Closes the channel. */
  close(): void;
  claim(namespace: string, key: string, fingerprint: Bytes, options?: ClaimOptions): Promise<ClaimResponse>;
  complete(namespace: string, key: string, claimToken: string, response?: Bytes | null, options?: CallOptions): Promise<Receipt>;
  heartbeat(namespace: string, key: string, claimToken: string, options?: HeartbeatOptions): Promise<Receipt>;
  retry(namespace: string, key: string, claimToken: string, error?: unknown, options?: RetryOptions): Promise<Receipt>;
  quarantine(namespace: string, key: string, claimToken: string, error?: unknown, options?: CallOptions): Promise<Receipt>;
  get(namespace: string, key: string, options?: CallOptions): Promise<Receipt>;
  listOrphaned(options?: ListOrphanedOptions): Promise<ListOrphanedResponse>;
  list(options?: ListOptions): Promise<ListResponse>;
  redrive(namespace: string, key: string, options?: CallOptions): Promise<Receipt>;
  run(namespace: string, key: string, fingerprint: Bytes, work: Work, options?: RunOptions): Promise<RunResult>;
}

/** SHA-256 of `body`: a fingerprint for Claim. */
export declare function fingerprintOf(body: Bytes): Buffer;
/** A Date for a Timestamp, or null when unset. */
export declare function toDate(ts: Timestamp | null | undefined): Date | null;
/** Milliseconds since the epoch of a Timestamp, or null when unset. */
export declare function timestampMs(ts: Timestamp | null | undefined): number | null;

/** gRPC status codes (grpc-js's `status`). */
export declare const status: typeof grpcStatus;
/** grpc-js's `credentials`, from the grpc-js this package uses: `credentials.createSsl(...)`. */
export declare const credentials: typeof grpcCredentials;
/** The directory of the proto copy inside this package. */
export declare const PROTO_DIR: string;
/** The same as PROTO_DIR (the name the examples' helper used). */
export declare const DEFAULT_PROTO_DIR: string;
/** This package's version: the claimd.v1 proto's (proto/VERSION). */
export declare const VERSION: string;
