/**
 * jobhook/gateway: the gateway's async-job API from the caller's side — a client that
 * creates and reads jobs (recording each as pending in the idempotency store), and the
 * reconciler that recovers completions whose webhook never arrived, through the same
 * job runner as the receivers. Runtime-neutral (fetch).
 * @packageDocumentation
 */
import {
  createGatewayClientCore,
  type GatewayClient,
  type GatewayClientOptions,
} from './lib/gateway/client.js';
import { createReconcilerCore, type Reconciler, type ReconcilerOptions } from './lib/gateway/reconciler.js';

export type {
  CreateJobRequest,
  GatewayClient,
  GatewayClientOptions,
  JobResource,
} from './lib/gateway/client.js';
export type { ReconcileReport, Reconciler, ReconcilerOptions } from './lib/gateway/reconciler.js';
export type { PollEventContext } from './lib/jobs/context.js';
export {
  GatewayError,
  GatewayNotFoundError,
  GatewayRejectedError,
  GatewayUnauthorizedError,
  GatewayUnavailableError,
  isGatewayError,
  type AnyGatewayError,
  type GatewayErrorCode,
} from './lib/base/errors.js';
export { JOBS_PATH } from './lib/base/protocol.js';

/**
 * A client of the gateway's async-job API. With a `store`, every job it creates is
 * recorded as pending, so {@link createReconciler} can recover its completion if the
 * webhook never arrives. Errors are `GatewayError`s with a `code` and the HTTP `status`.
 *
 * @example
 * ```ts
 * import { createGatewayClient } from 'jobhook/gateway';
 *
 * const gateway = createGatewayClient({ baseUrl: 'https://api.gateway.example', token: process.env.GATEWAY_TOKEN!, store });
 * const job = await gateway.createJob({
 *   model: 'ocr/ocr_async/amazon',
 *   input: { file_url: 'https://example.com/invoice.pdf' },
 *   webhook_receiver: 'https://app.example.com/webhooks/gateway',
 *   user_webhook_parameters: { order: 'A-17' },
 * });
 * const later = await gateway.getJob(job.public_id); // status: processing | success | fail
 * ```
 */
export function createGatewayClient(options: GatewayClientOptions): GatewayClient {
  return createGatewayClientCore(options);
}

/**
 * Recovers completions the webhook path missed: polls the jobs recorded as pending for
 * longer than `graceMs` and runs each finished one through the same claim, in the same
 * store, as the receivers, so each job's handler runs once whichever path wins.
 * `runOnce()` does one round; `start()` runs one every `intervalMs`.
 *
 * @example
 * ```ts
 * import { createReconciler } from 'jobhook/gateway';
 *
 * const reconciler = createReconciler({ client: gateway, store, onEvent: handle }); // handle: (event, context) => …
 * reconciler.start();
 * process.on('SIGTERM', () => void reconciler.stop());
 * ```
 */
export function createReconciler<Tx = unknown>(options: ReconcilerOptions<Tx>): Reconciler {
  return createReconcilerCore(options);
}
