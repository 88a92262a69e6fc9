/**
 * The one receiver every adapter shares: bytes and headers in, an answer out.
 * Verify, run the job once (claim, handler, completion), answer per the protocol,
 * and say what happened in the log. Adapters only read the body and send the answer.
 */
import type { DialectName } from '../canonical/dialects.js';
import { isWebhookError, type WebhookErrorCode } from '../errors.js';
import type { JobCompletedEvent, JsonObjectValue } from '../event.js';
import { MemoryIdempotencyStore } from '../idempotency/memory.js';
import type { IdempotencyStore } from '../idempotency/types.js';
import { errorDetails, resolveLogger, type Logger, type LoggerInput } from '../log.js';
import { checkMs, checkNumber, optionalNumber } from '../options.js';
import { DEFAULT_BODY_TIMEOUT_MS, DEFAULT_LEASE_MS, DEFAULT_MAX_AGE_SECONDS, DEFAULT_RETAIN_MS } from '../protocol.js';
import type { VerifiedDelivery } from '../verify/core.js';
import type { HeadersInput } from '../verify/headers.js';
import { checkReplayWindow } from '../verify/options.js';
import { answerForError, answerForRun, type ReceiverAnswer } from './answers.js';
import { createJobRunner, takeoverGrace, type FailureStage, type JobRunner } from './runner.js';

/** What every handler call gets besides the event. */
export interface EventContextBase {
  /** `event.job_id`. */
  jobId: string;
  /** The event as a plain JSON object, to reach fields the gateway added after this version. */
  payload: JsonObjectValue;
  /** Aborted when this instance lost its claim on the job (its lease could not be renewed). */
  signal: AbortSignal;
}

/** A handler call for a verified webhook delivery. */
export interface WebhookEventContext<Req = unknown> extends EventContextBase {
  source: 'webhook';
  /** The dialect whose canonical bytes the signature covers. */
  dialect: DialectName;
  /** Index of the key that verified. */
  keyIndex: number;
  /** Lowercase hex SHA-256 of the canonical bytes. */
  canonicalSha256: string;
  /** The framework's request object (Express `req`, Fetch `Request`, your `{ body, headers }`). */
  request: Req;
}

/** A handler call for a completion found by polling the gateway (the reconciler). */
export interface PollEventContext extends EventContextBase {
  source: 'poll';
}

/** Either kind of handler call: share one handler between receivers and the reconciler. */
export type EventContext<Req = unknown> = WebhookEventContext<Req> | PollEventContext;

/** Where a failure happened, as `onError` hears it. */
export type { FailureStage };

/** Options of every receiver, besides the verifier's. */
export interface ReceiverOptionsBase<Req> {
  /** Called once per job id, after the signature is verified and the job claimed. Throw to have the gateway retry. */
  onEvent: (event: JobCompletedEvent, context: WebhookEventContext<Req>) => void | Promise<void>;
  /** Idempotency store shared by the receiver's instances (default: a `MemoryIdempotencyStore` of this receiver). */
  store?: IdempotencyStore;
  /**
   * Lease of a claim (default 5 s), renewed every third of it while `onEvent` runs: a
   * slow handler keeps its job, a crashed process frees its jobs within one lease.
   */
  leaseMs?: number;
  /**
   * When a delivery finds another holder's lease over, how long it waits before taking
   * the job over (default 2 s; 0: at once). A holder cut off from the store for longer
   * than its lease (a store outage, a partition) may be alive with the job done: this
   * gives it time to record that once the store answers, so the job does not run twice.
   * A crashed holder's job is taken over this much later. The delivery waits in place.
   */
  takeoverGraceMs?: number;
  /** How long completed job ids are remembered (default 24 h); at least the replay window. */
  retainMs?: number;
  /** `Retry-After` (seconds) on 503 while the same job is in progress (default: time left on the lease, 1–30 s). */
  retryAfterSeconds?: number;
  /** A body still arriving after this long is answered 408 (default 30 s, the sender's own attempt timeout). */
  bodyTimeoutMs?: number;
  /**
   * Where jobhook says what happened (default: warnings and errors to the console).
   * Handler and store failures, lost claims and misconfiguration are errors or
   * warnings; rejected deliveries are `info` (signed) or `debug` (unsigned), so forged
   * traffic floods nothing. Methods you leave out are no-ops (`log: {}` is silent).
   */
  log?: LoggerInput;
  /**
   * Hears every failure that is not the sender's: the handler throwing, the store
   * failing to claim, renew, complete or release, and a body that cannot be read
   * (`BODY_UNAVAILABLE`). Rejected deliveries are not failures and are not reported here.
   */
  onError?: (error: unknown, context: { jobId?: string; stage: FailureStage }) => void;
}

export interface ResolvedReceiver<Req> {
  onEvent: ReceiverOptionsBase<Req>['onEvent'];
  runner: JobRunner;
  log: Logger;
  retryAfterSeconds: number | undefined;
  bodyTimeoutMs: number;
}

