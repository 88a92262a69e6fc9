/** The complete receiver as an Express/Connect/node:http handler. */
import type { ServerResponse } from 'node:http';
import type { OptionNamesOf } from '../base/options.js';
import { checkOptionNames } from '../base/options.js';
import { answerForError } from '../receive/answers.js';
import { resolveReceiverConfig } from '../receive/config.js';
import { Receiver } from '../receive/receiver.js';
import { signedBody } from '../receive/signed-body.js';
import { RECEIVER_OPTIONS, type ReceiverOptionsBase } from '../receive/types.js';
import { NODE_RUNTIME, VERIFIER_OPTIONS, type NodeVerifierOptions } from '../runtime/verify/node-verifier.js';
import { WORKER_OPTIONS, type WorkerOptions } from '../runtime/verify/worker-options.js';
import { withControls, type ReceiverControls } from './controls.js';
import {
  nodeBodySource,
  passOn,
  sendAnswer,
  type NextFunction,
  type NodeWebhookRequest,
} from './node-http.js';

/** A handler for Express 4 and 5, Connect and node:http (`next` is optional). */
export type NodeHandler = (req: NodeWebhookRequest, res: ServerResponse, next?: NextFunction) => void;

/** Options of `createReceiver` from `jobhook/express`. */
export interface ExpressReceiverOptions<Tx = unknown>
  extends NodeVerifierOptions, ReceiverOptionsBase<NodeWebhookRequest, Tx>, WorkerOptions {}

/** `createReceiver` from `jobhook/express`. */
export const EXPRESS_RECEIVER_OPTIONS = {
  ...VERIFIER_OPTIONS,
  ...RECEIVER_OPTIONS,
  ...WORKER_OPTIONS,
} as const satisfies OptionNamesOf<ExpressReceiverOptions>;

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
export function createNodeReceiver<Tx>(options: ExpressReceiverOptions<Tx>): NodeHandler & ReceiverControls {
  checkOptionNames(options, EXPRESS_RECEIVER_OPTIONS);
  const receiver = new Receiver(resolveReceiverConfig(options, 'express'), NODE_RUNTIME);
  const limits = receiver.config.body;
  const signed = async (req: NodeWebhookRequest) =>
    signedBody(receiver.verification, nodeBodySource(req, limits), limits);
  const handler: NodeHandler = (req, res, next) => {
    const started = performance.now();
    signed(req)
      .then(
        (body) => receiver.receive(body, req, started).finally(() => body.ticket.release()),
        (err: unknown) => receiver.refuse(err, started, 0, req.headers),
      )
      .then(
        (answer) => sendAnswer(res, answer, req),
        (err: unknown) =>
          next ? passOn(err, req, res, next, limits) : sendAnswer(res, answerForError(err), req),
      );
  };
  return withControls(handler, receiver);
}
