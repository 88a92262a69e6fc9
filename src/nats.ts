/**
 * Scale out on NATS JetStream (optional peer dependency: nats): receivers publish each
 * verified event with `Nats-Msg-Id` = `job_id` and answer 200 after the PubAck; workers
 * run your function for each message through the claim protocol and ack after it.
 * @packageDocumentation
 */
import type { JetStreamClient } from 'nats';
import {
  createJetStreamHandoff,
  createJetStreamWorkerCore,
  type JetStreamHandlerOptions,
  type JetStreamHandoff,
  type JetStreamWorker,
  type JetStreamWorkerOptions,
} from './lib/queues/jetstream.js';

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

/**
 * An `onEvent` for a receiver that publishes each verified event to `subject` with
 * `Nats-Msg-Id` = `job_id` and returns once the PubAck came from `stream` (a duplicate
 * PubAck, for a job id the stream already took, counts as done), so the receiver
 * answers 200 only for events the stream holds. JetStream drops a repeated message id
 * only within the stream's `duplicate_window`, so at construction it starts checking the
 * stream (the client's API is asynchronous: the outcome is `handler.ready`, and every
 * delivery waits for a passed check): the stream must exist, capture `subject`, and keep
 * `duplicate_window` ≥ `retainMs` (default 5 min: the gateway's retries, 210 s, plus
 * headroom; JetStream's own default is 2 min), else a TypeError naming `duplicate_window`.
 * No PubAck within `timeoutMs` (default 5 s): it throws a `StoreUnavailableError`, so the
 * receiver answers 5xx and the gateway retries.
 *
 * @example
 * ```ts
 * import { connect } from 'nats';
 * import { createReceiver } from 'jobhook/express';
 * import { createJetStreamHandler } from 'jobhook/nats';
 *
 * const nc = await connect({ servers: 'nats:4222' });
 * // once: await (await nc.jetstreamManager()).streams.add({ name: 'GATEWAY', subjects: ['gateway.events'], storage: StorageType.File, duplicate_window: 300e9 });
 * const onEvent = createJetStreamHandler(nc.jetstream(), { subject: 'gateway.events', stream: 'GATEWAY' });
 * await onEvent.ready; // fail at startup, not at the first delivery
 * app.post('/webhooks/gateway', createReceiver({ publicKey, store, onEvent }));
 * ```
 * @throws TypeError for bad options (synchronously); `ready` rejects for a stream that does not fit.
 */
export function createJetStreamHandler(
  js: JetStreamClient,
  options: JetStreamHandlerOptions,
): JetStreamHandoff {
  return createJetStreamHandoff(js, options);
}

/**
 * Consumes a durable pull consumer and runs `onEvent` once per message's job through
 * the job runner (claimed in the store under `work:<job_id>`, renewed while it runs,
 * completed after it), and acks the message only then. With
 * `PostgresIdempotencyStore({ transactional: true })`, writes through
 * `context.transaction` happen exactly once; otherwise at least once, and every job that
 * may have run twice (a worker killed mid-job) is reported to `onError` (stage
 * `superseded`). A throwing `onEvent`, a job held by another worker or a store outage:
 * the message is nak'ed with a delay and delivered again.
 *
 * @example
 * ```ts
 * import { createJetStreamWorker } from 'jobhook/nats';
 *
 * // once: await jsm.consumers.add('GATEWAY', { durable_name: 'workers', ack_policy: AckPolicy.Explicit });
 * const worker = createJetStreamWorker(nc.jetstream(), {
 *   stream: 'GATEWAY',
 *   consumer: 'workers',
 *   store,
 *   onEvent: async (event, { transaction }) => save(event, transaction),
 * });
 * process.on('SIGTERM', () => void worker.close());
 * ```
 */
export function createJetStreamWorker<Tx = unknown>(
  js: JetStreamClient,
  options: JetStreamWorkerOptions<Tx>,
): JetStreamWorker {
  return createJetStreamWorkerCore(js, options);
}
