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
export const notDecodable = (coding: Coding) =>
  new BodyMalformedError(`the body is not valid ${coding} data (Content-Encoding: ${coding})`, 0);

/** A Node decoding stream for `coding`. */
export function nodeDecoder(
  zlib: ZlibModule,
  coding: Coding,
): Zlib.Gunzip | Zlib.Inflate | Zlib.BrotliDecompress {
  return coding === 'gzip'
    ? zlib.createGunzip()
    : coding === 'deflate'
      ? zlib.createInflate()
      : zlib.createBrotliDecompress();
}

/**
 * Bytes in hand, decoded on zlib's thread pool (not the calling thread), at most `limit`
 * bytes out: 413 past it, 400 for data that is not of its coding.
 */
export async function decodeBytes(
  zlib: ZlibModule,
  body: string | Uint8Array,
  coding: Coding,
  limit: number,
): Promise<Uint8Array> {
  if (typeof body === 'string')
    throw new BodyMalformedError(`a ${coding}-encoded body must be passed as bytes, not text`, 0);
  const bound = { maxOutputLength: limit };
  return new Promise((resolve, reject) => {
    const done = (err: Error | null, out: Uint8Array) => {
      if (err === null) resolve(out);
      else
        reject(
          (err as { code?: string }).code === 'ERR_BUFFER_TOO_LARGE'
            ? new BodyTooLargeError(limit)
            : notDecodable(coding),
        );
    };
    if (coding === 'gzip') zlib.gunzip(body, bound, done);
    else if (coding === 'deflate') zlib.inflate(body, bound, done);
    else zlib.brotliDecompress(body, bound, done);
  });
}

/**
 * The names runtimes give each coding's DecompressionStream: Bun and Deno call brotli
 * 'brotli' (and refuse 'br'); 'br' is tried too, for a runtime that takes the header's name.
 * Node 20 and workerd know neither.
 */
const FORMATS: Record<Coding, readonly string[]> = {
  gzip: ['gzip'],
  deflate: ['deflate'],
  br: ['brotli', 'br'],
};

/** The runtime's DecompressionStream for `coding`, if it has one. */
function decompressionStream(coding: Coding): TransformStream<Uint8Array, Uint8Array> | undefined {
  for (const format of FORMATS[coding]) {
    try {
      return new DecompressionStream(format as CompressionFormat) as unknown as TransformStream<
        Uint8Array,
        Uint8Array
      >;
    } catch {
      // Not a name this runtime knows: try the next.
    }
  }
  return undefined;
}

/**
 * node:zlib where the runtime hands it out without an import a bundler would see
 * (`process.getBuiltinModule`: Node ≥ 20.16, Bun, Deno), else undefined.
 */
function builtinZlib(): ZlibModule | undefined {
  const p = (globalThis as { process?: { getBuiltinModule?: (id: string) => unknown } }).process;
  try {
    const zlib = p?.getBuiltinModule?.call(p, 'node:zlib') as ZlibModule | undefined;
    return typeof zlib?.createBrotliDecompress === 'function' ? zlib : undefined;
  } catch {
    return undefined;
  }
}

/**
 * A Node decoding stream as a web TransformStream: each chunk written, its output passed
 * on as it comes, stopped (413) as soon as the output passes `limit` (a small bomb would
 * otherwise decode whole before anyone counts).
 */
function zlibTransform(
  zlib: ZlibModule,
  coding: Coding,
  limit: number,
): TransformStream<Uint8Array, Uint8Array> {
  const decoder = nodeDecoder(zlib, coding);
  let size = 0;
  return new TransformStream<Uint8Array, Uint8Array>({
    start(controller) {
      decoder.on('data', (chunk: Uint8Array) => {
        size += chunk.byteLength;
        if (size > limit) decoder.destroy(new BodyTooLargeError(limit));
        else controller.enqueue(chunk);
      });
      decoder.on('error', (err) => controller.error(err));
    },
    transform: (chunk) =>
      new Promise<void>(
        (resolve, reject) => void decoder.write(chunk, (err) => (err ? reject(err) : resolve())),
      ),
    flush: () =>
      new Promise<void>((resolve, reject) => {
        decoder.once('end', resolve);
        decoder.once('error', reject);
        decoder.end();
      }),
  });
}

/**
 * A Fetch body stream decoded per `coding`: the runtime's DecompressionStream, else
 * node:zlib where the runtime has it (br on Node through jobhook/web), else 415.
 */
export function webDecoded(
  stream: ReadableStream<Uint8Array>,
  coding: Coding,
  limit: number,
): ReadableStream<Uint8Array> {
  const zlib = builtinZlib();
  const decoder =
    decompressionStream(coding) ?? (zlib === undefined ? undefined : zlibTransform(zlib, coding, limit));
  if (decoder === undefined) {
    throw new EncodingUnsupportedError(
      `Content-Encoding ${coding} cannot be decoded in this runtime; send the body as is, or gzip or deflate.`,
    );
  }
  return stream.pipeThrough(decoder);
}
