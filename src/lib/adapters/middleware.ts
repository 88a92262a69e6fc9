/** Verification only, as Express/Connect middleware: `req.webhook`, then `next()`. */
import { checkOptionNames, type OptionNamesOf } from '../base/options.js';
import { resolveLogger, type LoggerInput } from '../base/log.js';
import { parseRfc3339 } from '../core/event.js';
import type { VerifiedDelivery } from '../core/verify/core.js';
import type { ResolvedOptions } from '../core/verify/options.js';
import { answerForError } from '../receive/answers.js';
import { resolveVerification } from '../receive/config.js';
import { ADMISSION_OPTIONS, type AdmissionOptions } from '../receive/guard.js';
import { Diagnosis } from '../receive/diagnose.js';
import { signedBody, type SignedBody } from '../receive/signed-body.js';
import { Verification } from '../receive/verification.js';
import { NODE_RUNTIME, VERIFIER_OPTIONS, type NodeVerifierOptions } from '../runtime/verify/node-verifier.js';
import { WORKER_OPTIONS, type WorkerOptions } from '../runtime/verify/worker-options.js';
import type { NodeHandler } from './express.js';
import { nodeBodySource, passOn, sendAnswer } from './node-http.js';

/** Options of `createMiddleware`. */
export interface MiddlewareOptions extends NodeVerifierOptions, AdmissionOptions, WorkerOptions {
  /** `respond` (default): answer failures with the receiver's status codes. `next`: pass the WebhookError to `next(err)`. */
  errors?: 'respond' | 'next';
  /** A body still arriving after this long is answered 408 (default 30 s). */
  bodyTimeoutMs?: number;
  /** As the receiver's `log` (default: warnings and errors to the console). */
  log?: LoggerInput;
}

/** `createMiddleware` from `jobhook/express`. */
export const MIDDLEWARE_OPTIONS = {
  ...VERIFIER_OPTIONS,
  ...WORKER_OPTIONS,
  ...ADMISSION_OPTIONS,
  errors: true,
  bodyTimeoutMs: true,
  log: true,
} as const satisfies OptionNamesOf<MiddlewareOptions>;

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
export function createNodeMiddleware(options: MiddlewareOptions): NodeHandler {
  checkOptionNames(options, MIDDLEWARE_OPTIONS);
  const mode = options?.errors ?? 'respond';
  if (mode !== 'respond' && mode !== 'next') throw new TypeError("errors must be 'respond' or 'next'");
  const config = resolveVerification(options, resolveLogger(options?.log));
  const verification = new Verification(config, NODE_RUNTIME);
  const diagnosis = new Diagnosis(config.log, config.verify.signatureHeaderName);
  const limits = config.body;
  const verify = async (req: Parameters<NodeHandler>[0]) => {
    const body = await signedBody(verification, nodeBodySource(req, limits), limits);
    try {
      return await verifyRemembering(verification, body, config.verify);
    } finally {
      body.ticket.release();
    }
  };
  return (req, res, next) => {
    verify(req).then(
      (delivery) => {
        req.webhook = delivery;
        next?.();
      },
      (err: unknown) => {
        diagnosis.refused(err, req.headers);
        if (mode === 'next' && next) passOn(err, req, res, next, limits);
        else sendAnswer(res, answerForError(err), req);
      },
    );
  };
}

/**
 * Verifies a signed body, answering a replay of a signature verified here with another
 * body at once (401, no canonical work: it is not what was signed), and remembers the
 * bytes that verified until the replay window closes on the event (the middleware never
 * learns whether the route completed, so it remembers what verified).
 */
async function verifyRemembering(
  verification: Verification,
  body: SignedBody,
  o: ResolvedOptions,
): Promise<VerifiedDelivery> {
  const now = o.now();
  const known = await verification.known(body.signature, body.bytes, now);
  if (known?.kind === 'refused') throw known.error;
  const verified = await verification.verify(body.bytes, body.signature, body.owned);
  const { delivery } = verified;
  // Until the replay window closes on its finished_at (after it, any replay is EVENT_TOO_OLD anyway).
  if (verified.own && o.maxAgeSeconds !== undefined) {
    const finished = parseRfc3339(delivery.event.finished_at) ?? now;
    await verification.remember(
      body.signature,
      delivery.jobId,
      verified,
      body.bytes,
      finished + o.maxAgeSeconds * 1000,
    );
  }
  return delivery;
}
