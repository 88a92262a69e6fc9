import type { ServerResponse } from 'node:http';
import { MemoryIdempotencyStore } from '../idempotency/memory.js';
import { answerForError } from '../receive/answers.js';
import { receiveDelivery, resolveFlow, verifyOnly, type ReceiverFlowOptions } from '../receive/flow.js';
import { DEFAULT_MAX_BODY_BYTES } from '../protocol.js';
import { createNodeVerifier, type VerifierOptions } from '../verify/node-verifier.js';
import { readNodeBody, sendAnswer, type NodeWebhookRequest } from './node-http.js';

export type NextFunction = (err?: unknown) => void;
export type NodeHandler = (req: NodeWebhookRequest, res: ServerResponse, next?: NextFunction) => void;

export interface WebhookMiddlewareOptions extends VerifierOptions {
  /** `respond` (default): answer failures per DESIGN §4. `next`: pass the WebhookError to `next(err)`. */
  onError?: 'respond' | 'next';
}

export interface WebhookReceiverOptions extends VerifierOptions, ReceiverFlowOptions<NodeWebhookRequest> {}

function bodyLimit(options: VerifierOptions): number {
  return options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES;
}

export function createMiddleware(options: WebhookMiddlewareOptions): NodeHandler {
  const verifier = createNodeVerifier(options);
  const limit = bodyLimit(options);
  const passOn = options.onError === 'next';
  if (options.onError !== undefined && options.onError !== 'respond' && !passOn) throw new TypeError("onError must be 'respond' or 'next'");
  return (req, res, next) => {
    verifyOnly(async () => verifier.verify(await readNodeBody(req, limit), req.headers)).then(
      (result) => {
        if ('delivery' in result) {
          req.webhook = result.delivery;
          next?.();
        } else if (passOn && next) {
          next(result.error);
        } else {
          sendAnswer(res, result.answer);
        }
      },
      (err: unknown) => (next ? next(err) : sendAnswer(res, answerForError(err))),
    );
  };
}

export function createReceiver(options: WebhookReceiverOptions): NodeHandler {
  const verifier = createNodeVerifier(options);
  const flow = resolveFlow(options, () => new MemoryIdempotencyStore());
  const limit = bodyLimit(options);
  return (req, res, next) => {
    receiveDelivery(async () => verifier.verify(await readNodeBody(req, limit), req.headers), flow, req).then(
      (answer) => sendAnswer(res, answer),
      (err: unknown) => (next ? next(err) : sendAnswer(res, answerForError(err))),
    );
  };
}
