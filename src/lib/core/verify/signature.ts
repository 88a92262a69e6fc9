import { utf8ByteLength } from '../canonical/utf8.js';
import {
  AlgorithmUnsupportedError,
  BodyTooLargeError,
  BodyUnavailableError,
  SignatureInvalidError,
  SignatureMalformedError,
  SignatureMissingError,
} from '../../base/errors.js';
import { DEFAULT_SIGNATURE_HEADER } from '../../base/protocol.js';
import { getHeader, type HeadersInput } from './headers.js';
import type { ResolvedOptions } from './options.js';
import { quoted } from '../../base/text.js';

/** The signature, decoded, and the keys whose modulus size it fits. */
export interface SignatureBytes {
  signature: Uint8Array;
  keyIndexes: number[];
}

/**
 * The size of a raw body in bytes (exact up to `limit`). Anything else (a parsed object,
 * a stream) is BODY_UNAVAILABLE: the signature covers the bytes as sent, which a parsed
 * object no longer has.
 */
function bodyBytes(body: unknown, limit: number): number {
  if (typeof body === 'string') {
    // Cheap bounds first: UTF-8 takes 1–3 bytes per UTF-16 unit.
    if (body.length > limit) return body.length;
    return body.length * 3 <= limit ? body.length : utf8ByteLength(body, body.length);
  }
  if (body instanceof Uint8Array) return body.byteLength;
  throw new BodyUnavailableError(
    `The body given is ${body === null ? 'null' : typeof body === 'object' ? `a parsed ${Array.isArray(body) ? 'array' : 'object'}` : `a ${typeof body}`}, not the raw request body: the signature covers the bytes as sent. ` +
      "Pass the raw bytes (a Buffer, Uint8Array or string): in Express, express.raw({ type: 'application/json', limit: '25mb' }) on the route, or " +
      "express.json({ limit: '25mb', verify: keepRawBody }) and req.rawBody; in Fastify, a content-type parser with parseAs: 'buffer' and bodyLimit; with fetch, await request.arrayBuffer().",
  );
}

/** BODY_TOO_LARGE (413) for a body over `maxBodyBytes`; BODY_UNAVAILABLE for anything that is not a raw body. */
export function checkBodySize(body: string | Uint8Array, o: Pick<ResolvedOptions, 'maxBodyBytes'>): void {
  if (bodyBytes(body, o.maxBodyBytes) > o.maxBodyBytes)
    throw refusal(() => new BodyTooLargeError(o.maxBodyBytes));
}

/**
 * Every check of the signature header that needs no crypto (present, algorithm, hex,
 * length for a key: 401). The body is not read here: nobody without the key can make
 * jobhook parse anything, nor wait for a body.
 */
export function readSignature(
  headers: HeadersInput,
  o: ResolvedOptions,
  modulusBytes: readonly number[],
  decodeHex: (hex: string) => Uint8Array = hexToBytes,
): SignatureBytes {
  const raw = getHeader(headers, o.signatureHeader);
  if (raw === undefined || raw.trim() === '') {
    throw refusal(
      () =>
        new SignatureMissingError(
          `The ${o.signatureHeaderName} header is missing: the request was not signed by the gateway, or a proxy dropped the header.`,
        ),
    );
  }
  const algorithm = getHeader(headers, o.algorithmHeader);
  if (algorithm !== undefined) {
    const a = algorithm.trim().toUpperCase();
    if (a !== 'SHA256' && a !== 'SHA-256')
      throw refusal(
        () =>
          new AlgorithmUnsupportedError(
            `The hash algorithm header says ${quoted(algorithm)}; only SHA256 is supported.`,
          ),
      );
  }
  return decodeSignature(raw, modulusBytes, o.signatureHeaderName, decodeHex);
}

const HEX = /^[0-9a-fA-F]*$/;

