/**
 * Content-Encoding decoding for every adapter, in one place: gzip, deflate and br, bounded
 * by `maxBodyBytes` after decoding (a zip bomb is 413 as soon as it passes it), never on
 * the calling thread in one piece. Node's zlib streams for Node requests; bytes in hand
 * through zlib's asynchronous functions (the thread pool); Fetch bodies through the
 * runtime's DecompressionStream. No node: import here (jobhook/web uses it): the Node
 * adapters hand node:zlib in, loaded by the first compressed delivery.
 */
import type * as Zlib from 'node:zlib';
import { BodyMalformedError, BodyTooLargeError, EncodingUnsupportedError } from '../base/errors.js';
import type { ContentCoding } from '../receive/body.js';

type Coding = Exclude<ContentCoding, 'identity'>;

/** node:zlib as a loader gives it: `import()` in the Node entries, `process.getBuiltinModule` where no bundler may see a node: import. */
export type ZlibModule = typeof Zlib;

/** The error for a body that is not valid data of its coding. */
export const notDecodable = (coding: Coding) => new BodyMalformedError(`the body is not valid ${coding} data (Content-Encoding: ${coding})`, 0);

/** A Node decoding stream for `coding`. */
export function nodeDecoder(zlib: ZlibModule, coding: Coding): Zlib.Gunzip | Zlib.Inflate | Zlib.BrotliDecompress {
  return coding === 'gzip' ? zlib.createGunzip() : coding === 'deflate' ? zlib.createInflate() : zlib.createBrotliDecompress();
}

/**
 * Bytes in hand, decoded on zlib's thread pool (not the calling thread), at most `limit`
 * bytes out: 413 past it, 400 for data that is not of its coding.
 */
export async function decodeBytes(zlib: ZlibModule, body: string | Uint8Array, coding: Coding, limit: number): Promise<Uint8Array> {
  if (typeof body === 'string') throw new BodyMalformedError(`a ${coding}-encoded body must be passed as bytes, not text`, 0);
  const bound = { maxOutputLength: limit };
  return new Promise((resolve, reject) => {
    const done = (err: Error | null, out: Uint8Array) => {
      if (err === null) resolve(out);
      else reject((err as { code?: string }).code === 'ERR_BUFFER_TOO_LARGE' ? new BodyTooLargeError(limit) : notDecodable(coding));
    };
    if (coding === 'gzip') zlib.gunzip(body, bound, done);
    else if (coding === 'deflate') zlib.inflate(body, bound, done);
    else zlib.brotliDecompress(body, bound, done);
  });
}

/**
 * The names runtimes give each coding's DecompressionStream: Bun and Deno call brotli
 * 'brotli' (and refuse 'br'); 'br' is tried too, for a runtime that takes the header's name.
 * Node 20 and workerd know neither: br is 415 there.
 */
const FORMATS: Record<Coding, readonly string[]> = { gzip: ['gzip'], deflate: ['deflate'], br: ['brotli', 'br'] };

/** A Fetch body stream decoded per `coding` (415 where the runtime has no decoder for it). */
export function webDecoded(stream: ReadableStream<Uint8Array>, coding: Coding): ReadableStream<Uint8Array> {
  let decoder: DecompressionStream | undefined;
  for (const format of FORMATS[coding]) {
    try {
      decoder = new DecompressionStream(format as CompressionFormat);
      break;
    } catch {
      // Not a name this runtime knows: try the next.
    }
  }
  if (decoder === undefined) {
    throw new EncodingUnsupportedError(`Content-Encoding ${coding} cannot be decoded in this runtime; send the body as is, or gzip or deflate.`);
  }
  return stream.pipeThrough(decoder as unknown as TransformStream<Uint8Array, Uint8Array>);
}
