/**
 * Scale out on BullMQ (optional peer dependency: bullmq): receivers hand each verified
 * event to a queue, acknowledged by Redis before the 200; workers run your function for
 * each queued event through the claim protocol.
 * @packageDocumentation
 */
import type { Worker } from 'bullmq';
import {
  createBullMQHandoff,
  createBullMQProcessor as createProcessor,
  createBullMQWorkerCore,
  type BullMQHandlerOptions,
  type BullMQJobLike,
  type BullMQProcessorOptions,
  type BullMQQueueLike,
  type BullMQWorkerOptions,
  type QueuedRunOutcome,
} from './lib/queues/bullmq.js';
import type { QueueHandoff } from './lib/queues/contract.js';

export { bullmqJobId, BULLMQ_JOB_NAME } from './lib/queues/bullmq.js';
export type {
  BullMQHandlerOptions,
  BullMQJobLike,
  BullMQProcessorOptions,
  BullMQQueueLike,
  BullMQWorkerOptions,
  QueuedRunOutcome,
} from './lib/queues/bullmq.js';
export { GATEWAY_RETRY_HORIZON_MS, DEFAULT_QUEUE_RETAIN_MS, workKey } from './lib/queues/contract.js';
export type {
  QueueHandoff,
  QueuedEventContext,
  QueuedEventHandler,
  QueueWorkerOptionsBase,
} from './lib/queues/contract.js';

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
 */
export function createBullMQHandler(queue: BullMQQueueLike, options?: BullMQHandlerOptions): QueueHandoff {
  return createBullMQHandoff(queue, options);
}

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
 */
export function createBullMQProcessor<Tx = unknown>(
  options: BullMQProcessorOptions<Tx>,
): (job: BullMQJobLike, token?: string) => Promise<QueuedRunOutcome> {
  return createProcessor(options);
}

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
export function createBullMQWorker<Tx = unknown>(
  queueName: string,
  options: BullMQProcessorOptions<Tx>,
  workerOptions: BullMQWorkerOptions,
): Worker {
  return createBullMQWorkerCore(queueName, options, workerOptions);
}
