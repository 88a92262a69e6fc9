/**
 * The framework-agnostic receiver: the caller has the whole body already (Fastify, Koa,
 * AWS Lambda, plain node:http) and sends the answer itself.
 */
import type { ServerResponse } from 'node:http';
import { checkOptionNames, type OptionNamesOf } from '../base/options.js';
import type { HeadersInput } from '../core/verify/headers.js';
import type { ReceiverAnswer } from '../receive/answers.js';
import { resolveReceiverConfig } from '../receive/config.js';
import { Receiver } from '../receive/receiver.js';
import type { ContentCoding } from '../receive/body.js';
import { signedBody, type BodySource } from '../receive/signed-body.js';
import { RECEIVER_OPTIONS, type ReceiverOptionsBase } from '../receive/types.js';
import { NODE_RUNTIME, VERIFIER_OPTIONS, type NodeVerifierOptions } from '../runtime/verify/node-verifier.js';
import { WORKER_OPTIONS, type WorkerOptions } from '../runtime/verify/worker-options.js';
import { withControls, type ReceiverControls } from './controls.js';
import { decodeBytes } from './decode.js';
import { loadZlib } from './node-http.js';

/** A request as the agnostic receiver takes it: the raw body and the headers. */
export interface ReceiverRequest {
  /** The exact bytes received (or their text); never a parsed object. */
  body: string | Uint8Array;
  /** Headers in any form: a plain object (any case), Node's IncomingHttpHeaders, a Fetch Headers. */
  headers: HeadersInput;
}

/** Options of `createReceiver` from `jobhook`. */
export interface ReceiverOptions<Tx = unknown>
  extends NodeVerifierOptions, ReceiverOptionsBase<ReceiverRequest, Tx>, WorkerOptions {}

/** `createReceiver` from `jobhook`. */
export const AGNOSTIC_RECEIVER_OPTIONS = {
  ...VERIFIER_OPTIONS,
  ...RECEIVER_OPTIONS,
  ...WORKER_OPTIONS,
} as const satisfies OptionNamesOf<ReceiverOptions>;

/**
 * The framework-agnostic receiver: `{ body, headers }` in, the answer out. Its second
 * parameter is `never`: passed as a framework's handler (Express's `(req, res, next)`,
 * Fastify's `(request, reply)`), it does not compile.
 */
export type AgnosticReceiver = ((request: ReceiverRequest, notAResponse?: never) => Promise<ReceiverAnswer>) &
  ReceiverControls;

/**
 * The complete receiver for any framework: give it the raw body and the headers, get
 * the answer to send. It verifies, claims the `job_id` in the idempotency store,
 * runs `onEvent` once (renewing the claim while it runs), records the completion, and
 * answers 200 (processed or duplicate), 503 + Retry-After while the same job is in
 * progress or the store is unreachable, 500 when the handler throws (the claim is
 * released so the gateway's retry processes it), 4xx for deliveries that are not the
 * gateway's or cannot be processed. Content-Encoding gzip, deflate and br are decoded.
 * (`jobhook/express` and `jobhook/web` have the same receiver for their frameworks.)
 *
 * @example
 * ```ts
 * // Fastify: keep the raw body, hand it over, send the answer.
 * import Fastify from 'fastify';
 * import { createReceiver } from 'jobhook';
 *
 * const receive = createReceiver({ publicKey: process.env.GATEWAY_PUBLIC_KEY!, onEvent: async (event) => save(event) });
 * const app = Fastify();
 * // As large as the deliveries (the receiver's maxBodyBytes, 25 MiB by default): Fastify's default is 1 MiB.
 * app.addContentTypeParser('application/json', { parseAs: 'buffer', bodyLimit: 25 * 1024 * 1024 }, (_req, body, done) => done(null, body));
 * app.post('/webhooks/gateway', async (req, reply) => {
 *   const answer = await receive({ body: req.body as Buffer, headers: req.headers });
 *   return reply.code(answer.status).headers(answer.headers).send(answer.body);
 * });
 * ```
 */
export function createAgnosticReceiver<Tx>(options: ReceiverOptions<Tx>): AgnosticReceiver {
  checkOptionNames(options, AGNOSTIC_RECEIVER_OPTIONS);
  const receiver = new Receiver(resolveReceiverConfig(options, 'agnostic'), NODE_RUNTIME);
  const limits = receiver.config.body;
  const handler = async (request: ReceiverRequest, response?: unknown): Promise<ReceiverAnswer> => {
    if (typeof request !== 'object' || request === null)
      throw new TypeError('createReceiver handles { body, headers }');
    if (isNodeRequest(request)) return mountedAsMiddleware(receiver, response);
    const started = performance.now();
    let signed;
    try {
      signed = await signedBody(receiver.verification, encodedBody(request, limits.maxBodyBytes), limits);
    } catch (err) {
      return receiver.refuse(err, started, 0, request.headers);
    }
    try {
      return await receiver.receive(signed, request, started);
    } finally {
      signed.ticket.release();
    }
  };
  return withControls(handler, receiver);
}

/** Bytes in hand, still Content-Encoded: decoded on zlib's thread pool once the signature opened. */
function encodedBody(request: ReceiverRequest, limit: number): BodySource {
  return {
    headers: request.headers,
    kept: request.body,
    keptEncoded: true,
    read: async (coding, ticket) => {
      const decoded = await decodeBytes(
        await loadZlib(),
        request.body,
        coding as Exclude<ContentCoding, 'identity'>,
        limit,
      );
      ticket.cover(decoded.byteLength);
      return decoded;
    },
  };
}

const MOUNTED_AS_MIDDLEWARE =
  "createReceiver from 'jobhook' was given a Node request (mounted in Express, Connect or node:http?): it takes { body, headers } and returns the answer for you to send. " +
  "Use createReceiver from 'jobhook/express', which reads the body and answers the response itself.";

/** A Node `IncomingMessage` (Express's `req`, Koa's `ctx.req`, Fastify's `request.raw`): a stream with Node's raw header list. */
function isNodeRequest(request: object): boolean {
  return (
    typeof (request as { pipe?: unknown }).pipe === 'function' &&
    Array.isArray((request as { rawHeaders?: unknown }).rawHeaders)
  );
}

/**
 * Mounted as a handler: answer 500 (the gateway retries, so nothing is lost once it is
 * mounted right) rather than leave the request hanging. Called directly: throw.
 */
function mountedAsMiddleware(receiver: Receiver<ReceiverRequest>, response: unknown): ReceiverAnswer {
  receiver.config.log.error(`jobhook: ${MOUNTED_AS_MIDDLEWARE}`);
  const open =
    typeof response === 'object' &&
    response !== null &&
    typeof (response as ServerResponse).writeHead === 'function' &&
    (response as ServerResponse).headersSent === false;
  if (!open) throw new TypeError(MOUNTED_AS_MIDDLEWARE);
  const answer = {
    status: 500,
    headers: { 'content-type': 'application/json; charset=utf-8' },
    body: JSON.stringify({ error: { code: 'INTERNAL_ERROR', message: MOUNTED_AS_MIDDLEWARE } }),
  };
  (response as ServerResponse).writeHead(answer.status, answer.headers).end(answer.body);
  return answer;
}
