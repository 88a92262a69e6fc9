/**
 * jobhook/gateway: the gateway's async-job API from the caller's side — a client that
 * creates and reads jobs (recording each as pending in the idempotency store), and the
 * reconciler that recovers completions whose webhook never arrived, through the same
 * job runner as the receivers. Runtime-neutral (fetch).
 * @packageDocumentation
 */

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

export { createGatewayClientCore as createGatewayClient } from './lib/gateway/client.js';
export { createReconcilerCore as createReconciler } from './lib/gateway/reconciler.js';
