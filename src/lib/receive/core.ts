/**
 * The one receiver every adapter shares: bytes and headers in, an answer out.
 * Verify, run the job through the job runner (claim, handler, completion), answer per
 * the protocol, and say what happened in the log. Adapters only read the body and
 * send the answer.
 */
import type { DialectName } from '../core/canonical/dialects.js';
import { isWebhookError, type WebhookErrorCode } from '../base/errors.js';
import { parseRfc3339, type JobCompletedEvent, type JsonObjectValue } from '../core/event.js';
import type { IdempotencyStore, TransactionalStore } from '../jobs/store.js';
import { errorDetails, resolveLogger, type Logger } from '../base/log.js';
import { checkNumber, optionalNumber, type OptionNamesOf } from '../base/options.js';
import { DEFAULT_BODY_TIMEOUT_MS, DEFAULT_MAX_AGE_SECONDS } from '../base/protocol.js';
import type { VerifiedDelivery } from '../core/verify/core.js';
import type { HeadersInput } from '../core/verify/headers.js';
import { checkReplayWindow } from '../core/verify/options.js';
import { eventContext, type EventContextBase, type PollEventContext } from '../jobs/context.js';
import { JOB_RUNNER_OPTIONS, runnerFor, type ClaimContext, type FailureStage, type JobRunner, type JobRunnerOptions, type RunResult } from '../jobs/runner.js';
import { AttributeSets, fail } from '../runtime/telemetry.js';
import { answerForError, answerForRun, type ReceiverAnswer } from './answers.js';
import { ADMISSION_OPTIONS, DeliveryGuard, digestKey, type AdmissionOptions } from './guard.js';
import type { OpenedSignature } from '../core/verify/core.js';
import { ClientAbortedError } from './body-limits.js';
import { SignatureInvalidError } from '../base/errors.js';
import { rawHashes } from '../runtime/verify/worker-pool.js';

