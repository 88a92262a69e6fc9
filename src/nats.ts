/**
 * Scale out on NATS JetStream (optional peer dependency: nats): receivers publish each
 * verified event with `Nats-Msg-Id` = `job_id` and answer 200 after the PubAck; workers
 * run your function for each message through the claim protocol and ack after it.
 * @packageDocumentation
 */

export { subjectMatches } from './lib/queues/jetstream.js';
export type {
  JetStreamHandlerOptions,
  JetStreamHandoff,
  JetStreamWorker,
  JetStreamWorkerOptions,
} from './lib/queues/jetstream.js';
export { GATEWAY_RETRY_HORIZON_MS, DEFAULT_QUEUE_RETAIN_MS, workKey } from './lib/queues/contract.js';
export type {
  QueueHandoff,
  QueuedEventContext,
  QueuedEventHandler,
  QueueWorkerOptionsBase,
} from './lib/queues/contract.js';

export { createJetStreamHandoff as createJetStreamHandler } from './lib/queues/jetstream.js';
export { createJetStreamWorkerCore as createJetStreamWorker } from './lib/queues/jetstream.js';