/**
 * Turns the signature header into bytes: hex only (either case; blanks at the ends
 * are not part of an HTTP value), and exactly 2 × the modulus size of at least one key.
 * `decodeHex` decodes up to the first pair that is not hex, and must never take a
 * character outside ASCII for a digit (Node's Buffer alone would take U+0161 for "a":
 * the node verifier checks for that first).
 */
export function decodeSignature(
  raw: string,
  modulusBytes: readonly number[],
  headerName = DEFAULT_SIGNATURE_HEADER,
  decodeHex: (hex: string) => Uint8Array = hexToBytes,
): SignatureBytes {
  const hex =
    isBlank(raw.charCodeAt(0)) || isBlank(raw.charCodeAt(raw.length - 1))
      ? raw.replace(/^[ \t]+|[ \t]+$/g, '')
      : raw;
  const even = hex.length % 2 === 0;
  const signature = even ? decodeHex(hex) : undefined;
  // All of an even-length string decoded: it is hex. (Odd lengths are only measured.)
  if (signature === undefined ? !HEX.test(hex) : signature.length * 2 !== hex.length) {
    throw refusal(
      () =>
        new SignatureMalformedError(
          `The ${headerName} header is not a hex string (it contains ${/\s/.test(hex) ? 'whitespace' : 'non-hex characters'}): was it altered by a proxy, or is it several headers joined?`,
        ),
    );
  }
  const keyIndexes: number[] = [];
  for (let k = 0; k < modulusBytes.length; k++) if (modulusBytes[k]! * 2 === hex.length) keyIndexes.push(k);
  if (keyIndexes.length === 0) {
    const want = [...new Set(modulusBytes.map((m) => m * 2))].join(' or ');
    throw refusal(
      () =>
        new SignatureMalformedError(
          `The signature has ${hex.length} hex digits but the key's modulus needs ${want}: it was truncated or padded, or signed with another key.`,
        ),
    );
  }
  return { signature: signature!, keyIndexes };
}

function isBlank(c: number): boolean {
  return c === 0x20 || c === 0x09;
}

const HEX_VALUE = new Int8Array(128).fill(-1);
for (let c = 0; c < 16; c++) {
  HEX_VALUE['0123456789abcdef'.charCodeAt(c)] = c;
  HEX_VALUE['0123456789ABCDEF'.charCodeAt(c)] = c;
}

/** Decodes hex up to the first pair that is not hex (as Node's Buffer does); runtime-neutral. */
export function hexToBytes(hex: string): Uint8Array {
  const out = new Uint8Array(hex.length >> 1);
  for (let k = 0, i = 0; k < out.length; k++, i += 2) {
    const hi = HEX_VALUE[hex.charCodeAt(i)] ?? -1;
    const lo = HEX_VALUE[hex.charCodeAt(i + 1)] ?? -1;
    if (hi < 0 || lo < 0) return out.subarray(0, k);
    out[k] = (hi << 4) | lo;
  }
  return out;
}

/** A key that opened the signature, and the hash the signer signed. */
export interface Opened {
  keyIndex: number;
  hash: Uint8Array;
}

/**
 * Makes an error for a request anyone can send, without capturing a stack: a stack
 * points into jobhook and says nothing the code and message do not, and capturing it
 * cost more than half of what refusing a forged request costs otherwise.
 */
export function refusal<E extends Error>(make: () => E): E {
  const limit = Error.stackTraceLimit;
  Error.stackTraceLimit = 0;
  try {
    return make();
  } finally {
    Error.stackTraceLimit = limit;
  }
}

/** SIGNATURE_INVALID when no key opened the signature: a forgery, or a key the receiver does not have. */
export function noKeyOpens(tried: number): SignatureInvalidError {
  return refusal(
    () =>
      new SignatureInvalidError(
        `The signature was not made with ${tried === 1 ? 'the configured key' : `any of the ${tried} configured keys of its size`}: a forged request, or the gateway signs with another key (a rotation? check publicKey).`,
        'unknown-key',
      ),
  );
}
