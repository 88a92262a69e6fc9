/**
 * BullMQ on both sides of the queue: a receiver's `onEvent` that adds the verified event
 * as a job whose id derives from `job_id` (BullMQ keeps one job per id: a second add of
 * the same id returns the job already there), and a processor that runs the user's
 * function for each job through the job runner.
 */
import type { JobsOptions, Worker, WorkerOptions } from 'bullmq';
import type { JsonObjectValue, JobCompletedEvent } from '../core/event.js';
import { requirePeer } from '../runtime/peer.js';
import type { RunResult } from '../jobs/runner.js';
import {
  acknowledged,
  checkRetainMs,
  checkTimeoutMs,
  eventData,
  queuedEvent,
  resolveWorker,
  retryDelayMs,
  runQueued,
  type QueueHandoff,
  type QueueWorkerOptionsBase,
} from './contract.js';

/** The job name every event is added under. */
export const BULLMQ_JOB_NAME = 'async_job_completed';

/**
 * The BullMQ job id of a gateway `job_id`, deterministic and one-to-one: BullMQ refuses
 * custom ids holding `:` and ids that read as integers (`"42"`), so `%` and `:` are
 * percent-encoded (`%25`, `%3A`), and so is the first character of an id that reads as
 * an integer (`"42"` → `"%342"`). Everything else is kept: a UUID is its own job id.
 * Percent-decoding gives the `job_id` back.
 */
export function bullmqJobId(jobId: string): string {
  const id = jobId.replace(/[%:]/g, (c) => (c === '%' ? '%25' : '%3A'));
  if (`${parseInt(id, 10)}` !== id) return id;
  return `%${id.charCodeAt(0).toString(16).toUpperCase()}${id.slice(1)}`;
}

/** The part of a BullMQ `Queue` the handler uses (any `Queue` from bullmq fits). */
export interface BullMQQueueLike {
  readonly name: string;
  add(name: string, data: JsonObjectValue, opts?: JobsOptions): Promise<{ readonly id?: string | undefined }>;
}

export interface BullMQHandlerOptions {
  /**
   * How long BullMQ must still know a job id after the job finished, so a second add of
   * it is dropped (default 5 min; at least the gateway's retry horizon, 210 s). Sets the
   * jobs' `removeOnComplete: { age }` (over the queue's default); a `jobOptions.removeOnComplete`
   * that removes finished jobs sooner is refused.
   */
  retainMs?: number;
  /** How long to wait for Redis to acknowledge the add before answering 5xx (default 5 s). */
  timeoutMs?: number;
  /**
   * Job options for every job (attempts, backoff, priority…), over the queue's defaults.
   * Default attempts 5 with exponential backoff from 1 s. `jobId` is jobhook's.
   */
  jobOptions?: Omit<JobsOptions, 'jobId'>;
}

/** Why `removeOnComplete` would forget a finished job sooner than `retainMs`, or undefined. */
function forgetsSooner(value: JobsOptions['removeOnComplete'], retainSeconds: number): string | undefined {
  if (value === undefined || value === false) return undefined;
  if (value === true) return 'true (removed at once)';
  if (typeof value === 'number') return `${value} (a count: a busy queue removes a job at once)`;
  if ('age' in value && typeof value.age === 'number' && value.count === undefined)
    return value.age < retainSeconds ? `{ age: ${value.age} }` : undefined;
  return `${JSON.stringify(value)} (a count: a busy queue removes a job at once)`;
}

/** Checks the options (TypeError for mistakes) and builds the job options of every add, once. */
export function resolveBullMQHandler(
  queue: BullMQQueueLike,
  options: BullMQHandlerOptions = {},
): { jobOptions: JobsOptions; timeoutMs: number } {
  if (typeof queue !== 'object' || queue === null || typeof queue.add !== 'function')
    throw new TypeError('queue must be a BullMQ Queue');
  if (typeof options !== 'object' || options === null) throw new TypeError('options must be an object');
  const retainMs = checkRetainMs(options.retainMs);
  const timeoutMs = checkTimeoutMs(options.timeoutMs);
  const given = options.jobOptions ?? {};
  if (typeof given !== 'object' || given === null) throw new TypeError('jobOptions must be an object');
  if ('jobId' in given) throw new TypeError('jobOptions.jobId is set by jobhook (from job_id); leave it out');
  const retainSeconds = Math.ceil(retainMs / 1000);
  const problem = forgetsSooner(given.removeOnComplete, retainSeconds);
  if (problem !== undefined) {
    throw new TypeError(
      `jobOptions.removeOnComplete is ${problem}: BullMQ drops a second add of a job id only while it keeps the job, and a retry of the gateway can add it again up to ${retainSeconds} s later (retainMs). Use { age: ${retainSeconds} } or more, or leave it out.`,
    );
  }
  const jobOptions: JobsOptions = {
    attempts: 5,
    backoff: { type: 'exponential', delay: 1_000 },
    ...given,
    // Over the queue's defaults too (BullMQ merges job options over them).
    removeOnComplete:
      given.removeOnComplete === undefined || given.removeOnComplete === false
        ? { age: retainSeconds }
        : given.removeOnComplete,
  };
  return { jobOptions, timeoutMs };
}

