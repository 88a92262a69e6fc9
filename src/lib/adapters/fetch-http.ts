/**
 * The two things a Fetch API receiver does itself: read the exact body bytes of a
 * `Request` within the limits, and turn an answer into a `Response`. No node:* import.
 */
import { concatBytes } from '../base/bytes.js';
import { BodyTimeoutError, BodyTooLargeError, ReceiverBusyError } from '../base/errors.js';
import type { ReceiverAnswer } from '../receive/answers.js';
import type { BodyLimits, ContentCoding } from '../receive/body.js';
import type { Ticket } from '../receive/guard.js';
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
  return { headers: request.headers, read: (coding, ticket, declared) => readRequestBody(request, coding, limits, ticket, declared) };
}

/** The body's stream, bounded raw and decoded. */
function bodyStream(body: ReadableStream<Uint8Array>, coding: ContentCoding, limit: number): ReadableStream<Uint8Array> {
  const stream = body.pipeThrough(limited(limit));
  return coding === 'identity' ? stream : webDecoded(stream, coding).pipeThrough(limited(limit));
}

/**
 * Reads a Fetch request body: 413 (and the stream cancelled) as soon as it passes
 * `maxBodyBytes`, raw or decoded; 408 when it is not complete within `timeoutMs`;
 * gzip and deflate (and br where the runtime can) decoded.
 */
async function readRequestBody(request: Request, coding: ContentCoding, limits: BodyLimits, ticket: Ticket, declared?: number): Promise<Uint8Array> {
  if (request.body === null) return new Uint8Array(0);
  const reader = bodyStream(request.body, coding, limits.maxBodyBytes).getReader();
  let timer: ReturnType<typeof setTimeout> | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new BodyTimeoutError(limits.timeoutMs)), limits.timeoutMs);
  });
  const into = new Filling(declared, limits.maxBodyBytes);
  try {
    for (;;) {
      const { done, value } = await Promise.race([reader.read(), deadline]);
      if (done) break;
      ticket.cover(into.add(value));
    }
  } catch (err) {
    await reader.cancel().catch(() => undefined);
    if (err instanceof BodyTooLargeError || err instanceof BodyTimeoutError || err instanceof ReceiverBusyError) throw err;
    if (coding !== 'identity') throw notDecodable(coding);
    throw err;
  } finally {
    clearTimeout(timer);
  }
  return into.bytes();
}

/** Chunks gathered into one array; a declared size is filled as it arrives (copying a large body at its end held the event loop). */
class Filling {
  private readonly chunks: Uint8Array[] = [];
  private readonly whole: Uint8Array | undefined;
  private size = 0;

  constructor(declared: number | undefined, limit: number) {
    this.whole = declared !== undefined && Number.isInteger(declared) && declared > 64 * 1024 && declared <= limit ? new Uint8Array(declared) : undefined;
  }

  /** Takes a chunk; the size so far. */
  add(value: Uint8Array): number {
    this.size += value.byteLength;
    if (this.whole !== undefined && this.size <= this.whole.length) this.whole.set(value, this.size - value.byteLength);
    else this.chunks.push(value);
    return this.size;
  }

  bytes(): Uint8Array {
    const { whole, size, chunks } = this;
    if (whole === undefined) return chunks.length === 0 ? new Uint8Array(0) : concatBytes(chunks);
    return size === whole.length && chunks.length === 0 ? whole : concatBytes([whole.subarray(0, Math.min(size, whole.length)), ...chunks]);
  }
}

export function toResponse(answer: ReceiverAnswer): Response {
  return new Response(answer.body, { status: answer.status, headers: answer.headers });
}
