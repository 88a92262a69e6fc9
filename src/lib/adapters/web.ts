/** The complete receiver as a Fetch API handler, `Request` → `Response`. No node:* import. */
import { checkOptionNames, type OptionNamesOf } from '../base/options.js';
import { resolveReceiverConfig } from '../receive/config.js';
import { Receiver } from '../receive/receiver.js';
import { signedBody } from '../receive/signed-body.js';
import { RECEIVER_OPTIONS, type ReceiverOptionsBase } from '../receive/types.js';
import {
  WEB_RUNTIME,
  WEB_VERIFIER_OPTIONS,
  type WebVerifierOptions,
} from '../runtime/verify/web-verifier.js';
import { WORKER_OPTIONS, type WorkerOptions } from '../runtime/verify/worker-options.js';
import { withControls, type ReceiverControls } from './controls.js';
import { fetchBodySource, toResponse } from './fetch-http.js';

/** Options of `createReceiver` from `jobhook/web` (the worker options apply where it runs on Node). */
export interface WebReceiverOptions<Tx = unknown>
  extends WebVerifierOptions, ReceiverOptionsBase<Request, Tx>, WorkerOptions {}

/** `createReceiver` from `jobhook/web`. */
export const WEB_RECEIVER_OPTIONS = {
  ...WEB_VERIFIER_OPTIONS,
  ...RECEIVER_OPTIONS,
  ...WORKER_OPTIONS,
} as const satisfies OptionNamesOf<WebReceiverOptions>;

/**
 * The complete receiver as a Fetch API handler, `(request: Request) => Promise<Response>`,
 * with the same answers as `createReceiver` from `jobhook/express`. No `node:` import: the
 * runtime's node:crypto where a probe shows it works, else WebAssembly or BigInt RSA and
 * WebCrypto hashes.
 *
 * @example
 * ```ts
 * // app/api/webhooks/gateway/route.ts (Next.js App Router)
 * import { createReceiver } from 'jobhook/web';
 *
 * export const POST = createReceiver({
 *   publicKey: process.env.GATEWAY_PUBLIC_KEY!,
 *   onEvent: async (event) => { await save(event); },
 * });
 * ```
 */
export function createFetchReceiver<Tx>(
  options: WebReceiverOptions<Tx>,
): ((request: Request) => Promise<Response>) & ReceiverControls {
  checkOptionNames(options, WEB_RECEIVER_OPTIONS);
  // On Node, costly bodies go to the same worker pool as the Node receivers'; elsewhere all is verified here.
  const receiver = new Receiver(resolveReceiverConfig(options, 'fetch'), WEB_RUNTIME);
  const limits = receiver.config.body;
  const handler = async (request: Request): Promise<Response> => {
    const started = performance.now();
    let signed;
    try {
      signed = await signedBody(receiver.verification, fetchBodySource(request, limits), limits);
    } catch (err) {
      const answer = receiver.refuse(err, started, 0, request.headers);
      // Refused with its body unread: the connection ends with the answer (servers that honour the header).
      if (request.body !== null && !request.bodyUsed) answer.headers.connection = 'close';
      return toResponse(answer);
    }
    try {
      return toResponse(await receiver.receive(signed, request, started));
    } finally {
      signed.ticket.release();
    }
  };
  return withControls(handler, receiver);
}
