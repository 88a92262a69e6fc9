/**
 * The queue-handoff contract, shared by every queue adapter (BullMQ, JetStream, and any
 * a user writes for SQS, Pub/Sub, Kafka):
 *
 * Receiving side (`onEvent` of a receiver): publish the verified event keyed by its
 * `job_id` so that the broker drops a second publish of the same id (its own dedup),
 * wait for the broker's acknowledgement, and only then return, so the receiver answers
 * 200 only for events the broker holds; throw (the receiver answers 5xx, the gateway
 * retries) when the acknowledgement does not come in time. A publish whose outcome is
 * unknown (a timeout) may still land: the retry's publish is then a duplicate the
 * broker must drop, so its dedup must outlive the gateway's retries (`retainMs`).
 *
 * Working side: run the user's function for each queued event through the job runner
 * (the claim protocol and a store), under a key of its own (`workKey`), and acknowledge
 * the message only once the runner says the job is done (processed now or before).
 */
import { createHash } from 'node:crypto';
import { parseRfc3339, type JobCompletedEvent, type JsonObjectValue } from '../core/event.js';
import { StoreUnavailableError } from '../base/errors.js';
import type { IdempotencyStore, TransactionalStore } from '../jobs/store.js';
import { checkMs } from '../base/options.js';
import { jobIdProblem, MAX_JOB_ID_LENGTH } from '../base/protocol.js';
import { eventContext, type EventContextBase } from '../jobs/context.js';
import {
  runnerFor,
  type ClaimContext,
  type JobRunner,
  type JobRunnerOptions,
  type RunResult,
} from '../jobs/runner.js';

/**
 * How long after a delivery's first attempt the gateway can still send it again: 4
 * attempts of at most 30 s each and 3 backoffs of at most 30 s (docs/protocol.md, "What the gateway sends") = 210 s. A
 * publish whose outcome was unknown can be repeated by a retry only within this time.
 */
export const GATEWAY_RETRY_HORIZON_MS = 4 * 30_000 + 3 * 30_000;

/**
 * How long a broker must still recognise a job id it took, by default: the gateway's
 * retry horizon (210 s) plus 90 s of headroom (a receiver's lease and takeover grace,
 * clock differences between receivers and broker) = 5 min.
 */
export const DEFAULT_QUEUE_RETAIN_MS = 300_000;

/** How long a handler waits for the broker's acknowledgement by default. */
export const DEFAULT_PUBLISH_TIMEOUT_MS = 5_000;

/** `retainMs` of a queue handler: whole ms, at least the gateway's retry horizon. */
export function checkRetainMs(value: unknown): number {
  if (value === undefined) return DEFAULT_QUEUE_RETAIN_MS;
  const ms = checkMs(value, 'retainMs');
  if (ms < GATEWAY_RETRY_HORIZON_MS) {
    throw new TypeError(
      `retainMs must be at least ${GATEWAY_RETRY_HORIZON_MS} ms (the gateway's retries: 4 attempts of 30 s and 3 backoffs of 30 s), so that the broker drops the publish of a retry that follows an unacknowledged one; got ${ms}`,
    );
  }
  return ms;
}

/** `timeoutMs` of a queue handler: whole ms, less than the gateway's 30 s attempt. */
export function checkTimeoutMs(value: unknown): number {
  if (value === undefined) return DEFAULT_PUBLISH_TIMEOUT_MS;
  const ms = checkMs(value, 'timeoutMs');
  if (ms >= 30_000)
    throw new TypeError(
      `timeoutMs must be less than 30,000 ms (the gateway gives an attempt 30 s); got ${ms}`,
    );
  return ms;
}

/**
 * Waits for `promise` at most `timeoutMs`; past that, or when it rejects, throws a
 * `StoreUnavailableError` naming `what`, so the delivery is answered 5xx and retried.
 * (The operation may still complete later: the broker's dedup covers the retry.)
 */
export async function acknowledged<T>(promise: Promise<T>, timeoutMs: number, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new StoreUnavailableError(`${what}: no acknowledgement within ${timeoutMs} ms`)),
      timeoutMs,
    );
  });
  try {
    return await Promise.race([promise, late]);
  } catch (err) {
    if (err instanceof StoreUnavailableError) throw err;
    throw new StoreUnavailableError(`${what} failed: ${err instanceof Error ? err.message : String(err)}`, {
      cause: err,
    });
  } finally {
    clearTimeout(timer);
    // A late rejection of the operation itself must not become an unhandled one.
    promise.catch(() => undefined);
  }
}

/** `JSON.stringify` replacer: integers read as bigint travel as decimal strings (JSON has no other lossless form). */
function bigintAsString(_key: string, value: unknown): unknown {
  return typeof value === 'bigint' ? value.toString() : value;
}

function holdsBigInt(value: unknown): boolean {
  if (typeof value === 'bigint') return true;
  if (typeof value !== 'object' || value === null) return false;
  for (const v of Array.isArray(value) ? value : Object.values(value)) if (holdsBigInt(v)) return true;
  return false;
}

/** The event as JSON text for a message body. */
export function eventText(payload: JsonObjectValue): string {
  return JSON.stringify(payload, bigintAsString);
}

