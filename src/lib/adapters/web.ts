import { BodyTooLargeError } from '../errors.js';
import { MemoryIdempotencyStore } from '../idempotency/memory.js';
import { answerForError, type HttpAnswer } from '../receive/answers.js';
import { receiveDelivery, resolveFlow, type ReceiverFlowOptions } from '../receive/flow.js';
import { DEFAULT_MAX_BODY_BYTES } from '../protocol.js';
import { createWebVerifierCore, type WebVerifierOptions } from '../verify/web-verifier.js';

export interface WebhookHandlerOptions extends WebVerifierOptions, ReceiverFlowOptions<Request> {}

/** Reads a Fetch request body, stopping (and cancelling the stream) as soon as it passes `limit`. */
export async function readRequestBody(request: Request, limit: number): Promise<Uint8Array> {
  const declared = Number(request.headers.get('content-length'));
  if (declared > limit) {
    await request.body?.cancel().catch(() => undefined);
    throw new BodyTooLargeError(limit);
  }
  if (request.body === null) return new Uint8Array(0);
  const reader = request.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > limit) {
      await reader.cancel().catch(() => undefined);
      throw new BodyTooLargeError(limit);
    }
    chunks.push(value);
  }
  if (chunks.length === 1) return chunks[0]!;
  const out = new Uint8Array(size);
  let at = 0;
  for (const c of chunks) {
    out.set(c, at);
    at += c.byteLength;
  }
  return out;
}

export function toResponse(answer: HttpAnswer): Response {
  return new Response(JSON.stringify(answer.body), { status: answer.status, headers: answer.headers });
}

export function createHandler(options: WebhookHandlerOptions): (request: Request) => Promise<Response> {
  const verifier = createWebVerifierCore(options);
  const flow = resolveFlow(options, () => new MemoryIdempotencyStore());
  const limit = options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES;
  return async (request) => {
    try {
      return toResponse(await receiveDelivery(async () => verifier.verify(await readRequestBody(request, limit), request.headers), flow, request));
    } catch (err) {
      return toResponse(answerForError(err));
    }
  };
}