/**
 * An `onEvent` for a receiver that adds each verified event to a BullMQ queue and
 * returns once Redis acknowledged the add, so the receiver answers 200 only for events
 * the queue holds. The job id is `bullmqJobId(job_id)` (the `job_id` itself for a UUID;
 * `%` and `:` percent-encoded, as BullMQ refuses `:`), so a second add of the same job
 * (a retry after an add whose acknowledgement was lost) returns the job already queued.
 * BullMQ knows a job id only while it keeps the job: finished jobs are kept `retainMs`
 * (default 5 min, `removeOnComplete: { age }`), longer than the gateway retries. No
 * acknowledgement within `timeoutMs` (default 5 s), or Redis failing: it throws a
 * `StoreUnavailableError`, so the receiver answers 5xx and the gateway retries.
 *
 * @example
 * ```ts
 * import { Queue } from 'bullmq';
 * import { createReceiver } from 'jobhook/express';
 * import { createBullMQHandler } from 'jobhook/bullmq';
 * import { RedisIdempotencyStore } from 'jobhook/redis';
 *
 * const queue = new Queue('gateway-events', { connection: { host: 'redis', enableOfflineQueue: false } });
 * app.post('/webhooks/gateway', createReceiver({
 *   publicKey: process.env.GATEWAY_PUBLIC_KEY!,
 *   store: new RedisIdempotencyStore({ url: process.env.REDIS_URL! }), // shared by every receiver
 *   onEvent: createBullMQHandler(queue),
 * }));
 * ```
 * @throws TypeError for bad options, or job options that would drop finished jobs before `retainMs`.
 *
 * The receiving side: an `onEvent` that adds the event to `queue` under the job id
 * `bullmqJobId(job_id)` and returns once Redis acknowledged it (the receiver answers
 * 200); a job already there counts as added.
 */
export function createBullMQHandoff(
  queue: BullMQQueueLike,
  options: BullMQHandlerOptions = {},
): QueueHandoff {
  const { jobOptions, timeoutMs } = resolveBullMQHandler(queue, options);
  return async (_event, { jobId, payload }) => {
    const jobIdInQueue = bullmqJobId(jobId);
    await acknowledged(
      queue.add(BULLMQ_JOB_NAME, eventData(payload), { ...jobOptions, jobId: jobIdInQueue }),
      timeoutMs,
      `adding job ${jobIdInQueue} to the BullMQ queue "${queue.name}"`,
    );
  };
}

/** The part of a BullMQ `Job` the processor uses. */
export interface BullMQJobLike {
  readonly id?: string | undefined;
  readonly data: unknown;
  readonly attemptsMade: number;
  /** Starts of this job (BullMQ 5 and later). */
  readonly attemptsStarted?: number;
  moveToDelayed(timestamp: number, token?: string): Promise<void>;
}

/** What the processor returns to BullMQ (kept as the job's return value). */
export type QueuedRunOutcome = 'processed' | 'duplicate';

/** Options of the processor: the user's function and the runner (or its options). */
export type BullMQProcessorOptions<Tx = unknown> = QueueWorkerOptionsBase<Tx>;

