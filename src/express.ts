/**
 * jobhook for Express (4 and 5), Connect and node:http.
 * @packageDocumentation
 */
import { createNodeReceiver, type ExpressReceiverOptions, type NodeHandler } from './lib/adapters/express.js';
import { createNodeMiddleware, type MiddlewareOptions } from './lib/adapters/middleware.js';
import type { ReceiverControls } from './lib/adapters/controls.js';
import type { VerifiedDelivery } from './lib/core/verify/core.js';

export type { ExpressReceiverOptions, NodeHandler } from './lib/adapters/express.js';
export type { MiddlewareOptions } from './lib/adapters/middleware.js';
export type { NextFunction } from './lib/adapters/node-http.js';
export type { NodeWebhookRequest } from './lib/adapters/node-http.js';
export { keepRawBody } from './lib/adapters/node-http.js';
export { createParserErrorHandler } from './lib/adapters/parser-errors.js';
export type { ErrorHandler, ParserErrorOptions } from './lib/adapters/parser-errors.js';

declare global {
  namespace Express {
    interface Request {
      /** The verified delivery, set by jobhook's `createMiddleware`. */
      webhook?: VerifiedDelivery;
    }
  }
}

/**
 * The complete receiver as an Express/Connect/node:http handler: reads the raw body
 * (limits, timeout, gzip/deflate/br), verifies, claims the `job_id`, runs `onEvent`
 * once (renewing the claim while it runs), records the completion, and answers 200
 * (processed or duplicate), 503 + Retry-After while the same job is in progress or
 * the store is unreachable, 500 when the handler throws (claim released, so the
 * gateway's retry processes it), 4xx for deliveries that are not the gateway's.
 * `await receiver.close()` on shutdown finishes store operations still waiting.
 *
 * @example
 * ```ts
 * import express from 'express';
 * import { createReceiver } from 'jobhook/express';
 *
 * const app = express();
 * app.post('/webhooks/gateway', createReceiver({
 *   publicKey: process.env.GATEWAY_PUBLIC_KEY!,
 *   onEvent: async (event, { jobId }) => {
 *     if (event.status === 'success') await saveResult(jobId, event.output);
 *     else await markFailed(jobId, event.error.message);
 *   },
 * }));
 * app.use(express.json()); // other routes may parse JSON; mount the receiver first
 * ```
 */
export function createReceiver<Tx = unknown>(
  options: ExpressReceiverOptions<Tx>,
): NodeHandler & ReceiverControls {
  return createNodeReceiver(options);
}

/**
 * Verification only: sets `req.webhook` (`{ event, payload, jobId, dialect, keyIndex,
 * canonicalSha256 }`) and calls `next()`; your route does the rest (no idempotency).
 * Failures are answered with the receiver's status codes, or passed to `next(err)` with
 * `errors: 'next'`. Mount it before `express.json()`, or keep the bytes with
 * `express.json({ limit: '25mb', verify: keepRawBody })`.
 *
 * @example
 * ```ts
 * import { createMiddleware } from 'jobhook/express';
 *
 * app.post('/webhooks/gateway', createMiddleware({ publicKey: process.env.GATEWAY_PUBLIC_KEY! }), (req, res) => {
 *   console.log(req.webhook?.jobId);
 *   res.sendStatus(204);
 * });
 * ```
 */
export function createMiddleware(options: MiddlewareOptions): NodeHandler {
  return createNodeMiddleware(options);
}
