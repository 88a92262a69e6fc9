/**
 * The framework-agnostic receiver: the caller has the whole body already (Fastify,
 * Koa, AWS Lambda, plain node:http), so this one only opens the signature, then
 * decodes Content-Encoding.
 */
import zlib from 'node:zlib';
import { BodyMalformedError, BodyTooLargeError } from '../errors.js';
import type { ReceiverAnswer } from '../receive/answers.js';
import { receive, refuse, resolveReceiver, type ReceiverOptionsBase } from '../receive/core.js';
import type { HeadersInput } from '../verify/headers.js';
import type { OpenedSignature } from '../verify/core.js';
import { createNodeVerifier, type VerifierOptions } from '../verify/node-verifier.js';
import { checkBodySize } from '../verify/signature.js';
import { offloading, ownedBodies, type WorkerOptions } from '../verify/worker-pool.js';
import { withControls, type ReceiverControls } from './controls.js';
import { contentCoding } from './encoding.js';

/** A request as the agnostic receiver takes it: the raw body and the headers. */
export interface ReceiverRequest {
  /** The exact bytes received (or their text); never a parsed object. */
  body: string | Uint8Array;
  /** Headers in any form: a plain object (any case), Node's IncomingHttpHeaders, a Fetch Headers. */
  headers: HeadersInput;
}

/** Options of `createReceiver` from `jobhook`. */
export interface ReceiverOptions extends VerifierOptions, ReceiverOptionsBase<ReceiverRequest>, WorkerOptions {}

/** The body decoded per Content-Encoding, bounded by `limit` after decoding. */
function decodeBody(body: string | Uint8Array, headers: HeadersInput, limit: number): string | Uint8Array {
  const coding = contentCoding(headers);
  if (coding === 'identity') return body;
  if (typeof body === 'string') throw new BodyMalformedError(`a ${coding}-encoded body must be passed as bytes, not text`, 0);
  const options = { maxOutputLength: limit };
  try {
    const decoded = coding === 'gzip' ? zlib.gunzipSync(body, options) : coding === 'deflate' ? zlib.inflateSync(body, options) : zlib.brotliDecompressSync(body, options);
    ownedBodies.add(decoded);
    return decoded;
  } catch (err) {
    if ((err as { code?: string }).code === 'ERR_BUFFER_TOO_LARGE') throw new BodyTooLargeError(limit);
    throw new BodyMalformedError(`the body is not valid ${coding} data (Content-Encoding: ${coding})`, 0);
  }
}

export function createAgnosticReceiver(options: ReceiverOptions): ((request: ReceiverRequest) => Promise<ReceiverAnswer>) & ReceiverControls {
  const verifier = createNodeVerifier(options);
  const r = resolveReceiver(options);
  const offload = offloading(verifier, options, r.log);
  const handler = async (request: ReceiverRequest): Promise<ReceiverAnswer> => {
    if (typeof request !== 'object' || request === null) throw new TypeError('createReceiver handles { body, headers }');
    let body: string | Uint8Array;
    let signature: OpenedSignature;
    try {
      // The size as received, then the signature (401 before anything is decoded or parsed), then the body.
      checkBodySize(request.body, verifier.options);
      signature = offload.open(request.headers);
      body = decodeBody(request.body, request.headers, verifier.options.maxBodyBytes);
    } catch (err) {
      return refuse(r, err);
    }
    return receive(r, (b) => offload.verifyOpened(b, signature), body, request.headers, request);
  };
  return withControls(handler, r.runner, offload);
}
