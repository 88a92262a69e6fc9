/**
 * The two things a Fetch API receiver does itself: read the exact body bytes of a
 * `Request` within the limits, and turn an answer into a `Response`. No node:* import.
 */
import { BodyTimeoutError, BodyTooLargeError, ReceiverBusyError } from '../base/errors.js';
import type { ReceiverAnswer } from '../receive/answers.js';
import type { BodyLimits, ContentCoding } from '../receive/body.js';
import type { Ticket } from '../receive/guard.js';
import { BodyBuffer } from '../receive/body-buffer.js';
import type { BodySource } from '../receive/signed-body.js';
import { notDecodable, webDecoded } from './decode.js';

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
 * A Fetch request's body for the signed-body flow. Whatever is refused on its headers
 * leaves its body unread, and its answer says `Connection: close` (the Fetch receiver)
 * so the server ends the connection rather than read on. The body is not cancelled: on
 * Node, a body made by `Readable.toWeb(req)` (common in adapters) throws uncaught inside
 * Node when cancelled before its first chunk is taken, killing the process for one
 * forged request.
 */
export function fetchBodySource(request: Request, limits: BodyLimits): BodySource {
  return {
    headers: request.headers,
    read: (coding, ticket, declared) => readRequestBody(request, coding, limits, ticket, declared),
  };
}

/**
 * The body's stream, bounded raw and decoded. An unencoded body (nearly every delivery)
 * is read as it is and counted by the reading loop: two streams and a pipe per request
 * were a tenth of the Fetch path's CPU time.
 */
function bodyStream(
  body: ReadableStream<Uint8Array>,
  coding: ContentCoding,
  limit: number,
): ReadableStream<Uint8Array> {
  if (coding === 'identity') return body;
  return webDecoded(body.pipeThrough(limited(limit)), coding, limit).pipeThrough(limited(limit));
}

/** Rejects with BODY_TIMEOUT after `timeoutMs` unless stopped first. */
function bodyDeadline(timeoutMs: number): { expired: Promise<never>; stop: () => void } {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new BodyTimeoutError(timeoutMs)), timeoutMs);
  });
  return { expired, stop: () => clearTimeout(timer) };
}

/**
 * Reads a Fetch request body: 413 (and the stream cancelled) as soon as it passes
 * `maxBodyBytes`, raw or decoded; 408 when it is not complete within `timeoutMs`;
 * gzip and deflate (and br where the runtime can) decoded.
 */
async function readRequestBody(
  request: Request,
  coding: ContentCoding,
  limits: BodyLimits,
  ticket: Ticket,
  declared?: number,
): Promise<Uint8Array> {
  if (
    coding === 'identity' &&
    declared !== undefined &&
    declared <= WHOLE_BODY_BYTES &&
    declared <= limits.maxBodyBytes
  )
    return readWhole(request, limits, ticket, declared);
  if (request.body === null) return new Uint8Array(0);
  const reader = bodyStream(request.body, coding, limits.maxBodyBytes).getReader();
  const deadline = bodyDeadline(limits.timeoutMs);
  const into = new BodyBuffer(ticket, declared);
  // Decoded bodies are bounded by their streams; an unencoded one here.
  const counted = coding === 'identity';
  let size = 0;
  try {
    for (;;) {
      const { done, value } = await Promise.race([reader.read(), deadline.expired]);
      if (done) break;
      if (counted && (size += value.byteLength) > limits.maxBodyBytes)
        throw new BodyTooLargeError(limits.maxBodyBytes);
      into.add(value);
    }
  } catch (err) {
    await reader.cancel().catch(() => undefined);
    if (
      err instanceof BodyTooLargeError ||
      err instanceof BodyTimeoutError ||
      err instanceof ReceiverBusyError
    )
      throw err;
    if (coding !== 'identity') throw notDecodable(coding);
    throw err;
  } finally {
    deadline.stop();
  }
  return into.bytes();
}

/**
 * Unencoded bodies declared this small or smaller are read whole with `arrayBuffer()`:
 * servers that make their `Request` lazily (Hono's node-server) then build neither the
 * Request's stream nor the Request itself (~0.3 ms of CPU per delivery on Node 20), and
 * the runtimes read it natively. HTTP framing holds the body to its Content-Length, so
 * at most this much is held per request before it is counted.
 */
export const WHOLE_BODY_BYTES = 64 * 1024;

/** A small unencoded body, whole: 408 past `timeoutMs`, 413 if it is larger than its limit after all. */
async function readWhole(
  request: Request,
  limits: BodyLimits,
  ticket: Ticket,
  declared: number,
): Promise<Uint8Array> {
  const deadline = bodyDeadline(limits.timeoutMs);
  try {
    const bytes = new Uint8Array(await Promise.race([request.arrayBuffer(), deadline.expired]));
    if (bytes.byteLength > limits.maxBodyBytes) throw new BodyTooLargeError(limits.maxBodyBytes);
    const into = new BodyBuffer(ticket, declared);
    into.add(bytes);
    return into.bytes();
  } finally {
    deadline.stop();
  }
}

export function toResponse(answer: ReceiverAnswer): Response {
  return new Response(answer.body, { status: answer.status, headers: answer.headers });
}
