/**
 * Scale out on BullMQ (optional peer dependency: bullmq): receivers hand each verified
 * event to a queue, acknowledged by Redis before the 200; workers run your function for
 * each queued event through the claim protocol.
 * @packageDocumentation
 */

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

export { createBullMQHandoff as createBullMQHandler } from './lib/queues/bullmq.js';
export { createBullMQProcessor } from './lib/queues/bullmq.js';
export { createBullMQWorkerCore as createBullMQWorker } from './lib/queues/bullmq.js';