/** The event as a value any JSON serializer can write (a copy only when it holds bigints). */
export function eventData(payload: JsonObjectValue): JsonObjectValue {
  return holdsBigInt(payload) ? (JSON.parse(eventText(payload)) as JsonObjectValue) : payload;
}

/**
 * The event of a queued message, or a TypeError saying why the message is not one a
 * jobhook handler published (it will never be processed: the caller dead-letters it).
 */
export function queuedEvent(data: unknown): JobCompletedEvent {
  const value = typeof data === 'string' ? (JSON.parse(data) as unknown) : data;
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    throw new TypeError('the queued message is not a JSON object');
  const event = value as { event?: unknown; job_id?: unknown };
  if (event.event !== 'async_job_completed')
    throw new TypeError(
      `the queued message is not an async_job_completed event (event: ${JSON.stringify(event.event)})`,
    );
  const problem = jobIdProblem(event.job_id);
  if (problem !== undefined) throw new TypeError(`the queued message has no usable job_id: ${problem}`);
  return value as JobCompletedEvent;
}

const WORK = 'work:';

/**
 * The key under which workers claim a queued job in the store: `work:<job_id>`, so
 * receivers (which record `<job_id>` once the broker took the event) and workers (which
 * record `work:<job_id>` once the user's function ran) can share one store. A job id
 * too long for that (over 251 characters) is keyed `work#` + its SHA-256 in hex.
 */
export function workKey(jobId: string): string {
  return [...jobId].length + WORK.length <= MAX_JOB_ID_LENGTH
    ? WORK + jobId
    : `work#${createHash('sha256').update(jobId, 'utf8').digest('hex')}`;
}

/**
 * A receiver's `onEvent` that hands the event to a queue: it needs only the job id and
 * the event as a JSON object, so it fits receivers and the reconciler alike.
 */
export type QueueHandoff = (
  event: JobCompletedEvent,
  context: Pick<EventContextBase, 'jobId' | 'payload'>,
) => Promise<void>;

/** What a worker's function gets besides the event. */
export interface QueuedEventContext<Tx = unknown> extends EventContextBase<Tx> {
  source: 'queue';
  /** Which delivery of this message this is (1 the first time; more after a retry, a redelivery or a crashed worker). */
  delivery: number;
}

/** The user's function on the working side. Throw to have the broker deliver the event again. */
export type QueuedEventHandler<Tx = unknown> = (
  event: JobCompletedEvent,
  context: QueuedEventContext<Tx>,
) => void | Promise<void>;

/** Options shared by every worker helper: the function, and the job runner (given, or made from its options). */
export interface QueueWorkerOptionsBase<Tx = unknown> extends JobRunnerOptions {
  /** Runs once per job (exactly once for writes through `context.transaction` with a transactional store). */
  onEvent: QueuedEventHandler<Tx>;
  /** Idempotency store shared by the workers (default: a memory store of this worker, which protects one process only). */
  store?: TransactionalStore<Tx> | IdempotencyStore;
  /** A job runner shared with other workers (`createJobRunner`); give either it or its options. */
  runner?: JobRunner;
}

/** Checks the worker options (TypeError for mistakes) and takes or makes the runner. */
export function resolveWorker<Tx>(options: QueueWorkerOptionsBase<Tx>): {
  runner: JobRunner;
  onEvent: QueuedEventHandler<Tx>;
} {
  if (typeof options !== 'object' || options === null)
    throw new TypeError('options must be an object with onEvent');
  if (typeof options.onEvent !== 'function')
    throw new TypeError('onEvent must be a function (event, context) => void | Promise<void>');
  return {
    runner: runnerFor(options as JobRunnerOptions & { runner?: JobRunner }),
    onEvent: options.onEvent,
  };
}

/** Runs one queued event's job through the runner. */
export function runQueued<Tx>(
  runner: JobRunner,
  onEvent: QueuedEventHandler<Tx>,
  event: JobCompletedEvent,
  delivery: number,
): Promise<RunResult> {
  const jobId = event.job_id;
  // The runner's retainMs counted from the later of finished_at and the completion, as every path counts it.
  const finishedAt = parseRfc3339(event.finished_at);
  return runner.run(
    workKey(jobId),
    (claim: ClaimContext) =>
      onEvent(
        event,
        eventContext<Tx, { source: 'queue'; delivery: number }>(
          { source: 'queue', delivery },
          jobId,
          event as unknown as JsonObjectValue,
          claim,
        ),
      ),
    finishedAt === undefined ? {} : { finishedAt },
  );
}

/** How long to wait before the message is tried again, for a run that did not end the job. */
export function retryDelayMs(result: RunResult, delivery: number): number {
  switch (result.kind) {
    case 'in_progress':
      return Math.max(250, result.retryAfterMs ?? 1_000);
    case 'claim_lost':
      return Math.max(250, result.retryAfterMs);
    default:
      // A failing handler or store: back off from 1 s, doubling, at most 30 s.
      return Math.min(30_000, 1_000 * 2 ** Math.min(5, Math.max(0, delivery - 1)));
  }
}
