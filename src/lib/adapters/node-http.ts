/**
 * The two things a Node (node:http, Express, Connect) receiver does itself: read the
 * exact body bytes within the limits, and write an answer.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type * as Zlib from 'node:zlib';
import { BodyMalformedError, BodyTimeoutError, BodyTooLargeError, BodyUnavailableError } from '../base/errors.js';
import { ClientAbortedError, type BodyLimits } from '../receive/body-limits.js';
import type { ReceiverAnswer } from '../receive/answers.js';
import type { VerifiedDelivery } from '../core/verify/core.js';
import { contentCoding, type ContentCoding } from './encoding.js';
import { ownedBodies } from '../runtime/verify/worker-pool.js';
import type { Ticket } from '../receive/guard.js';

/** A Node/Express/Connect request as jobhook reads it. */
export interface NodeWebhookRequest extends IncomingMessage {
  /** Set by body parsers (Express: express.json(), express.raw(), express.text()). */
  body?: unknown;
  /** Raw bytes kept by another middleware, e.g. `express.json({ verify: keepRawBody })`. */
  rawBody?: unknown;
  /** Set by `createMiddleware` once the delivery is verified. */
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
 * Bytes another middleware already read (body parsers decode Content-Encoding
 * themselves, so these are the decoded bytes), undefined when the stream is still
 * ours to read; BodyUnavailableError when only a parsed object is left.
 */
function keptBytes(req: NodeWebhookRequest): Uint8Array | undefined {
  const kept = req.rawBody;
  if (kept instanceof Uint8Array) return kept;
  if (typeof kept === 'string') return Buffer.from(kept, 'utf8');
  if (req.body instanceof Uint8Array) return req.body;
  const consumed = (req as { _body?: unknown })._body === true || req.readableEnded;
  if (!consumed) return undefined;
  // express.text() decoded the bytes as UTF-8; encoding them again gives them back for any valid UTF-8 body.
  if (typeof req.body === 'string') return Buffer.from(req.body, 'utf8');
  throw new BodyUnavailableError(HOW_TO_MOUNT);
}

let zlibModule: Promise<typeof Zlib> | undefined;

/**
 * node:zlib, loaded by the first compressed delivery rather than by `import('jobhook')`
 * (it costs a cold import several milliseconds: bench/import.mjs).
 */
export function loadZlib(): Promise<typeof Zlib> {
  zlibModule ??= import('node:zlib');
  return zlibModule;
}

type Decoder = Zlib.Gunzip | Zlib.Inflate | Zlib.BrotliDecompress;

async function decoder(coding: ContentCoding): Promise<Decoder | undefined> {
  if (coding === 'identity') return undefined;
  const zlib = await loadZlib();
  return coding === 'gzip' ? zlib.createGunzip() : coding === 'deflate' ? zlib.createInflate() : zlib.createBrotliDecompress();
}

/** What a signed request holds: its signature, its body, and its place among the bodies in flight (release it once done). */
export interface SignedBody<S> {
  signature: S;
  bytes: Uint8Array;
  ticket: Ticket | undefined;
}

/**
 * A signed request's body, in the order that keeps unsigned traffic cheap: what the
 * headers alone tell (a kept or declared body over the limit: 413; an unknown coding:
 * 415), then `open(headers)` (the signature: 401 before a byte of the body is read),
 * then `admit` (the receiver's bound on bodies in flight, from Content-Length: 503
 * before a byte is buffered; or a known delivery), then the body, counted against the
 * ticket as it arrives. Rejects with the first refusal (the ticket released); an answer
 * sent before the body was read closes the connection (sendAnswer), so the rest is
 * never read.
 */
export async function signedNodeBody<S>(
  req: NodeWebhookRequest,
  limits: BodyLimits,
  open: (headers: NodeWebhookRequest['headers']) => S | Promise<S>,
  admit?: (signature: S, declared: number | undefined) => Ticket,
): Promise<SignedBody<S>> {
  const kept = keptBytes(req);
  if (kept !== undefined) checkSize(kept, limits.maxBodyBytes);
  const coding = kept === undefined ? contentCoding(req.headers) : 'identity';
  const declared = req.headers['content-length'] === undefined ? undefined : Number(req.headers['content-length']);
  if (kept === undefined && Number(declared) > limits.maxBodyBytes) throw new BodyTooLargeError(limits.maxBodyBytes);
  const signature = await open(req.headers);
  const ticket = admit?.(signature, kept?.byteLength ?? (coding === 'identity' ? declared : undefined));
  if (kept !== undefined) return { signature, bytes: kept, ticket };
  try {
    return { signature, bytes: await readStream(req, coding, await decoder(coding), limits, ticket, coding === 'identity' ? declared : undefined), ticket };
  } catch (err) {
    ticket?.release();
    throw err;
  }
}

/**
 * Reads the body from the stream with the limits enforced as it arrives (413 as soon
 * as the body, raw or decoded, passes `maxBodyBytes`; 408 when it is not complete
 * within `timeoutMs`; gzip, deflate and br decoded).
 */
function readStream(req: NodeWebhookRequest, coding: ContentCoding, unzip: Decoder | undefined, limits: BodyLimits, ticket: Ticket | undefined, declared: number | undefined): Promise<Uint8Array> {
  const limit = limits.maxBodyBytes;
  // A declared size (within the limit, admitted) is filled as it arrives: copying a large
  // body at its end held the event loop for hundreds of milliseconds on a loaded machine
  // (the pages of a fresh buffer are touched then); this spreads that over the chunks.
  const whole = declared !== undefined && Number.isInteger(declared) && declared > 64 * 1024 && declared <= limit ? Buffer.allocUnsafeSlow(declared) : undefined;
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let rawSize = 0;
    let settled = false;
    const timer = setTimeout(() => fail(new BodyTimeoutError(limits.timeoutMs)), limits.timeoutMs);
    const cleanup = () => {
      settled = true;
      clearTimeout(timer);
      req.off('data', onRaw);
      req.off('end', onRawEnd);
      req.off('error', fail);
      req.off('aborted', onAborted);
    };
    function fail(err: Error): void {
      if (settled) return;
      cleanup();
      // Stop reading: the answer goes out with Connection: close, so the rest is never read.
      req.pause();
      unzip?.destroy();
      reject(err);
    }
    const onDecoded = (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) return fail(new BodyTooLargeError(limit));
      try {
        ticket?.cover(size);
      } catch (err) {
        return fail(err as Error);
      }
      if (whole !== undefined && size <= whole.length) chunk.copy(whole, size - chunk.length);
      else chunks.push(chunk);
    };
    const finish = () => {
      if (settled) return;
      cleanup();
      const body = whole !== undefined && size === whole.length ? whole : Buffer.concat(whole === undefined ? chunks : [whole.subarray(0, Math.min(size, whole.length)), ...chunks], size);
      ownedBodies.add(body);
      resolve(body);
    };
    let burst = 0;
    function onRaw(chunk: Buffer): void {
      rawSize += chunk.length;
      if (rawSize > limit) return fail(new BodyTooLargeError(limit));
      // A socket with megabytes waiting emits them all in one turn of the event loop: after
      // each MiB, let the loop turn (copying a MiB into fresh memory took ~5–10 ms here).
      burst += chunk.length;
      if (burst >= 1024 * 1024) {
        burst = 0;
        req.pause();
        setImmediate(() => settled || req.resume());
      }
      if (unzip === undefined) onDecoded(chunk);
      else unzip.write(chunk);
    }
    const onRawEnd = () => (unzip === undefined ? finish() : unzip.end());
    const onAborted = () => fail(new ClientAbortedError());
    if (unzip !== undefined) {
      unzip.on('data', onDecoded);
      unzip.on('end', finish);
      unzip.on('error', () => fail(new BodyMalformedError(`the body is not valid ${coding} data (Content-Encoding: ${coding})`, 0)));
    }
    req.on('data', onRaw);
    req.on('end', onRawEnd);
    req.on('error', fail);
    req.on('aborted', onAborted);
  });
}

