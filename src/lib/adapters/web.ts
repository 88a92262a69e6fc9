/**
 * The two things a Fetch API receiver does itself: read the exact body bytes of a
 * `Request` within the limits, and turn an answer into a `Response`. No node:* import.
 */
import { concatBytes } from '../base/bytes.js';
import { BodyMalformedError, BodyTimeoutError, BodyTooLargeError, EncodingUnsupportedError, ReceiverBusyError } from '../base/errors.js';
import type { Ticket } from '../receive/guard.js';
import type { ReceiverAnswer } from '../receive/answers.js';
import { receive, RECEIVER_OPTIONS, refuse, resolveReceiver, type ReceiverOptionsBase } from '../receive/core.js';
import { createWebVerifierCore, WEB_VERIFIER_OPTIONS, type WebVerifierOptions } from '../runtime/verify/web-verifier.js';
import type { BodyLimits } from '../receive/body-limits.js';
import { withControls, type ReceiverControls } from './controls.js';
import { contentCoding, type ContentCoding } from './encoding.js';
import { checkOptionNames, type OptionNamesOf } from '../base/options.js';
import { offloading, ownedBodies, WORKER_OPTIONS, type WorkerOptions } from '../runtime/verify/worker-pool.js';
import type { OpenedSignature } from '../core/verify/core.js';
import { runtimeBuiltins } from '../runtime/verify/runtime-threads.js';
import { sha256HexWeb } from '../runtime/crypto/web.js';

/** Counts the bytes that pass and errors the stream past `limit`. */
function limited(limit: number): TransformStream<Uint8Array, Uint8Array> {
  let size = 0;
  return new TransformStream({
    transform(chunk, controller) {
      size += chunk.byteLength;
      if (size > limit) controller.error(new BodyTooLargeError(limit));
      else controller.enqueue(chunk);
    },
  });
}

/**
 * The names runtimes give each coding's DecompressionStream: Bun and Deno call brotli
 * 'brotli' (and refuse 'br'); 'br' is tried too, for a runtime that takes the header's name.
 * Node 20 and workerd know neither: br is 415 there.
 */
const FORMATS: Record<'gzip' | 'deflate' | 'br', readonly string[]> = { gzip: ['gzip'], deflate: ['deflate'], br: ['brotli', 'br'] };

function decompressed(stream: ReadableStream<Uint8Array>, coding: 'gzip' | 'deflate' | 'br'): ReadableStream<Uint8Array> {
  let decoder: DecompressionStream | undefined;
  for (const format of FORMATS[coding]) {
    try {
      decoder = new DecompressionStream(format as CompressionFormat);
      break;
    } catch {
      // Not a name this runtime knows: try the next.
    }
  }
  if (decoder === undefined) {
    throw new EncodingUnsupportedError(`Content-Encoding ${coding} cannot be decoded in this runtime; send the body as is, or gzip or deflate.`);
  }
  return stream.pipeThrough(decoder as unknown as TransformStream<Uint8Array, Uint8Array>);
}

/**
 * A signed Fetch request's body, in the order that keeps unsigned traffic cheap: a
 * declared size over the limit (413) or an unknown coding (415), then `open(headers)`
 * (the signature: 401 before a byte of the body is read), then the body. Whatever is
 * refused on its headers leaves its body unread, and its answer says `Connection: close`
 * (createFetchReceiver) so the server ends the connection rather than read on. The body
 * is not cancelled: on Node, a body made by `Readable.toWeb(req)` (common in adapters)
 * throws uncaught inside Node when cancelled before its first chunk is taken, killing
 * the process for one forged request.
 */
export async function signedRequestBody<S>(
  request: Request,
  limits: BodyLimits,
  open: (headers: Headers) => Promise<S>,
  admit?: (signature: S, declared: number | undefined) => Ticket,
): Promise<{ signature: S; bytes: Uint8Array; ticket: Ticket | undefined }> {
  const coding = contentCoding(request.headers);
  const length = request.headers.get('content-length');
  const declared = length === null ? undefined : Number(length);
  if (Number(declared) > limits.maxBodyBytes) throw new BodyTooLargeError(limits.maxBodyBytes);
  const signature = await open(request.headers);
  // The bound on bodies in flight, from the declared size (503 before a byte is read), then counted as the body arrives.
  const ticket = admit?.(signature, coding === 'identity' ? declared : undefined);
  try {
    return { signature, bytes: await readRequestBody(request, coding, limits, ticket, coding === 'identity' ? declared : undefined), ticket };
  } catch (err) {
    ticket?.release();
    throw err;
  }
}

