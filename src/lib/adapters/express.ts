import type { ServerResponse } from 'node:http';
import { answerForError } from '../receive/answers.js';
import { logRefusal, receive, RECEIVER_OPTIONS, refuse, resolveReceiver, type ReceiverOptionsBase } from '../receive/core.js';
import { createNodeVerifier, VERIFIER_OPTIONS, type NodeVerifierOptions } from '../runtime/verify/node-verifier.js';
import { offloading, WORKER_OPTIONS, type WorkerOptions } from '../runtime/verify/worker-pool.js';
import { nodeBuiltins } from '../runtime/verify/node-threads.js';
import { sha256Hex } from '../runtime/crypto/node.js';
import { boundUnreadBody, closeWhenAnswered, sendAnswer, signedNodeBody, type NodeWebhookRequest } from './node-http.js';
import type { BodyLimits } from '../receive/body-limits.js';
import { withControls, type ReceiverControls } from './controls.js';
import { resolveLogger } from '../base/log.js';
import { DEFAULT_BODY_TIMEOUT_MS } from '../base/protocol.js';
import { optionalNumber } from '../base/options.js';
import { checkOptionNames, type OptionNamesOf } from '../base/options.js';
import { ADMISSION_OPTIONS, DeliveryGuard, digestKey, type AdmissionOptions } from '../receive/guard.js';

export type NextFunction = (err?: unknown) => void;
/** A handler for Express 4 and 5, Connect and node:http (`next` is optional). */
export type NodeHandler = (req: NodeWebhookRequest, res: ServerResponse, next?: NextFunction) => void;

/** Options of `createReceiver` from `jobhook/express`. */
export interface ExpressReceiverOptions<Tx = unknown> extends NodeVerifierOptions, ReceiverOptionsBase<NodeWebhookRequest, Tx>, WorkerOptions {}

/** Options of `createMiddleware`. */
export interface MiddlewareOptions extends NodeVerifierOptions, AdmissionOptions, WorkerOptions {
  /** `respond` (default): answer failures with the receiver's status codes. `next`: pass the WebhookError to `next(err)`. */
  errors?: 'respond' | 'next';
  /** A body still arriving after this long is answered 408 (default 30 s). */
  bodyTimeoutMs?: number;
  /** As the receiver's `log` (default: warnings and errors to the console). */
  log?: ReceiverOptionsBase<unknown>['log'];
}

/**
 * Hands an error to the application's error handler. A body left unread (refused on
 * its headers, or over the limit) is not read on: the answer the handler sends closes
 * the connection, as jobhook's own answers do, and a handler that reads the body first
 * (Express's default one does) gets no more of it than jobhook would have read.
 */
function passOn(err: unknown, req: NodeWebhookRequest, res: ServerResponse, next: NextFunction, limits: BodyLimits): void {
  if (!req.complete) {
    closeWhenAnswered(res);
    boundUnreadBody(req, res, limits);
  }
  next(err);
}

export function createNodeReceiver<Tx>(options: ExpressReceiverOptions<Tx>): NodeHandler & ReceiverControls {
  checkOptionNames(options, EXPRESS_RECEIVER_OPTIONS);
  const verifier = createNodeVerifier(options);
  const r = resolveReceiver(options, 'express', verifier.options.maxBodyBytes, sha256Hex);
  const offload = offloading(verifier, options, r.log, nodeBuiltins);
  const limits = { maxBodyBytes: verifier.options.maxBodyBytes, timeoutMs: r.bodyTimeoutMs };
  const handler: NodeHandler = (req, res, next) => {
    const started = performance.now();
    signedNodeBody(req, limits, offload.open, (_, declared) => r.guard.admit(declared))
      .then(
        ({ signature, bytes, ticket }) => receive(r, (body) => offload.verifyOpened(body, signature), bytes, req.headers, req, started, signature).finally(() => ticket?.release()),
        (err: unknown) => refuse(r, err, started),
      )
      .then(
        (answer) => sendAnswer(res, answer, req),
        (err: unknown) => (next ? passOn(err, req, res, next, limits) : sendAnswer(res, answerForError(err), req)),
      );
  };
  return withControls(handler, r.runner, offload);
}

export function createNodeMiddleware(options: MiddlewareOptions): NodeHandler {
  checkOptionNames(options, MIDDLEWARE_OPTIONS);
  const verifier = createNodeVerifier(options);
  const mode = options.errors ?? 'respond';
  if (mode !== 'respond' && mode !== 'next') throw new TypeError("errors must be 'respond' or 'next'");
  const log = resolveLogger(options.log);
  const guard = new DeliveryGuard(options, verifier.options.maxBodyBytes);
  const offload = offloading(verifier, options, log, nodeBuiltins);
  const limits = {
    maxBodyBytes: verifier.options.maxBodyBytes,
    timeoutMs: optionalNumber(options.bodyTimeoutMs, 'bodyTimeoutMs', DEFAULT_BODY_TIMEOUT_MS),
  };
  return (req, res, next) => {
    signedNodeBody(req, limits, offload.open, (_, declared) => guard.admit(declared))
      .then(({ signature, bytes, ticket }) =>
        guard
          .once(digestKey(signature), bytes, () => offload.verifyOpened(bytes, signature))
          .then((shared) => shared.result)
          .finally(() => ticket?.release()),
      )
      .then(
        (delivery) => {
          req.webhook = delivery;
          next?.();
        },
        (err: unknown) => {
          logRefusal(log, err);
          if (mode === 'next' && next) passOn(err, req, res, next, limits);
          else sendAnswer(res, answerForError(err), req);
        },
      );
  };
}

/** `createReceiver` from `jobhook/express`. */
export const EXPRESS_RECEIVER_OPTIONS = { ...VERIFIER_OPTIONS, ...RECEIVER_OPTIONS, ...WORKER_OPTIONS } as const satisfies OptionNamesOf<ExpressReceiverOptions>;
/** `createMiddleware` from `jobhook/express`. */
export const MIDDLEWARE_OPTIONS = { ...VERIFIER_OPTIONS, ...WORKER_OPTIONS, ...ADMISSION_OPTIONS, errors: true, bodyTimeoutMs: true, log: true } as const satisfies OptionNamesOf<MiddlewareOptions>;