/**
 * A BullMQ processor (for a `Worker` of your own) that runs `onEvent` once per queued
 * event through the job runner: the job is claimed in the store under `work:<job_id>`,
 * renewed while `onEvent` runs, and completed after it. With
 * `PostgresIdempotencyStore({ transactional: true })`, writes through
 * `context.transaction` happen exactly once; otherwise at least once, and every job that
 * may have run twice (a worker killed mid-job whose job another worker took over) is
 * reported to `onError` (stage `superseded`). A throwing `onEvent` fails the attempt
 * (BullMQ retries per `attempts`/`backoff`); a job held by another worker, a store
 * outage or a lost claim delay the job without using an attempt.
 *
 * @example
 * ```ts
 * import { Worker } from 'bullmq';
 * import { createBullMQProcessor } from 'jobhook/bullmq';
 *
 * const processor = createBullMQProcessor({ store, onEvent: async (event, { transaction }) => save(event, transaction) });
 * new Worker('gateway-events', processor, { connection, concurrency: 8 });
 * ```
 *
 * The working side: a BullMQ processor that runs the user's function for each job's
 * event through the job runner. Done (processed now, or before): the job completes.
 * The function threw: the job fails this attempt (BullMQ retries it per its attempts
 * and backoff). Another worker holds the job, the store is down, or a transactional
 * claim was lost: the job is delayed and tried again without using an attempt. A job
 * that is not an event of `createBullMQHandler` fails for good.
 */
export function createBullMQProcessor<Tx = unknown>(
  options: BullMQProcessorOptions<Tx>,
): (job: BullMQJobLike, token?: string) => Promise<QueuedRunOutcome> {
  const { runner, onEvent } = resolveWorker(options);
  const { DelayedError, UnrecoverableError } = requirePeer<typeof import('bullmq')>(
    'bullmq',
    'createBullMQProcessor',
  );
  return async (job, token) => {
    let event: JobCompletedEvent;
    try {
      event = queuedEvent(job.data);
      if (job.id !== undefined && job.id !== bullmqJobId(event.job_id))
        throw new TypeError(
          `the job's id ${job.id} is not the one jobhook derives from its job_id (${bullmqJobId(event.job_id)})`,
        );
    } catch (err) {
      runner.report('body', err, job.id);
      throw new UnrecoverableError(
        `not a jobhook event: ${err instanceof Error ? err.message : String(err)}`,
      );
    }
    // attemptsStarted counts every start (a retry, a stalled job's restart); BullMQ before 5 had attemptsMade only.
    const delivery = Math.max(1, job.attemptsStarted ?? job.attemptsMade + 1);
    const result: RunResult = await runQueued(runner, onEvent, event, delivery);
    switch (result.kind) {
      case 'processed':
      case 'duplicate':
        return result.kind;
      case 'handler_failed':
        // The runner reported the handler's error; BullMQ counts the attempt and backs off.
        throw new Error(`the handler failed for job ${event.job_id} (see the log or onError)`);
      default:
        await job.moveToDelayed(Date.now() + retryDelayMs(result, delivery), token);
        throw new DelayedError(`job ${event.job_id}: ${result.kind}, tried again later`);
    }
  };
}

/** Options of `createBullMQWorker`'s third argument: BullMQ's own (connection, concurrency, lockDuration…). */
export type BullMQWorkerOptions = WorkerOptions;

/**
 * A BullMQ `Worker` on `queueName` running {@link createBullMQProcessor}: your function
 * and the runner (or its options) in `options`, BullMQ's worker options (`connection`,
 * `concurrency`, `lockDuration`…) in `workerOptions`. Close it with `await worker.close()`.
 *
 * @example
 * ```ts
 * import { createBullMQWorker } from 'jobhook/bullmq';
 * import { PostgresIdempotencyStore } from 'jobhook/postgres';
 *
 * const store = new PostgresIdempotencyStore({ pool, transactional: true });
 * const worker = createBullMQWorker('gateway-events', {
 *   store,
 *   onEvent: async (event, { transaction }) => {
 *     await transaction!.query('INSERT INTO results (job_id, status) VALUES ($1, $2)', [event.job_id, event.status]);
 *   },
 * }, { connection: { host: 'redis' }, concurrency: 8 });
 * ```
 */
export function createBullMQWorkerCore<Tx = unknown>(
  queueName: string,
  options: BullMQProcessorOptions<Tx>,
  workerOptions: BullMQWorkerOptions,
): Worker {
  if (typeof queueName !== 'string' || queueName === '')
    throw new TypeError('queueName must be the name of the BullMQ queue');
  if (typeof workerOptions !== 'object' || workerOptions === null)
    throw new TypeError("workerOptions must be BullMQ's worker options, with connection");
  const { Worker: WorkerClass } = requirePeer<typeof import('bullmq')>('bullmq', 'createBullMQWorker');
  const processor = createBullMQProcessor(options);
  return new WorkerClass(queueName, (job, token) => processor(job, token), workerOptions);
}
