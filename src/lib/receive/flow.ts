import { StoreUnavailableError, isWebhookError } from '../errors.js';
import type { JobCompletedEvent } from '../event.js';
import { DEFAULT_LEASE_MS, DEFAULT_RETAIN_MS, checkPositive, type IdempotencyStore } from '../idempotency/types.js';
import type { VerifiedDelivery } from '../verify/core.js';
import { checkReplayWindow } from '../verify/options.js';
import { DEFAULT_MAX_AGE_SECONDS } from '../protocol.js';
import { answerForError, errorAnswer, okAnswer, type HttpAnswer } from './answers.js';

/** What `onEvent` gets besides the event. */
export interface EventContext<Req = unknown> {
  jobId: string;
  dialect: VerifiedDelivery['dialect'];
  keyIndex: number;
  canonicalSha256: string;
  /** The framework's request object (Express `req`, Fetch `Request`). */
  request: Req;
}

/** Options of the complete receivers (Express and Fetch), besides the verifier's. */
export interface ReceiverFlowOptions<Req = unknown> {
  /** Called once per job id, after the signature is verified and the job claimed. Throw to have the gateway retry. */
  onEvent: (event: JobCompletedEvent, context: EventContext<Req>) => void | Promise<void>;
  /** Idempotency store shared by the receiver's instances (default: a `MemoryIdempotencyStore` of this receiver). */
  store?: IdempotencyStore;
  /** Lease of a claim: longer than `onEvent` can take (default 60 s). A crashed worker's job is retried after it. */
  leaseMs?: number;
  /** How long completed job ids are remembered (default 24 h). */
  retainMs?: number;
  /** `Retry-After` (seconds) on 503 while the same job is in progress (default: time left on the lease, 1–30 s). */
  retryAfterSeconds?: number;
  /** Told about failures that do not change the answer (a release or completion the store refused), and handler errors. */
  onError?: (error: unknown, context: { jobId?: string; stage: 'handler' | 'complete' | 'release' }) => void;
}

export interface ResolvedFlow<Req> {
  onEvent: ReceiverFlowOptions<Req>['onEvent'];
  store: IdempotencyStore;
  leaseMs: number;
  retainMs: number;
  retryAfterSeconds: number | undefined;
  onError: NonNullable<ReceiverFlowOptions<Req>['onError']>;
}

export function resolveFlow<Req>(options: ReceiverFlowOptions<Req> & { maxAgeSeconds?: number | false }, defaultStore: () => IdempotencyStore): ResolvedFlow<Req> {
  if (typeof options?.onEvent !== 'function') throw new TypeError('onEvent must be a function (event, context) => void | Promise<void>');
  const retainMs = options.retainMs === undefined ? DEFAULT_RETAIN_MS : checkPositive(options.retainMs, 'retainMs');
  checkReplayWindow(options.maxAgeSeconds === false ? undefined : (options.maxAgeSeconds ?? DEFAULT_MAX_AGE_SECONDS), retainMs);
  const store = options.store ?? defaultStore();
  for (const m of ['claim', 'complete', 'release'] as const) {
    if (typeof (store as unknown as Record<string, unknown>)[m] !== 'function') throw new TypeError(`store must implement ${m}()`);
  }
  return {
    onEvent: options.onEvent,
    store,
    leaseMs: options.leaseMs === undefined ? DEFAULT_LEASE_MS : checkPositive(options.leaseMs, 'leaseMs'),
    retainMs,
    retryAfterSeconds: options.retryAfterSeconds === undefined ? undefined : checkPositive(options.retryAfterSeconds, 'retryAfterSeconds'),
    onError: options.onError ?? (() => undefined),
  };
}

function storeFailure(err: unknown): StoreUnavailableError {
  if (err instanceof StoreUnavailableError) return err;
  return new StoreUnavailableError(`The idempotency store failed: ${(err as Error)?.message ?? String(err)}`, { cause: err });
}

/**
 * DESIGN §4 and §5: verify, claim the job id, run the handler once, then mark the
 * job completed (200) or release the claim (500, so the gateway retries).
 */
export async function receiveDelivery<Req>(verify: () => VerifiedDelivery | Promise<VerifiedDelivery>, flow: ResolvedFlow<Req>, request: Req): Promise<HttpAnswer> {
  let delivery: VerifiedDelivery;
  try {
    delivery = await verify();
  } catch (err) {
    return answerForError(err);
  }
  const { jobId } = delivery;
  let claim;
  try {
    claim = await flow.store.claim(jobId, { leaseMs: flow.leaseMs });
  } catch (err) {
    return answerForError(storeFailure(err));
  }
  if (claim.status === 'completed') return okAnswer('duplicate', jobId);
  if (claim.status === 'in_progress') {
    const seconds = flow.retryAfterSeconds ?? Math.min(30, Math.max(1, Math.ceil((claim.retryAfterMs ?? 5000) / 1000)));
    return errorAnswer(503, 'IN_PROGRESS', `Job ${jobId} is being processed by another delivery; retry later.`, { 'retry-after': String(seconds) });
  }
  const { token } = claim;
  try {
    await flow.onEvent(delivery.event, { jobId, dialect: delivery.dialect, keyIndex: delivery.keyIndex, canonicalSha256: delivery.canonicalSha256, request });
  } catch (err) {
    flow.onError(err, { jobId, stage: 'handler' });
    try {
      await flow.store.release(jobId, token);
    } catch (releaseError) {
      // The lease will expire on its own; the gateway's retry then gets the job.
      flow.onError(storeFailure(releaseError), { jobId, stage: 'release' });
    }
    return errorAnswer(500, 'HANDLER_FAILED', `The handler failed for job ${jobId}; the claim was released so a retry can process it.`);
  }
  try {
    const marked = await flow.store.complete(jobId, token, { retainMs: flow.retainMs });
    if (!marked) flow.onError(new StoreUnavailableError(`The claim on job ${jobId} expired before completion (leaseMs too short for the handler?).`), { jobId, stage: 'complete' });
  } catch (err) {
    // The event was handled: answering 5xx would make the gateway deliver it again.
    flow.onError(storeFailure(err), { jobId, stage: 'complete' });
  }
  return okAnswer('processed', jobId);
}

/** Verification only (the middleware): the answer for a failure, or undefined on success. */
export async function verifyOnly(verify: () => VerifiedDelivery | Promise<VerifiedDelivery>): Promise<{ delivery: VerifiedDelivery } | { answer: HttpAnswer; error: unknown }> {
  try {
    return { delivery: await verify() };
  } catch (err) {
    if (!isWebhookError(err)) throw err;
    return { answer: answerForError(err), error: err };
  }
}