/**
 * Reads a Fetch request body: 413 (and the stream cancelled) as soon as it passes
 * `maxBodyBytes`, raw or decoded; 408 when it is not complete within `timeoutMs`;
 * gzip and deflate (and br where the runtime can) decoded.
 */
async function readRequestBody(request: Request, coding: ContentCoding, limits: BodyLimits, ticket: Ticket | undefined, declared?: number): Promise<Uint8Array> {
  const limit = limits.maxBodyBytes;
  if (request.body === null) return new Uint8Array(0);
  let stream = request.body.pipeThrough(limited(limit));
  if (coding !== 'identity') stream = decompressed(stream, coding).pipeThrough(limited(limit));
  const reader = stream.getReader();
  let timer: ReturnType<typeof setTimeout> | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new BodyTimeoutError(limits.timeoutMs)), limits.timeoutMs);
  });
  const chunks: Uint8Array[] = [];
  let size = 0;
  // A declared size is filled as it arrives (copying a large body at its end held the event loop: see node-http.ts).
  const whole = declared !== undefined && Number.isInteger(declared) && declared > 64 * 1024 && declared <= limit ? new Uint8Array(declared) : undefined;
  try {
    for (;;) {
      const { done, value } = await Promise.race([reader.read(), deadline]);
      if (done) break;
      size += value.byteLength;
      ticket?.cover(size);
      if (whole !== undefined && size <= whole.length) whole.set(value, size - value.byteLength);
      else chunks.push(value);
    }
  } catch (err) {
    await reader.cancel().catch(() => undefined);
    if (err instanceof BodyTooLargeError || err instanceof BodyTimeoutError || err instanceof ReceiverBusyError) throw err;
    if (coding !== 'identity') throw new BodyMalformedError(`the body is not valid ${coding} data (Content-Encoding: ${coding})`, 0);
    throw err;
  } finally {
    clearTimeout(timer);
  }
  const body = whole !== undefined && size === whole.length && chunks.length === 0 ? whole : whole !== undefined ? concatBytes([whole.subarray(0, Math.min(size, whole.length)), ...chunks]) : chunks.length === 0 ? new Uint8Array(0) : concatBytes(chunks);
  // Read here, held by nobody else: moved to a verification worker rather than copied.
  ownedBodies.add(body);
  return body;
}

export function toResponse(answer: ReceiverAnswer): Response {
  return new Response(answer.body, { status: answer.status, headers: answer.headers });
}

/** Options of `createReceiver` from `jobhook/web`. */
/** Options of `createReceiver` from `jobhook/web` (the worker options apply where it runs on Node). */
export interface WebReceiverOptions<Tx = unknown> extends WebVerifierOptions, ReceiverOptionsBase<Request, Tx>, WorkerOptions {}

export function createFetchReceiver<Tx>(options: WebReceiverOptions<Tx>): ((request: Request) => Promise<Response>) & ReceiverControls {
  checkOptionNames(options, WEB_RECEIVER_OPTIONS);
  const verifier = createWebVerifierCore(options);
  const r = resolveReceiver(options, 'fetch', verifier.options.maxBodyBytes, sha256HexWeb);
  // On Node, costly bodies go to the same worker pool as the Node receivers'; elsewhere all is verified here.
  const offload = offloading(verifier, options, r.log, runtimeBuiltins());
  const limits = { maxBodyBytes: verifier.options.maxBodyBytes, timeoutMs: r.bodyTimeoutMs };
  const handler = async (request: Request): Promise<Response> => {
    const started = performance.now();
    let signed;
    try {
      signed = await signedRequestBody(request, limits, offload.open as (headers: Headers) => Promise<OpenedSignature>, (_, declared) => r.guard.admit(declared));
    } catch (err) {
      const answer = refuse(r, err, started);
      // Refused with its body unread: the connection ends with the answer (servers that honour the header).
      if (request.body !== null && !request.bodyUsed) answer.headers.connection = 'close';
      return toResponse(answer);
    }
    const { signature, bytes, ticket } = signed;
    try {
      return toResponse(await receive(r, (b) => offload.verifyOpened(b, signature), bytes, request.headers, request, started, signature));
    } finally {
      ticket?.release();
    }
  };
  return withControls(handler, r.runner, offload);
}

/** `createReceiver` from `jobhook/web`. */
export const WEB_RECEIVER_OPTIONS = { ...WEB_VERIFIER_OPTIONS, ...RECEIVER_OPTIONS, ...WORKER_OPTIONS } as const satisfies OptionNamesOf<WebReceiverOptions>;