/** A handler call for a verified webhook delivery. */
export interface WebhookEventContext<Req = unknown, Tx = unknown> extends EventContextBase<Tx> {
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

/** Either kind of handler call: share one handler between receivers and the reconciler. */
export type EventContext<Req = unknown, Tx = unknown> = WebhookEventContext<Req, Tx> | PollEventContext<Tx>;

/** Where a failure happened, as `onError` hears it. */
export type { FailureStage };

/** Options of every receiver, besides the verifier's. */
export interface ReceiverOptionsBase<Req, Tx = unknown> extends JobRunnerOptions, AdmissionOptions {
  /**
   * Called once per job id, after the signature is verified and the job claimed. Throw to
   * have the gateway retry. With a transactional store, write through `context.transaction`.
   */
  onEvent: (event: JobCompletedEvent, context: WebhookEventContext<Req, Tx>) => void | Promise<void>;
  /** Idempotency store shared by the receiver's instances (default: a `MemoryIdempotencyStore` of this receiver). */
  store?: TransactionalStore<Tx> | IdempotencyStore;
  /**
   * A job runner shared with other receivers and the reconciler (`createJobRunner`): its
   * store, lease, grace, retention, clock and repair queue serve them all. Give either
   * `runner` or those options (`store`, `leaseMs`, `takeoverGraceMs`, `retainMs`, `onError`).
   */
  runner?: JobRunner;
  /** `Retry-After` (seconds) on 503 while the same job is in progress (default: time left on the lease, 1–30 s). */
  retryAfterSeconds?: number;
  /** A body still arriving after this long is answered 408 (default 30 s, the sender's own attempt timeout). */
  bodyTimeoutMs?: number;
  /**
   * Hears every delivery's outcome once, as it is answered (for metrics without
   * OpenTelemetry): `{ status, outcome, code?, jobId?, dialect?, durationMs, bodyBytes }`.
   * A hook that throws is ignored, as a throwing logger is.
   */
  onDelivery?: (outcome: DeliveryOutcome) => void;
}

/** How a delivery ended: what `onDelivery` hears and `jobhook.deliveries` counts (its `outcome` attribute). */
export type DeliveryOutcomeKind = 'processed' | 'duplicate' | 'refused' | 'failed' | 'busy' | 'unavailable';

/** One delivery's outcome. */
export interface DeliveryOutcome {
  /** The HTTP status answered. */
  status: number;
  /** processed, duplicate (200); refused (4xx: not the gateway's, or never processable); failed (500); busy (503: in progress elsewhere, or the receiver's workers are full); unavailable (503: the store). */
  outcome: DeliveryOutcomeKind;
  /** The error code answered, for every outcome but processed and duplicate. */
  code?: string;
  /** Once verified. */
  jobId?: string;
  dialect?: DialectName;
  /** From the start of the request to the answer. */
  durationMs: number;
  /** Body bytes this receiver read (0 when it was refused on its headers). */
  bodyBytes: number;
}

/** The receivers' names in telemetry (`adapter` attribute). */
export type AdapterName = 'express' | 'middleware' | 'fetch' | 'agnostic';

export interface ResolvedReceiver<Req> {
  onEvent: ReceiverOptionsBase<Req>['onEvent'];
  runner: JobRunner;
  log: Logger;
  retryAfterSeconds: number | undefined;
  bodyTimeoutMs: number;
  /** The replay window, ms: a completion is remembered until max(finished_at, receipt) + this. */
  windowMs: number;
  onDelivery: ((outcome: DeliveryOutcome) => void) | undefined;
  adapter: AdapterName;
  /** Bodies in flight, verifications per digest, digests known completed. */
  guard: DeliveryGuard;
  /** Lowercase hex SHA-256 of raw bytes (node:crypto or WebCrypto): how a known digest's body is recognised. */
  hashRaw: (body: Uint8Array) => string | Promise<string>;
}

/** Checks the receiver options (TypeError for mistakes) and takes or builds the job runner, once. */
export function resolveReceiver<Req, Tx>(
  options: ReceiverOptionsBase<Req, Tx> & { maxAgeSeconds?: number | false },
  adapter: AdapterName,
  maxBodyBytes: number,
  hashRaw: (body: Uint8Array) => string | Promise<string>,
): ResolvedReceiver<Req> {
  if (typeof options !== 'object' || options === null) throw new TypeError('options must be an object with publicKey and onEvent');
  if (typeof options.onEvent !== 'function') throw new TypeError('onEvent must be a function (event, context) => void | Promise<void>');
  const runner = runnerFor(options as JobRunnerOptions & { runner?: JobRunner });
  // The runner's log, unless a shared runner was given and this receiver has a log of its own.
  const log = options.runner !== undefined && options.log !== undefined ? resolveLogger(options.log) : runner.options.log;
  const maxAgeSeconds = options.maxAgeSeconds === false ? undefined : (options.maxAgeSeconds ?? DEFAULT_MAX_AGE_SECONDS);
  checkReplayWindow(maxAgeSeconds, runner.options.retainMs);
  return {
    onEvent: options.onEvent as ReceiverOptionsBase<Req>['onEvent'],
    runner,
    log,
    retryAfterSeconds: options.retryAfterSeconds === undefined ? undefined : checkNumber(options.retryAfterSeconds, 'retryAfterSeconds', { integer: true }),
    bodyTimeoutMs: optionalNumber(options.bodyTimeoutMs, 'bodyTimeoutMs', DEFAULT_BODY_TIMEOUT_MS),
    windowMs: (maxAgeSeconds ?? 0) * 1000,
    onDelivery: checkHook(options.onDelivery),
    adapter,
    guard: new DeliveryGuard(options, maxBodyBytes),
    hashRaw,
  };
}

function checkHook(hook: unknown): ((outcome: DeliveryOutcome) => void) | undefined {
  if (hook !== undefined && typeof hook !== 'function') throw new TypeError('onDelivery must be a function (outcome) => void');
  return hook as ((outcome: DeliveryOutcome) => void) | undefined;
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
 * read), logged at the level it deserves, counted and heard (`onDelivery`). `started`:
 * when the request began (performance.now()); `bodyBytes`: what was read of its body.
 */
export function refuse<Req>(r: ResolvedReceiver<Req>, err: unknown, started?: number, bodyBytes = 0): ReceiverAnswer {
  r.runner.options.telemetry.instant('jobhook.receive', 'server', SPAN_ADAPTER.get(r.adapter), codeOf(err));
  return refusal(r, err, started, bodyBytes);
}

function codeOf(err: unknown): string {
  return isWebhookError(err) ? err.code : 'INTERNAL_ERROR';
}

/** `refuse` without a span of its own (inside a delivery's span). */
function refusal<Req>(r: ResolvedReceiver<Req>, err: unknown, started: number | undefined, bodyBytes: number): ReceiverAnswer {
  if (isWebhookError(err) && err.code === 'BODY_UNAVAILABLE') r.runner.report('body', err);
  else logRefusal(r.log, err);
  const answer = answerForError(err);
  const code = codeOf(err);
  return delivered(r, answer, { outcome: outcomeOf(answer.status, code), code, started, bodyBytes });
}

/** The outcome kind of an answer that is not a 2xx. */
function outcomeOf(status: number, code: string): DeliveryOutcomeKind {
  if (status < 500) return 'refused';
  if (code === 'STORE_UNAVAILABLE') return 'unavailable';
  if (status === 503) return 'busy';
  return 'failed';
}

/** Counts a delivery (`jobhook.deliveries`), tells `onDelivery`, and gives the answer back. */
function delivered<Req>(
  r: ResolvedReceiver<Req>,
  answer: ReceiverAnswer,
  d: { outcome: DeliveryOutcomeKind; code?: string; jobId?: string; dialect?: DialectName; started: number | undefined; bodyBytes: number },
): ReceiverAnswer {
  const { telemetry } = r.runner.options;
  if (telemetry.deliveries !== undefined) telemetry.deliveries.add(1, deliverySets(r.adapter).get(d.outcome, d.code, d.dialect));
  if (r.onDelivery !== undefined) {
    const outcome: DeliveryOutcome = {
      status: answer.status,
      outcome: d.outcome,
      ...(d.code === undefined ? {} : { code: d.code }),
      ...(d.jobId === undefined ? {} : { jobId: d.jobId }),
      ...(d.dialect === undefined ? {} : { dialect: d.dialect }),
      durationMs: d.started === undefined ? 0 : Math.round((performance.now() - d.started) * 1000) / 1000,
      bodyBytes: d.bodyBytes,
    };
    try {
      r.onDelivery(outcome);
    } catch (err) {
      r.log.error('jobhook: onDelivery threw', errorDetails(err));
    }
  }
  return answer;
}

/**
 * Attribute sets, made once and reused by every record: `{ adapter }` (metrics),
 * `{ 'jobhook.adapter' }` (spans), and per adapter `jobhook.deliveries`' `{ outcome, adapter, code?, dialect? }`.
 */
const METRIC_ADAPTER = new AttributeSets((adapter) => ({ adapter }));
const SPAN_ADAPTER = new AttributeSets((adapter) => ({ 'jobhook.adapter': adapter }));
const DELIVERY_SETS = new Map<AdapterName, AttributeSets>();
function deliverySets(adapter: AdapterName): AttributeSets {
  let sets = DELIVERY_SETS.get(adapter);
  if (sets === undefined) {
    sets = new AttributeSets((outcome, code, dialect) => ({ outcome, adapter, ...(code === undefined ? {} : { code }), ...(dialect === undefined ? {} : { dialect }) }));
    DELIVERY_SETS.set(adapter, sets);
  }
  return sets;
}

/** Logs why a delivery was refused: debug when anyone could have sent it, info when it was signed. */
export function logRefusal(log: Logger, err: unknown): void {
  if (err instanceof ClientAbortedError) log.debug(`jobhook: ${err.message}`);
  else if (!isWebhookError(err)) log.error('jobhook: the receiver failed unexpectedly', errorDetails(err));
  else if (err.code === 'BODY_UNAVAILABLE') log.error(`jobhook: ${err.message}`);
  else if (UNSIGNED.has(err.code)) log.debug(`jobhook: refused a delivery: ${err.code}`, { message: err.message });
  else log.info(`jobhook: refused a signed delivery: ${err.code}`, { message: err.message });
}

/**
 * Receives one delivery whose raw bytes are in hand. `started`: when the request began
 * (performance.now()); `signature`: what opened it, so that requests carrying the same
 * one and the same bytes share a verification (the guard).
 */
export async function receive<Req>(
  r: ResolvedReceiver<Req>,
  verify: (body: string | Uint8Array, headers: HeadersInput) => VerifiedDelivery | Promise<VerifiedDelivery>,
  body: string | Uint8Array,
  headers: HeadersInput,
  request: Req,
  started: number = performance.now(),
  signature?: OpenedSignature,
): Promise<ReceiverAnswer> {
  const { telemetry } = r.runner.options;
  const bodyBytes = typeof body === 'string' ? body.length : body.byteLength;
  telemetry.bodySize?.record(bodyBytes, METRIC_ADAPTER.get(r.adapter));
  return telemetry.within('jobhook.receive', 'server', SPAN_ADAPTER.get(r.adapter), async (span) => {
    const key = signature === undefined ? undefined : digestKey(signature);
    const known = key === undefined ? undefined : r.guard.completed(key, r.runner.options.clock.now());
    if (known !== undefined) {
      const rawHash = await r.hashRaw(bytesOf(body));
      // The gateway's retry of a job done here: no canonical work. Any other body under this signature is not what was verified.
      if (known.bodies.includes(rawHash)) {
        r.log.debug(`jobhook: job ${known.jobId}: duplicate (its signature and bytes were verified and completed here)`);
        return delivered(r, answerForRun({ kind: 'duplicate' }, known.jobId, undefined), { outcome: 'duplicate', jobId: known.jobId, started, bodyBytes });
      }
      const err = new SignatureInvalidError(`The event this signature covers (job ${known.jobId}) was verified and completed here with another body: this one is not what was signed.`);
      fail(span, err);
      return refusal(r, err, started, bodyBytes);
    }
    let delivery: VerifiedDelivery;
    let own = true;
    const verifying = performance.now();
    try {
      delivery = await telemetry.phase('jobhook.verify', async () => {
        if (key === undefined) return verify(body, headers);
        const shared = await r.guard.once(key, body, () => verify(body, headers));
        own = shared.own;
        return shared.result;
      });
    } catch (err) {
      fail(span, err);
      return refusal(r, err, started, bodyBytes);
    } finally {
      telemetry.verifyDuration?.record((performance.now() - verifying) / 1000, METRIC_ADAPTER.get(r.adapter));
    }
    const { event, payload, jobId, dialect, keyIndex, canonicalSha256 } = delivery;
    span?.setAttribute('jobhook.job_id', jobId);
    span?.setAttribute('jobhook.dialect', dialect);
    // Remembered until the replay window closes on this event, however its finished_at and
    // the receipt relate (a finished_at slightly ahead of this clock included).
    const now = r.runner.options.clock.now();
    const finished = parseRfc3339(event.finished_at);
    if (finished !== undefined) telemetry.deliveryLag?.record(Math.max(0, now - finished) / 1000, METRIC_ADAPTER.get(r.adapter));
    const retainMs = Math.max(finished ?? now, now) + r.windowMs - now;
    const result = await r.runner.run(
      jobId,
      (claim: ClaimContext) => r.onEvent(event, eventContext({ source: 'webhook' as const, dialect, keyIndex, canonicalSha256, request }, jobId, payload, claim)),
      { retainMs },
    );
    if (result.kind === 'duplicate' || result.kind === 'in_progress') r.log.debug(`jobhook: job ${jobId}: ${result.kind.replace('_', ' ')}`);
    // Completed: the same signature and bytes again are answered duplicate without canonical work, while the window is open.
    // A shared result came with the same bytes: the request that verified them remembers them.
    if (key !== undefined && own && (result.kind === 'processed' || result.kind === 'duplicate')) {
      // A body verified on a worker was moved there and hashed there; one verified here is hashed now.
      const rawHash = rawHashes.get(delivery) ?? (typeof body === 'string' || body.byteLength === bodyBytes ? await r.hashRaw(bytesOf(body)) : undefined);
      // Never past the replay window on finished_at: a replay after it must meet EVENT_TOO_OLD, not a duplicate answer.
      const until = finished !== undefined && r.windowMs > 0 ? Math.min(now + retainMs, finished + r.windowMs) : now + retainMs;
      if (rawHash !== undefined) r.guard.remember(key, jobId, rawHash, until);
    }
    const answer = answerForRun(result, jobId, r.retryAfterSeconds);
    if (result.kind === 'processed' || result.kind === 'duplicate') return delivered(r, answer, { outcome: result.kind, jobId, dialect, started, bodyBytes });
    const code = RUN_CODE[result.kind];
    fail(span, undefined, code);
    return delivered(r, answer, { outcome: outcomeOf(answer.status, code), code, jobId, dialect, started, bodyBytes });
  });
}

const encoder = new TextEncoder();
const bytesOf = (body: string | Uint8Array): Uint8Array => (typeof body === 'string' ? encoder.encode(body) : body);

/** The error code answered for each run result that is not a 2xx. */
const RUN_CODE: Record<Exclude<RunResult['kind'], 'processed' | 'duplicate'>, string> = {
  in_progress: 'IN_PROGRESS',
  handler_failed: 'HANDLER_FAILED',
  store_unavailable: 'STORE_UNAVAILABLE',
  claim_lost: 'CLAIM_LOST',
};

/** The names of {@link ReceiverOptionsBase}. */
export const RECEIVER_OPTIONS = {
  ...JOB_RUNNER_OPTIONS,
  ...ADMISSION_OPTIONS,
  onEvent: true,
  runner: true,
  retryAfterSeconds: true,
  bodyTimeoutMs: true,
  onDelivery: true,
} as const satisfies OptionNamesOf<ReceiverOptionsBase<unknown>>;
