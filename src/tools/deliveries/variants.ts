/**
 * A delivery sent otherwise than once as it was signed, in one place for the simulator,
 * `jobhook send` and `jobhook check`: compressed (Content-Encoding), changed after it was
 * signed, and sent twice, one after the other or both at once (a retry racing a slow
 * first attempt).
 */
import { brotliCompressSync, constants as zlib, gzipSync } from 'node:zlib';
import { sendDelivery, type AttemptReport, type SendOptions, type SendResult } from './send.js';
import { isWireObject, type WireObject } from './wire.js';
import type { ContentCoding } from '../../lib/entries/tools-door.js';

/**
 * A Content-Encoding a test can send: of those a receiver decodes, the two compressions
 * the gateway's proxies use (the gateway itself sends none; receivers must take both).
 */
export type SentEncoding = Extract<ContentCoding, 'gzip' | 'br'>;

export const SENT_ENCODINGS: readonly SentEncoding[] = ['gzip', 'br'];

export function isSentEncoding(value: unknown): value is SentEncoding {
  return SENT_ENCODINGS.includes(value as SentEncoding);
}

/**
 * The same delivery a second time: `in-a-row` once the first sending ended (the gateway's
 * retry after a lost answer), `at-once` both at the same moment (a retry racing a slow
 * first attempt).
 */
export type Twice = 'in-a-row' | 'at-once';

export const TWICE: readonly Twice[] = ['in-a-row', 'at-once'];

/** A delivery: its headers and the bytes on the wire. */
export interface WireDelivery {
  headers: Record<string, string>;
  body: string | Uint8Array;
}

/** `body` compressed with `coding`. */
export function encodeBody(body: string | Uint8Array, coding: SentEncoding): Uint8Array {
  // Brotli's default quality (11) takes 0.4 s on 150 kB; 5 compresses about as well as gzip, at once.
  const out =
    coding === 'gzip'
      ? gzipSync(body)
      : brotliCompressSync(body, { params: { [zlib.BROTLI_PARAM_QUALITY]: 5 } });
  return new Uint8Array(out.buffer, out.byteOffset, out.byteLength);
}

/** The delivery with its body compressed and `Content-Encoding` saying so; the signature still covers the JSON inside. */
export function encodedDelivery(
  delivery: WireDelivery,
  coding: SentEncoding,
): { headers: Record<string, string>; body: Uint8Array } {
  return {
    headers: { ...delivery.headers, 'Content-Encoding': coding },
    body: encodeBody(delivery.body, coding),
  };
}

const TAMPERED = 'changed on the way';

/**
 * The payload with one value changed, as someone on the way would change it after it was
 * signed: `output.text` of a successful job, else `error.message`, else `status`. The
 * result stays a well-formed payload, so a receiver refuses it for its signature (401),
 * not for its shape.
 */
export function tamperedPayload(payload: WireObject): WireObject {
  const { output, error } = payload;
  const changed = (old: unknown) => (old === TAMPERED ? `${TAMPERED}!` : TAMPERED);
  if (isWireObject(output)) return { ...payload, output: { ...output, text: changed(output.text) } };
  if (isWireObject(error)) return { ...payload, error: { ...error, message: changed(error.message) } };
  return { ...payload, status: payload.status === 'fail' ? 'success' : 'fail' };
}

/**
 * Sends a delivery with the retries of `options`, once or `twice`; one result per
 * sending, in the order they were started. `onAttempt` is told which sending (1 or 2)
 * each attempt belongs to. Rejects as `sendDelivery` does when `options.signal` aborts.
 */
export async function sendCopies(
  options: SendOptions,
  twice?: Twice,
  onAttempt?: (report: AttemptReport, copy: number) => void,
): Promise<SendResult[]> {
  const copy = (n: number) =>
    sendDelivery(
      onAttempt === undefined ? options : { ...options, onAttempt: (report) => onAttempt(report, n) },
    );
  if (twice === undefined) return [await copy(1)];
  if (twice === 'at-once') return Promise.all([copy(1), copy(2)]);
  return [await copy(1), await copy(2)];
}
