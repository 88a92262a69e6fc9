/**
 * The two things a Fetch API receiver does itself: read the exact body bytes of a
 * `Request` within the limits, and turn an answer into a `Response`. No node:* import.
 */
import { BodyTimeoutError, BodyTooLargeError, ReceiverBusyError } from '../base/errors.js';
import type { ReceiverAnswer } from '../receive/answers.js';
import { BodyClock, ClientAbortedError, type BodyLimits, type ContentCoding } from '../receive/body.js';
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

/** How a body as sent is told: `chunk` for each piece (it may throw: the stream errors with it), `failed` once the request's own stream failed (the client went away). */
interface RawTap {
  chunk(bytes: number): void;
  failed: boolean;
}

/**
 * The request's stream as sent, each chunk told to `tap` before it goes on (an encoded
 * body's raw bytes: counted in flight and against the rate floor); a failure of the
 * request's own stream marks `tap.failed`, to tell a client that went away from a body
 * that does not decode.
 */
function tapped(body: ReadableStream<Uint8Array>, tap: RawTap): ReadableStream<Uint8Array> {
  const reader = body.getReader();
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      let read: ReadableStreamReadResult<Uint8Array>;
      try {
        read = await reader.read();
      } catch (err) {
        tap.failed = true;
        throw err;
      }
      if (read.done) return controller.close();
      tap.chunk(read.value.byteLength);
      controller.enqueue(read.value);
    },
    cancel: (reason) => reader.cancel(reason),
  });
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
  tap: RawTap,
): ReadableStream<Uint8Array> {
  if (coding === 'identity') return body;
  return webDecoded(tapped(body, tap), coding, limit).pipeThrough(limited(limit));
}

/** The body's deadlines (BodyClock) as a promise that rejects with BODY_TIMEOUT. */
function bodyDeadline(limits: BodyLimits): { expired: Promise<never>; clock: BodyClock } {
  let clock!: BodyClock;
  const expired = new Promise<never>((_, reject) => {
    clock = new BodyClock(limits, reject);
  });
  expired.catch(() => undefined);
  return { expired, clock };
}

/** Errors of jobhook's own making while reading: passed on as they are. */
const ours = (err: unknown) =>
  err instanceof BodyTooLargeError || err instanceof BodyTimeoutError || err instanceof ReceiverBusyError;

/**
 * Reads a Fetch request body: 413 (and the stream cancelled) as soon as it passes
 * `maxBodyBytes`, raw or decoded; 408 when it is not complete within `timeoutMs` or
 * stops arriving (BodyClock); gzip and deflate (and br where the runtime can) decoded.
 * A request whose own stream fails is a client that went away (ClientAbortedError).
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
  const into = new BodyBuffer(ticket, declared);
  const deadline = bodyDeadline(limits);
  let raw = 0;
  const tap: RawTap = {
    chunk: (bytes) => {
      if ((raw += bytes) > limits.maxBodyBytes) throw new BodyTooLargeError(limits.maxBodyBytes);
      deadline.clock.arrive(bytes);
      into.addRaw(bytes);
    },
    failed: false,
  };
  const reader = bodyStream(request.body, coding, limits.maxBodyBytes, tap).getReader();
  // Decoded bodies are bounded by their streams; an unencoded one here.
  const identity = coding === 'identity';
  let size = 0;
  try {
    for (;;) {
      const { done, value } = await Promise.race([reader.read(), deadline.expired]);
      if (done) break;
      if (identity) {
        if ((size += value.byteLength) > limits.maxBodyBytes)
          throw new BodyTooLargeError(limits.maxBodyBytes);
        deadline.clock.arrive(value.byteLength);
      }
      into.add(value);
    }
  } catch (err) {
    await reader.cancel().catch(() => undefined);
    if (ours(err)) throw err;
    if (identity || tap.failed) throw new ClientAbortedError();
    throw notDecodable(coding);
  } finally {
    deadline.clock.stop();
  }
  return into.bytes();
}

/**
 * Unencoded bodies declared this small or smaller are read whole with `arrayBuffer()`:
 * servers that make their `Request` lazily (Hono's node-server) then build neither the
 * Request's stream nor the Request itself (~0.3 ms of CPU per delivery on Node 20), and
 * the runtimes read it natively. HTTP framing holds the body to its Content-Length: its
 * declared size is counted in flight before it is read (nothing the runtime buffers goes
 * uncounted), and with no chunk to see, it must arrive whole within the rate floor's
 * period (BodyClock: 5 s by default for at most 64 KiB).
 */
export const WHOLE_BODY_BYTES = 64 * 1024;

/** A small unencoded body, whole: its declared size held first; 408 when it does not arrive in time, 413 if it is larger than its limit after all. */
async function readWhole(
  request: Request,
  limits: BodyLimits,
  ticket: Ticket,
  declared: number,
): Promise<Uint8Array> {
  ticket.cover(declared);
  const deadline = bodyDeadline(limits);
  try {
    const bytes = new Uint8Array(await Promise.race([request.arrayBuffer(), deadline.expired]));
    if (bytes.byteLength > limits.maxBodyBytes) throw new BodyTooLargeError(limits.maxBodyBytes);
    const into = new BodyBuffer(ticket, declared);
    into.add(bytes);
    return into.bytes();
  } catch (err) {
    if (ours(err)) throw err;
    throw new ClientAbortedError();
  } finally {
    deadline.clock.stop();
  }
}

export function toResponse(answer: ReceiverAnswer): Response {
  return new Response(answer.body, { status: answer.status, headers: answer.headers });
}
