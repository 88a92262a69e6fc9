/**
 * A captured body as a receiver reads it: a body its Content-Encoding says is gzip,
 * deflate or br is decoded first, as jobhook's receivers decode it, never past
 * `maxBodyBytes`. Captures that keep the body already decoded under the original header
 * (HAR files from mitmproxy and devtools, loggers) are left as they are: JSON text is
 * never valid data of these codings, so a decoding that fails on a body that starts as
 * JSON does means the tool decoded it.
 */
import { brotliDecompressSync, gunzipSync, inflateSync, type ZlibOptions } from 'node:zlib';
import type { Capture } from './captures.js';
import { UsageError } from './io.js';

const DECODERS: Record<string, (body: Uint8Array, options: ZlibOptions) => Buffer> = {
  gzip: gunzipSync,
  'x-gzip': gunzipSync,
  deflate: inflateSync,
  br: brotliDecompressSync,
};

function headerValue(headers: Record<string, string>, name: string): string | undefined {
  const key = Object.keys(headers).find((k) => k.toLowerCase() === name);
  return key === undefined ? undefined : headers[key];
}

/** The first byte that is not JSON whitespace opens an object or an array. */
function startsAsJson(body: Uint8Array): boolean {
  for (const b of body) {
    if (b === 0x20 || b === 0x09 || b === 0x0a || b === 0x0d) continue;
    return b === 0x7b || b === 0x5b;
  }
  return false;
}

function where(c: Capture): string {
  return c.index === 0 ? c.source : `${c.source} (delivery ${c.index + 1})`;
}

/** `c` with its body decoded as its Content-Encoding says (codings applied last first), at most `maxBodyBytes`. */
export function decodedCapture(c: Capture, maxBodyBytes: number): Capture {
  const value = headerValue(c.headers, 'content-encoding');
  if (value === undefined) return c;
  const codings = value
    .split(',')
    .map((s) => s.trim().toLowerCase())
    .filter((s) => s !== '' && s !== 'identity');
  if (codings.length === 0) return c;
  let body = c.body;
  for (const coding of codings.reverse()) {
    const decode = DECODERS[coding];
    if (decode === undefined)
      throw new UsageError(
        `${where(c)}: Content-Encoding ${JSON.stringify(value)}: ${coding} is not one jobhook reads (gzip, deflate, br)`,
      );
    try {
      body = new Uint8Array(decode(body, { maxOutputLength: maxBodyBytes }));
    } catch (err) {
      if ((err as { code?: string }).code === 'ERR_BUFFER_TOO_LARGE') {
        throw new UsageError(
          `${where(c)}: the body is larger than maxBodyBytes (${maxBodyBytes} bytes) once decoded (Content-Encoding: ${value}), which the verifier refuses; --max-body-bytes raises the limit`,
        );
      }
      if (body === c.body && startsAsJson(body)) return c; // kept decoded by the tool that captured it
      throw new UsageError(`${where(c)}: the body is not valid ${coding} data, as its Content-Encoding says`);
    }
  }
  return { ...c, body };
}
