/**
 * What every adapter knows of a body before reading it: the limits that bound reading
 * it, its Content-Encoding, and why a read ended without one.
 */
import { BodyTimeoutError, EncodingUnsupportedError } from '../base/errors.js';
import { getHeader, type HeadersInput } from '../core/verify/headers.js';
import { quoted } from '../base/text.js';

/** What bounds reading a body, in every adapter. */
export interface BodyLimits {
  /** Largest body, raw and after decoding, in bytes. */
  readonly maxBodyBytes: number;
  /** The whole body must arrive within this (ms). */
  readonly timeoutMs: number;
  /** And at least STALL_FLOOR_BYTES of it (as sent, before decoding) in every period this long (ms). */
  readonly stallMs: number;
}

/** The least a body must send in each `stallMs` (its raw bytes: a compressed body cannot look alive by its ratio). */
export const STALL_FLOOR_BYTES = 1024;
/** `stallMs` by default: a body that stops arriving is dropped within seconds, not at bodyTimeoutMs (30 s). */
export const DEFAULT_STALL_MS = 5_000;

/** `stallMs` for a body timeout: at most DEFAULT_STALL_MS, and a quarter of the timeout (a body that sent in its first period is dropped by the second). */
export function stallPeriod(timeoutMs: number): number {
  return Math.min(DEFAULT_STALL_MS, Math.max(1, Math.floor(timeoutMs / 4)));
}

/**
 * A body's two deadlines: all of it within `timeoutMs`, and STALL_FLOOR_BYTES of it in
 * every `stallMs` (a rate floor: a body that stops arriving holds its place in flight for
 * seconds, not for the whole timeout). `arrived` is one addition per chunk; the floor is
 * checked by one timer per body.
 */
export class BodyClock {
  private arrived = 0;
  private checked = 0;
  private readonly total: ReturnType<typeof setTimeout>;
  private readonly floor: ReturnType<typeof setInterval> | undefined;

  constructor(limits: BodyLimits, expire: (err: BodyTimeoutError) => void) {
    this.total = setTimeout(() => expire(new BodyTimeoutError(limits.timeoutMs)), limits.timeoutMs);
    if (limits.stallMs < limits.timeoutMs)
      this.floor = setInterval(() => {
        if (this.arrived - this.checked < STALL_FLOOR_BYTES)
          return expire(
            new BodyTimeoutError(limits.timeoutMs, { bytes: STALL_FLOOR_BYTES, ms: limits.stallMs }),
          );
        this.checked = this.arrived;
      }, limits.stallMs);
  }

  /** `bytes` more of the body arrived (as sent). */
  arrive(bytes: number): void {
    this.arrived += bytes;
  }

  stop(): void {
    clearTimeout(this.total);
    clearInterval(this.floor);
  }
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
    `Content-Encoding ${quoted(raw)} is not supported; send the body as is, or gzip, deflate or br.`,
  );
}

/** The declared Content-Length, or undefined. */
export function declaredLength(headers: HeadersInput): number | undefined {
  const length = getHeader(headers, 'content-length');
  return length === undefined ? undefined : Number(length);
}
