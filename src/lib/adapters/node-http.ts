/**
 * The two things a Node (node:http, Express, Connect) receiver does itself: read the
 * exact body bytes within the limits, and write an answer.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { BodyTimeoutError, BodyTooLargeError, BodyUnavailableError } from '../base/errors.js';
import type { VerifiedDelivery } from '../core/verify/core.js';
import type { ReceiverAnswer } from '../receive/answers.js';
import { ClientAbortedError, type BodyLimits, type ContentCoding } from '../receive/body.js';
import type { Ticket } from '../receive/guard.js';
import { BodyBuffer } from '../receive/body-buffer.js';
import type { BodySource } from '../receive/signed-body.js';
import { nodeDecoder, notDecodable, type ZlibModule } from './decode.js';

/** A Node/Express/Connect request as jobhook reads it. */
export interface NodeWebhookRequest extends IncomingMessage {
  /** Set by body parsers (Express: express.json(), express.raw(), express.text()). */
  body?: unknown;
  /** Raw bytes kept by another middleware, e.g. `express.json({ verify: keepRawBody })`. */
  rawBody?: unknown;
  /** Set by `createMiddleware` once the delivery is verified. */
  webhook?: VerifiedDelivery;
}

/** body-parser's size for maxBodyBytes: '25mb' for the default 25 MiB (its 'mb' is 1024²), else the byte count. */
export function parserLimit(maxBodyBytes: number): string {
  return maxBodyBytes % (1024 * 1024) === 0 ? `'${maxBodyBytes / (1024 * 1024)}mb'` : String(maxBodyBytes);
}

/** What to do when a parser took the body: advice that carries the limit it needs (body-parser's default 100 kB would answer larger deliveries 413). */
function howToMount(maxBodyBytes: number): string {
  return (
    'The request body was already parsed by another middleware (express.json()?) and its raw bytes were not kept, so the signature cannot be checked. ' +
    `Mount the jobhook handler before express.json(), or keep the bytes and take bodies as large as jobhook does: app.use(express.json({ limit: ${parserLimit(maxBodyBytes)}, verify: keepRawBody })) ` +
    "(body-parser's default limit, 100 kB, answers larger deliveries 413 before jobhook sees them, and the gateway does not retry a 413)."
  );
}

/**
 * Bytes another middleware already read (body parsers decode Content-Encoding
 * themselves, so these are the decoded bytes), undefined when the stream is still
 * ours to read; BodyUnavailableError when only a parsed object is left.
 */
function keptBytes(req: NodeWebhookRequest, maxBodyBytes: number): Uint8Array | undefined {
  const kept = req.rawBody;
  if (kept instanceof Uint8Array) return kept;
  if (typeof kept === 'string') return Buffer.from(kept, 'utf8');
  if (req.body instanceof Uint8Array) return req.body;
  const consumed = (req as { _body?: unknown })._body === true || req.readableEnded;
  if (!consumed) return undefined;
  // express.text() decoded the bytes as UTF-8; encoding them again gives them back for any valid UTF-8 body.
  if (typeof req.body === 'string') return Buffer.from(req.body, 'utf8');
  throw new BodyUnavailableError(howToMount(maxBodyBytes));
}

let zlibModule: Promise<ZlibModule> | undefined;

/** node:zlib, loaded by the first compressed delivery rather than by `import('jobhook')` (bench/import.mjs). */
export function loadZlib(): Promise<ZlibModule> {
  zlibModule ??= import('node:zlib');
  return zlibModule;
}

/** A Node request's body for the signed-body flow: bytes another middleware kept, or the stream, read within the limits. */
export function nodeBodySource(req: NodeWebhookRequest, limits: BodyLimits): BodySource {
  return {
    headers: req.headers,
    kept: keptBytes(req, limits.maxBodyBytes),
    read: async (coding, ticket, declared) => {
      const unzip = coding === 'identity' ? undefined : nodeDecoder(await loadZlib(), coding);
      return new Promise<Uint8Array>((resolve, reject) =>
        new StreamRead(req, coding, unzip, limits, ticket, declared, resolve, reject).start(),
      );
    },
  };
}

type Decoder = ReturnType<typeof nodeDecoder>;

/**
 * Reads the body from the stream with the limits enforced as it arrives (413 as soon
 * as the body, raw or decoded, passes `maxBodyBytes`; 408 when it is not complete
 * within `timeoutMs`; gzip, deflate and br decoded).
 */
