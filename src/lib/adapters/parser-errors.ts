/**
 * The deliveries a body parser refused before jobhook ran. body-parser (express.json(),
 * express.raw(), express.text()) answers a body over its limit (100 kB by default) with a
 * 413 of its own: jobhook never sees the delivery, the operator reads Express's stack
 * trace, and the gateway does not retry a 4xx, so the job is lost. This error handler,
 * mounted after the routes, tells such a delivery (one that carries the signature header)
 * in one jobhook line with the fix, and answers it so that the gateway retries.
 */
import type { ServerResponse } from 'node:http';
import { Alerts } from '../base/alerts.js';
import { BodyTooLargeError, BodyUnavailableError } from '../base/errors.js';
import { resolveLogger, type LoggerInput } from '../base/log.js';
import { checkOptionNames, optionalNumber, type OptionNamesOf } from '../base/options.js';
import { DEFAULT_MAX_BODY_BYTES, DEFAULT_SIGNATURE_HEADER } from '../base/protocol.js';
import { answerForError } from '../receive/answers.js';
import {
  closeWhenAnswered,
  parserLimit,
  sendAnswer,
  type NextFunction,
  type NodeWebhookRequest,
} from './node-http.js';

/** Options of `createParserErrorHandler`: the receiver's own values, when they are not the defaults. */
export interface ParserErrorOptions {
  /** The receiver's `maxBodyBytes` (default 25 MiB): what the parser's limit must take. */
  maxBodyBytes?: number;
  /** The receiver's `signatureHeader` (default `X-Service-Signature`): how a delivery is told from other requests. */
  signatureHeader?: string;
  /** Where the line goes (default: the console; `false`: nowhere). */
  log?: LoggerInput;
}

export const PARSER_ERROR_OPTIONS = {
  maxBodyBytes: true,
  signatureHeader: true,
  log: true,
} as const satisfies OptionNamesOf<ParserErrorOptions>;

/** An Express error handler: `(err, req, res, next)`. */
export type ErrorHandler = (
  err: unknown,
  req: NodeWebhookRequest,
  res: ServerResponse,
  next: NextFunction,
) => void;

/** body-parser's error for a body over its limit (http-errors' PayloadTooLargeError). */
interface TooLarge {
  type: 'entity.too.large';
  limit?: number;
  length?: number;
}

function isTooLarge(err: unknown): err is TooLarge {
  return typeof err === 'object' && err !== null && (err as { type?: unknown }).type === 'entity.too.large';
}

/** The one line an operator reads: what happened, why the job is lost without it, the fix to paste. */
function firstLine(err: TooLarge, maxBodyBytes: number, path: string): string {
  const limit = typeof err.limit === 'number' ? `${err.limit} bytes` : 'its limit';
  const size = typeof err.length === 'number' ? `${err.length} bytes` : 'a body';
  return (
    `jobhook: a body parser refused a delivery of ${size} to ${path} before jobhook ran (over ${limit}; body-parser's default is 100 kB): ` +
    `answered 500 so that the gateway retries (a 413 would lose the job). Fix: take bodies as large as jobhook does, ` +
    `app.use(express.json({ limit: ${parserLimit(maxBodyBytes)}, verify: keepRawBody })) with keepRawBody from jobhook/express, ` +
    'or mount the jobhook receiver before express.json().'
  );
}

/**
 * An Express error handler for the deliveries a body parser refuses as too large before
 * jobhook runs (`PayloadTooLargeError`, body-parser's 100 kB default): one warning with
 * the fix (once a minute at most, its repeats counted), and a 500 `BODY_UNAVAILABLE`
 * answer, which the gateway retries, instead of body-parser's 413, which loses the job.
 * A body over `maxBodyBytes` is answered 413 as jobhook would. Requests without the
 * signature header, and other errors, go on to the next error handler.
 *
 * @example
 * ```ts
 * import { createParserErrorHandler, createReceiver } from 'jobhook/express';
 *
 * app.use(express.json()); // a parser in front, with its 100 kB default
 * app.post('/webhooks/gateway', createReceiver({ publicKey, onEvent }));
 * app.use(createParserErrorHandler()); // after the routes: tells the deliveries it refused
 * ```
 */
export function createParserErrorHandler(options: ParserErrorOptions = {}): ErrorHandler {
  checkOptionNames(options, PARSER_ERROR_OPTIONS);
  const maxBodyBytes = optionalNumber(options.maxBodyBytes, 'maxBodyBytes', DEFAULT_MAX_BODY_BYTES);
  const header = (options.signatureHeader ?? DEFAULT_SIGNATURE_HEADER).toLowerCase();
  const alerts = new Alerts(resolveLogger(options.log));
  return (err, req, res, next) => {
    if (!isTooLarge(err) || req.headers[header] === undefined) return next(err);
    closeWhenAnswered(res);
    if (typeof err.length === 'number' && err.length > maxBodyBytes)
      return sendAnswer(res, answerForError(new BodyTooLargeError(maxBodyBytes)), req);
    const path = (req.url ?? '/').split('?')[0]!.slice(0, 200);
    alerts.raise(
      'parser-too-large',
      'warn',
      'deliveries refused by a body parser before jobhook ran (answered 500 for a retry; raise the parser limit)',
      () => firstLine(err, maxBodyBytes, JSON.stringify(path)),
    );
    sendAnswer(
      res,
      answerForError(new BodyUnavailableError('a body parser refused the delivery before jobhook ran')),
      req,
    );
  };
}