/** Checks the receiver options (TypeError for mistakes) and builds the job runner. */
export function resolveReceiver<Req>(options: ReceiverOptionsBase<Req> & { maxAgeSeconds?: number | false }): ResolvedReceiver<Req> {
  if (typeof options !== 'object' || options === null) throw new TypeError('options must be an object with publicKey and onEvent');
  if (typeof options.onEvent !== 'function') throw new TypeError('onEvent must be a function (event, context) => void | Promise<void>');
  const log = resolveLogger(options.log);
  if (options.onError !== undefined && typeof options.onError !== 'function') {
    throw new TypeError("onError must be a function (error, context) => void (the middleware's 'respond' | 'next' choice is its errors option)");
  }
  const store = options.store ?? new MemoryIdempotencyStore({ log: options.log });
  for (const m of ['claim', 'complete', 'release'] as const) {
    if (typeof (store as unknown as Record<string, unknown>)[m] !== 'function') throw new TypeError(`store must implement ${m}()`);
  }
  if (typeof store.renew !== 'function') {
    log.warn('jobhook: the idempotency store has no renew(): leases are not renewed, so a handler slower than leaseMs may run twice.');
  }
  const retainMs = options.retainMs === undefined ? DEFAULT_RETAIN_MS : checkMs(options.retainMs, 'retainMs');
  checkReplayWindow(options.maxAgeSeconds === false ? undefined : (options.maxAgeSeconds ?? DEFAULT_MAX_AGE_SECONDS), retainMs);
  const leaseMs = options.leaseMs === undefined ? DEFAULT_LEASE_MS : checkMs(options.leaseMs, 'leaseMs');
  return {
    onEvent: options.onEvent,
    runner: createJobRunner({ store, leaseMs, takeoverGraceMs: takeoverGrace(options.takeoverGraceMs), retainMs, log, onError: options.onError }),
    log,
    retryAfterSeconds: options.retryAfterSeconds === undefined ? undefined : checkNumber(options.retryAfterSeconds, 'retryAfterSeconds', { integer: true }),
    bodyTimeoutMs: optionalNumber(options.bodyTimeoutMs, 'bodyTimeoutMs', DEFAULT_BODY_TIMEOUT_MS),
  };
}

/** Codes that anyone can cause without the gateway's key: logged at debug only. */
const UNSIGNED: ReadonlySet<WebhookErrorCode> = new Set<WebhookErrorCode>([
  'BODY_TOO_LARGE',
  'BODY_TIMEOUT',
  'ENCODING_UNSUPPORTED',
  'SIGNATURE_MISSING',
  'SIGNATURE_MALFORMED',
  'ALGORITHM_UNSUPPORTED',
  'SIGNATURE_INVALID',
]);

/**
 * The answer for a delivery refused before its job ran (or a body that could not be
 * read), logged at the level it deserves.
 */
export function refuse<Req>(r: ResolvedReceiver<Req>, err: unknown): ReceiverAnswer {
  if (isWebhookError(err) && err.code === 'BODY_UNAVAILABLE') r.runner.report('body', err);
  else logRefusal(r.log, err);
  return answerForError(err);
}

/** Logs why a delivery was refused: debug when anyone could have sent it, info when it was signed. */
export function logRefusal(log: Logger, err: unknown): void {
  if (!isWebhookError(err)) log.error('jobhook: the receiver failed unexpectedly', errorDetails(err));
  else if (err.code === 'BODY_UNAVAILABLE') log.error(`jobhook: ${err.message}`);
  else if (UNSIGNED.has(err.code)) log.debug(`jobhook: refused a delivery: ${err.code}`, { message: err.message });
  else log.info(`jobhook: refused a signed delivery: ${err.code}`, { message: err.message });
}

/** Receives one delivery whose raw bytes are in hand. */
export async function receive<Req>(
  r: ResolvedReceiver<Req>,
  verify: (body: string | Uint8Array, headers: HeadersInput) => VerifiedDelivery | Promise<VerifiedDelivery>,
  body: string | Uint8Array,
  headers: HeadersInput,
  request: Req,
): Promise<ReceiverAnswer> {
  let delivery: VerifiedDelivery;
  try {
    delivery = await verify(body, headers);
  } catch (err) {
    return refuse(r, err);
  }
  const { event, payload, jobId, dialect, keyIndex, canonicalSha256 } = delivery;
  const result = await r.runner.run(jobId, (signal) => r.onEvent(event, { source: 'webhook', jobId, payload, dialect, keyIndex, canonicalSha256, request, signal }));
  if (result.kind === 'duplicate' || result.kind === 'in_progress') r.log.debug(`jobhook: job ${jobId}: ${result.kind.replace('_', ' ')}`);
  return answerForRun(result, jobId, r.retryAfterSeconds);
}