class StreamRead {
  private readonly body: BodyBuffer;
  private size = 0;
  private rawSize = 0;
  private burst = 0;
  private settled = false;
  private timer: ReturnType<typeof setTimeout> | undefined;

  constructor(
    private readonly req: NodeWebhookRequest,
    private readonly coding: ContentCoding,
    private readonly unzip: Decoder | undefined,
    private readonly limits: BodyLimits,
    ticket: Ticket,
    declared: number | undefined,
    private readonly resolve: (body: Uint8Array) => void,
    private readonly reject: (err: Error) => void,
  ) {
    this.body = new BodyBuffer(ticket, declared, (n) => Buffer.allocUnsafeSlow(n));
  }

  start(): void {
    this.timer = setTimeout(
      () => this.fail(new BodyTimeoutError(this.limits.timeoutMs)),
      this.limits.timeoutMs,
    );
    const { unzip, req } = this;
    if (unzip !== undefined) {
      unzip.on('data', this.onDecoded);
      unzip.on('end', this.finish);
      unzip.on('error', () => this.fail(notDecodable(this.coding as Exclude<ContentCoding, 'identity'>)));
    }
    req.on('data', this.onRaw);
    req.on('end', this.onRawEnd);
    req.on('error', this.fail);
    req.on('aborted', this.onAborted);
  }

  private readonly cleanup = (): void => {
    this.settled = true;
    clearTimeout(this.timer);
    this.req.off('data', this.onRaw);
    this.req.off('end', this.onRawEnd);
    this.req.off('error', this.fail);
    this.req.off('aborted', this.onAborted);
  };

  private readonly fail = (err: Error): void => {
    if (this.settled) return;
    this.cleanup();
    // Stop reading: the answer goes out with Connection: close, so the rest is never read.
    this.req.pause();
    this.unzip?.destroy();
    this.reject(err);
  };

  private readonly onDecoded = (chunk: Buffer): void => {
    this.size += chunk.length;
    if (this.size > this.limits.maxBodyBytes)
      return this.fail(new BodyTooLargeError(this.limits.maxBodyBytes));
    try {
      this.body.add(chunk);
    } catch (err) {
      return this.fail(err as Error);
    }
  };

  private readonly finish = (): void => {
    if (this.settled) return;
    this.cleanup();
    this.resolve(this.body.bytes());
  };

  private readonly onRaw = (chunk: Buffer): void => {
    this.rawSize += chunk.length;
    if (this.rawSize > this.limits.maxBodyBytes)
      return this.fail(new BodyTooLargeError(this.limits.maxBodyBytes));
    // A socket with megabytes waiting emits them all in one turn of the event loop: after
    // each MiB, let the loop turn (copying a MiB into fresh memory took ~5–10 ms here).
    this.burst += chunk.length;
    if (this.burst >= 1024 * 1024) {
      this.burst = 0;
      this.req.pause();
      setImmediate(() => this.settled || this.req.resume());
    }
    if (this.unzip === undefined) this.onDecoded(chunk);
    else this.unzip.write(chunk);
  };

  private readonly onRawEnd = (): void => (this.unzip === undefined ? this.finish() : void this.unzip.end());
  private readonly onAborted = (): void => this.fail(new ClientAbortedError());
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

export type NextFunction = (err?: unknown) => void;

/**
 * Hands an error to the application's error handler. A body left unread (refused on
 * its headers, or over the limit) is not read on: the answer the handler sends closes
 * the connection, as jobhook's own answers do, and a handler that reads the body first
 * (Express's default one does) gets no more of it than jobhook would have read.
 */
export function passOn(
  err: unknown,
  req: NodeWebhookRequest,
  res: ServerResponse,
  next: NextFunction,
  limits: BodyLimits,
): void {
  if (!req.complete) {
    closeWhenAnswered(res);
    boundUnreadBody(req, res, limits);
  }
  next(err);
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
 * // The limit: as large as the deliveries (jobhook's maxBodyBytes, 25 MiB by default).
 * app.use(express.json({ limit: '25mb', verify: keepRawBody }));
 * app.post('/webhooks/gateway', createReceiver({ publicKey, onEvent }));
 * ```
 */
export function keepRawBody(req: IncomingMessage, _res: ServerResponse, buf: Buffer): void {
  (req as NodeWebhookRequest).rawBody = buf;
}
