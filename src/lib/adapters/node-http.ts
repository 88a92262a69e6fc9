import type { IncomingMessage, ServerResponse } from 'node:http';
import { BodyTooLargeError, BodyUnavailableError } from '../errors.js';
import type { HttpAnswer } from '../receive/answers.js';
import type { VerifiedDelivery } from '../verify/core.js';

/** A Node/Express/Connect request as jobhook reads it. */
export interface NodeWebhookRequest extends IncomingMessage {
  /** Set by body parsers (Express: express.json(), express.raw(), express.text()). */
  body?: unknown;
  /** Raw bytes kept by another middleware, e.g. `express.json({ verify: keepRawBody })`. */
  rawBody?: unknown;
  /** Set by `webhookMiddleware` once the delivery is verified. */
  webhook?: VerifiedDelivery;
}

const HOW_TO_MOUNT =
  'The request body was already parsed by another middleware (express.json()?) and its raw bytes were not kept, so the signature cannot be checked. ' +
  'Mount the jobhook handler before express.json(), or keep the bytes: app.use(express.json({ verify: keepRawBody })).';

function checkSize(bytes: Uint8Array, limit: number): Uint8Array {
  if (bytes.byteLength > limit) throw new BodyTooLargeError(limit);
  return bytes;
}

/**
 * The exact request bytes: kept by another middleware (`req.rawBody`, a Buffer
 * `req.body` from express.raw(), a string from express.text()), or read from the
 * stream with the limit enforced as it arrives.
 */
export function readNodeBody(req: NodeWebhookRequest, limit: number): Promise<Uint8Array> {
  const kept = req.rawBody;
  if (kept instanceof Uint8Array) return Promise.resolve(checkSize(kept, limit));
  if (typeof kept === 'string') return Promise.resolve(checkSize(Buffer.from(kept, 'utf8'), limit));
  const consumed = (req as { _body?: unknown })._body === true || req.readableEnded;
  if (req.body instanceof Uint8Array) return Promise.resolve(checkSize(req.body, limit));
  if (consumed) {
    // express.text() decoded the bytes as UTF-8; encoding them again gives them back for any valid UTF-8 body.
    if (typeof req.body === 'string') return Promise.resolve(checkSize(Buffer.from(req.body, 'utf8'), limit));
    return Promise.reject(new BodyUnavailableError(HOW_TO_MOUNT));
  }
  const declared = Number(req.headers['content-length']);
  if (declared > limit) return Promise.reject(new BodyTooLargeError(limit));
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const cleanup = () => {
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('error', onError);
      req.off('aborted', onAborted);
    };
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) {
        // Stop reading: the answer is sent with Connection: close, so the rest is never read.
        cleanup();
        req.pause();
        reject(new BodyTooLargeError(limit));
        return;
      }
      chunks.push(chunk);
    };
    const onEnd = () => {
      cleanup();
      resolve(Buffer.concat(chunks, size));
    };
    const onError = (err: Error) => {
      cleanup();
      reject(err);
    };
    const onAborted = () => onError(new Error('The client aborted the request'));
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('error', onError);
    req.on('aborted', onAborted);
  });
}

/** Writes an answer with plain Node APIs (works for Express, Connect and node:http). */
export function sendAnswer(res: ServerResponse, answer: HttpAnswer): void {
  if (res.headersSent) return;
  res.statusCode = answer.status;
  for (const [name, value] of Object.entries(answer.headers)) res.setHeader(name, value);
  res.end(JSON.stringify(answer.body));
}

/**
 * For `express.json({ verify: keepRawBody })`: keeps the raw bytes (`req.rawBody`)
 * so jobhook's middleware can run after the JSON parser.
 *
 * @example
 * ```ts
 * import { keepRawBody, webhookReceiver } from 'jobhook/express';
 * app.use(express.json({ verify: keepRawBody }));
 * app.post('/webhooks/gateway', webhookReceiver({ publicKey, onEvent }));
 * ```
 */
export function keepRawBody(req: IncomingMessage, _res: ServerResponse, buf: Buffer): void {
  (req as NodeWebhookRequest).rawBody = buf;
}
