/**
 * What every adapter knows of a body before reading it: the limits that bound reading
 * it, its Content-Encoding, and why a read ended without one.
 */
import { EncodingUnsupportedError } from '../base/errors.js';
import { getHeader, type HeadersInput } from '../core/verify/headers.js';

/** What bounds reading a body, in every adapter. */
export interface BodyLimits {
  /** Largest body, raw and after decoding, in bytes. */
  readonly maxBodyBytes: number;
  /** The whole body must arrive within this (ms). */
  readonly timeoutMs: number;
}

/**
 * The client closed the request before its body arrived (a sender that gave up, a
 * dropped connection): nothing to answer, and nothing wrong with the receiver, so it
 * is logged at debug, not as an error.
 */
export class ClientAbortedError extends Error {
  constructor() {
    super('The client aborted the request before its body arrived');
    this.name = 'ClientAbortedError';
  }
}

/** The content codings jobhook decodes. */
export type ContentCoding = 'identity' | 'gzip' | 'deflate' | 'br';

/**
 * The request's Content-Encoding: identity when absent, gzip, deflate or br; anything
 * else (or several codings stacked) is ENCODING_UNSUPPORTED (415): a 400 would end the
 * gateway's retries over a body it may well send differently.
 */
export function contentCoding(headers: HeadersInput): ContentCoding {
  const raw = getHeader(headers, 'content-encoding');
  if (raw === undefined) return 'identity';
  const codings = raw
    .split(',')
    .map((c) => c.trim().toLowerCase())
    .filter((c) => c !== '' && c !== 'identity');
  if (codings.length === 0) return 'identity';
  const [only] = codings;
  if (codings.length === 1) {
    if (only === 'gzip' || only === 'x-gzip') return 'gzip';
    if (only === 'deflate' || only === 'br') return only;
  }
  throw new EncodingUnsupportedError(
    `Content-Encoding ${JSON.stringify(raw)} is not supported; send the body as is, or gzip, deflate or br.`,
  );
}

/** The declared Content-Length, or undefined. */
export function declaredLength(headers: HeadersInput): number | undefined {
  const length = getHeader(headers, 'content-length');
  return length === undefined ? undefined : Number(length);
}
