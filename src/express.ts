/**
 * jobhook for Express (4 and 5), Connect and node:http.
 * @packageDocumentation
 */
import { createMiddleware, createReceiver, type NodeHandler, type WebhookMiddlewareOptions, type WebhookReceiverOptions } from './lib/adapters/express.js';

export type { NextFunction, NodeHandler, WebhookMiddlewareOptions, WebhookReceiverOptions } from './lib/adapters/express.js';
export type { NodeWebhookRequest } from './lib/adapters/node-http.js';
export type { EventContext, ReceiverFlowOptions } from './lib/receive/flow.js';
export type { HttpAnswer, ReceiverErrorCode } from './lib/receive/answers.js';
export { STATUS_BY_CODE } from './lib/receive/answers.js';
export { keepRawBody } from './lib/adapters/node-http.js';

/**
 * Verifies the delivery and sets `req.webhook` (`{ event, jobId, dialect, keyIndex, canonicalSha256 }`),
 * then calls `next()`. Failures are answered per DESIGN §4 (401/400/413 with a JSON
 * error body), or passed to `next(err)` with `onError: 'next'`. It reads the raw
 * body itself; mount it before `express.json()`, or keep the bytes with `keepRawBody`.
 *
 * @example
 * ```ts
 * import express from 'express';
 * import { webhookMiddleware } from 'jobhook/express';
 *
 * const app = express();
 * app.post('/webhooks/gateway', webhookMiddleware({ publicKey: process.env.GATEWAY_PUBLIC_KEY! }), (req, res) => {
 *   console.log(req.webhook!.jobId);
 *   res.sendStatus(204);
 * });
 * ```
 */
export function webhookMiddleware(options: WebhookMiddlewareOptions): NodeHandler {
  return createMiddleware(options);
}

/**
 * The complete receiver: verify, claim the `job_id` in the idempotency store, run
 * `onEvent` once, then answer 200 (processed or duplicate), 503 + Retry-After while
 * the same job is in progress, 500 when the handler throws (the claim is released so
 * the gateway's retry processes it), 503 when the store fails, 401/400/413 on bad input.
 *
 * @example
 * ```ts
 * import express from 'express';
 * import { webhookReceiver } from 'jobhook/express';
 *
 * const app = express();
 * app.post('/webhooks/gateway', webhookReceiver({
 *   publicKey: process.env.GATEWAY_PUBLIC_KEY!,
 *   onEvent: async (event, { jobId }) => {
 *     if (event.status === 'success') await saveResult(jobId, event.output);
 *     else await markFailed(jobId, event.error.message);
 *   },
 * }));
 * app.use(express.json()); // other routes may parse JSON; mount the receiver first
 * ```
 */
export function webhookReceiver(options: WebhookReceiverOptions): NodeHandler {
  return createReceiver(options);
}
