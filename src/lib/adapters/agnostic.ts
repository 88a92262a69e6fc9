/**
 * The framework-agnostic receiver: the caller has the whole body already (Fastify,
 * Koa, AWS Lambda, plain node:http), so this one only opens the signature, then
 * decodes Content-Encoding.
 */
import type { ServerResponse } from 'node:http';
import { BodyMalformedError, BodyTooLargeError } from '../base/errors.js';
import type { ReceiverAnswer } from '../receive/answers.js';
import { receive, RECEIVER_OPTIONS, refuse, resolveReceiver, type ReceiverOptionsBase } from '../receive/core.js';
import type { HeadersInput } from '../core/verify/headers.js';
import type { OpenedSignature } from '../core/verify/core.js';
import { createNodeVerifier, VERIFIER_OPTIONS, type NodeVerifierOptions } from '../runtime/verify/node-verifier.js';
import { checkBodySize } from '../core/verify/signature.js';
import { offloading, ownedBodies, WORKER_OPTIONS, type WorkerOptions } from '../runtime/verify/worker-pool.js';
import { withControls, type ReceiverControls } from './controls.js';
import { contentCoding } from './encoding.js';
import { checkOptionNames, type OptionNamesOf } from '../base/options.js';
import { loadZlib } from './node-http.js';
import { nodeBuiltins } from '../runtime/verify/node-threads.js';
import { sha256Hex } from '../runtime/crypto/node.js';
import type { Ticket } from '../receive/guard.js';

/** A request as the agnostic receiver takes it: the raw body and the headers. */
export interface ReceiverRequest {
  /** The exact bytes received (or their text); never a parsed object. */
  body: string | Uint8Array;
  /** Headers in any form: a plain object (any case), Node's IncomingHttpHeaders, a Fetch Headers. */
  headers: HeadersInput;
}

/** Options of `createReceiver` from `jobhook`. */
export interface ReceiverOptions<Tx = unknown> extends NodeVerifierOptions, ReceiverOptionsBase<ReceiverRequest, Tx>, WorkerOptions {}

/** The body decoded per Content-Encoding, bounded by `limit` after decoding (node:zlib is loaded by the first compressed body). */
async function decodeBody(body: string | Uint8Array, headers: HeadersInput, limit: number): Promise<string | Uint8Array> {
  const coding = contentCoding(headers);
  if (coding === 'identity') return body;
  if (typeof body === 'string') throw new BodyMalformedError(`a ${coding}-encoded body must be passed as bytes, not text`, 0);
  const options = { maxOutputLength: limit };
  const zlib = await loadZlib();
  try {
    const decoded = coding === 'gzip' ? zlib.gunzipSync(body, options) : coding === 'deflate' ? zlib.inflateSync(body, options) : zlib.brotliDecompressSync(body, options);
    ownedBodies.add(decoded);
    return decoded;
  } catch (err) {
    if ((err as { code?: string }).code === 'ERR_BUFFER_TOO_LARGE') throw new BodyTooLargeError(limit);
    throw new BodyMalformedError(`the body is not valid ${coding} data (Content-Encoding: ${coding})`, 0);
  }
}

const MOUNTED_AS_MIDDLEWARE =
  "createReceiver from 'jobhook' was given a Node request (mounted in Express, Connect or node:http?): it takes { body, headers } and returns the answer for you to send. " +
  "Use createReceiver from 'jobhook/express', which reads the body and answers the response itself.";

/** A Node `IncomingMessage` (Express's `req`, Koa's `ctx.req`, Fastify's `request.raw`): a stream with Node's raw header list. */
function isNodeRequest(request: object): boolean {
  return typeof (request as { pipe?: unknown }).pipe === 'function' && Array.isArray((request as { rawHeaders?: unknown }).rawHeaders);
}

/** A Node `ServerResponse` that can still be answered. */
function openResponse(value: unknown): value is ServerResponse {
  return typeof value === 'object' && value !== null && typeof (value as ServerResponse).writeHead === 'function' && (value as ServerResponse).headersSent === false;
}

export function createAgnosticReceiver<Tx>(options: ReceiverOptions<Tx>): ((request: ReceiverRequest) => Promise<ReceiverAnswer>) & ReceiverControls {
  checkOptionNames(options, AGNOSTIC_RECEIVER_OPTIONS);
  const verifier = createNodeVerifier(options);
  const r = resolveReceiver(options, 'agnostic', verifier.options.maxBodyBytes, sha256Hex);
  const offload = offloading(verifier, options, r.log, nodeBuiltins);
  const handler = async (request: ReceiverRequest, response?: unknown): Promise<ReceiverAnswer> => {
    if (typeof request !== 'object' || request === null) throw new TypeError('createReceiver handles { body, headers }');
    if (isNodeRequest(request)) {
      r.log.error(`jobhook: ${MOUNTED_AS_MIDDLEWARE}`);
      // Mounted as a handler: answer 500 (the gateway retries, so nothing is lost once it
      // is mounted right) rather than leave the request hanging. Called directly: throw.
      if (!openResponse(response)) throw new TypeError(MOUNTED_AS_MIDDLEWARE);
      const answer = { status: 500, headers: { 'content-type': 'application/json; charset=utf-8' }, body: JSON.stringify({ error: { code: 'INTERNAL_ERROR', message: MOUNTED_AS_MIDDLEWARE } }) };
      response.writeHead(answer.status, answer.headers).end(answer.body);
      return answer;
    }
    const started = performance.now();
    let body: string | Uint8Array;
    let signature: OpenedSignature;
    let ticket: Ticket | undefined;
    try {
      // The size as received, then the signature (401 before anything is decoded or parsed),
      // then the bound on bodies in flight (503), then the body.
      checkBodySize(request.body, verifier.options);
      signature = await offload.open(request.headers);
      ticket = r.guard.admit(typeof request.body === 'string' ? request.body.length : request.body.byteLength);
      body = await decodeBody(request.body, request.headers, verifier.options.maxBodyBytes);
      ticket.cover(typeof body === 'string' ? body.length : body.byteLength);
    } catch (err) {
      ticket?.release();
      return refuse(r, err, started);
    }
    try {
      return await receive(r, (b) => offload.verifyOpened(b, signature), body, request.headers, request, started, signature);
    } finally {
      ticket.release();
    }
  };
  return withControls(handler, r.runner, offload);
}

/** `createReceiver` from `jobhook`. */
export const AGNOSTIC_RECEIVER_OPTIONS = { ...VERIFIER_OPTIONS, ...RECEIVER_OPTIONS, ...WORKER_OPTIONS } as const satisfies OptionNamesOf<ReceiverOptions>;