/**
 * Writes an answer with plain Node APIs (works for Express, Connect and node:http).
 * An answer to a request whose body was not read (refused on its headers) closes the
 * connection, as does one the answer asks to close (413, 408).
 */
export function sendAnswer(res: ServerResponse, answer: ReceiverAnswer, req?: IncomingMessage): void {
  if (res.headersSent) return;
  res.statusCode = answer.status;
  for (const [name, value] of Object.entries(answer.headers)) res.setHeader(name, value);
  if (answer.headers.connection === 'close' || (req !== undefined && !req.complete)) closeWhenAnswered(res);
  res.end(answer.body);
}

/**
 * The rest of the body is not wanted: whoever answers (jobhook, or the application's
 * error handler after `next(err)`), the answer says `Connection: close`, the connection
 * ends once it is out, and is dropped if the client keeps it open (a slow sender, or
 * one streaming a body nobody reads, holding a socket).
 */
export function closeWhenAnswered(res: ServerResponse): void {
  if (!res.headersSent && !res.hasHeader('connection')) res.setHeader('connection', 'close');
  // Taken now: Node detaches the socket from the response before our 'finish' listener runs.
  const socket = res.socket;
  res.once('finish', () => {
    socket?.end();
    setTimeout(() => socket?.destroy(), 1000).unref();
  });
}

/**
 * After a refusal handed to the application (`next(err)`) with the body unread: whoever
 * reads it next (Express's own final handler reads all of it before answering) gets at
 * most `maxBodyBytes` within `timeoutMs`, as jobhook would; past either, the request
 * and its connection are destroyed. A forged request cannot make the server read on.
 * A body that arrived in time is not cut, however long the answer takes; the bound ends
 * with the response.
 */
export function boundUnreadBody(req: IncomingMessage, res: ServerResponse, limits: BodyLimits): void {
  let read = 0;
  const onData = (chunk: Buffer) => {
    read += chunk.length;
    if (read > limits.maxBodyBytes) stop();
  };
  const stop = () => {
    done();
    req.destroy();
  };
  const timer = setTimeout(() => (req.complete ? done() : stop()), limits.timeoutMs);
  timer.unref();
  // Counted only once someone makes the body flow: left alone, nothing of it is read.
  const count = () => req.on('data', onData);
  req.once('resume', count);
  req.once('end', done);
  req.once('close', done);
  // Once the answer is out (or the connection gone), the connection is ending: nothing to bound.
  res.once('close', done);
  function done(): void {
    clearTimeout(timer);
    req.off('resume', count);
    req.off('data', onData);
    req.off('end', done);
    req.off('close', done);
    res.off('close', done);
  }
}

/**
 * For `express.json({ verify: keepRawBody })`: keeps the raw bytes (`req.rawBody`)
 * so jobhook's handlers can run after the JSON parser.
 *
 * @example
 * ```ts
 * import { createReceiver, keepRawBody } from 'jobhook/express';
 * app.use(express.json({ verify: keepRawBody }));
 * app.post('/webhooks/gateway', createReceiver({ publicKey, onEvent }));
 * ```
 */
export function keepRawBody(req: IncomingMessage, _res: ServerResponse, buf: Buffer): void {
  (req as NodeWebhookRequest).rawBody = buf;
}
