import { DIALECTS, assertDialect, type DialectName } from '../canonical/dialects.js';
import { DEFAULT_MAX_DEPTH, parseDocument, resolveMaxDepth } from '../canonical/parse.js';
import { provablySame, serializeDocument, unrepresentableReason } from '../canonical/serialize.js';
import { assertIntegerMode, documentValue, type IntegerMode } from '../canonical/to-value.js';
import type { ParsedDocument } from '../canonical/tree.js';
import {
  AlgorithmUnsupportedError,
  BodyTooLargeError,
  EventTooOldError,
  PayloadInvalidError,
  SignatureInvalidError,
  SignatureMalformedError,
  SignatureMissingError,
} from '../errors.js';
import { validateEvent, type JobCompletedEvent } from '../event.js';
import { getHeader, type HeadersInput } from './headers.js';

export const DEFAULT_SIGNATURE_HEADER = 'X-Service-Signature';
export const DEFAULT_ALGORITHM_HEADER = 'X-Service-Hash-Algorithm';
export const DEFAULT_MAX_BODY_BYTES = 25 * 1024 * 1024;

/** Options every verifier takes, whatever the crypto backend. */
export interface VerifyOptionsBase {
  /** Dialects to try, in order (default: all four, DESIGN order). Byte-identical candidates are tried once. */
  dialects?: readonly DialectName[];
  /** Signature header name, any case (default `X-Service-Signature`). */
  signatureHeader?: string;
  /** Hash-algorithm header name, any case (default `X-Service-Hash-Algorithm`). When present it must say SHA256. */
  algorithmHeader?: string;
  /** Largest body accepted, in bytes (default 25 MiB). */
  maxBodyBytes?: number;
  /** Reject events whose `finished_at` is older than this many seconds (default: no limit). */
  maxAgeSeconds?: number;
  /** How integers beyond ±(2^53 − 1) appear in the event (default `number`). */
  integers?: IntegerMode;
  /** Nesting limit of the JSON parser (default 1,000). */
  maxDepth?: number;
  /** Clock for `maxAgeSeconds`, in epoch milliseconds (default `Date.now`). */
  now?: () => number;
}

/** What a successful verification returns. */
export interface VerifiedDelivery {
  /** The verified, validated payload. */
  event: JobCompletedEvent;
  /** `event.job_id`. */
  jobId: string;
  /** The dialect whose canonical bytes the signature covers. */
  dialect: DialectName;
  /** Index (in the order given) of the key that verified. */
  keyIndex: number;
  /** Lowercase hex SHA-256 of the canonical bytes (the string that was signed). */
  canonicalSha256: string;
}

export interface ResolvedOptions {
  dialects: DialectName[];
  signatureHeader: string;
  signatureHeaderName: string;
  algorithmHeader: string;
  maxBodyBytes: number;
  maxAgeSeconds: number | undefined;
  integers: IntegerMode;
  maxDepth: number;
  now: () => number;
}

function headerName(value: unknown, what: string, fallback: string): string {
  if (value === undefined) return fallback;
  if (typeof value !== 'string' || !/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(value)) {
    throw new TypeError(`${what} must be an HTTP header name; got ${JSON.stringify(value)}`);
  }
  return value;
}

function positive(value: unknown, what: string, fallback: number | undefined): number | undefined {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !(value > 0) || !Number.isFinite(value)) throw new TypeError(`${what} must be a positive number; got ${String(value)}`);
  return value;
}

export function resolveOptions(options: VerifyOptionsBase): ResolvedOptions {
  const dialects = options.dialects === undefined ? [...DIALECTS] : [...options.dialects].map((d) => assertDialect(d, 'dialects[]'));
  if (dialects.length === 0) throw new TypeError('dialects must name at least one dialect');
  const signatureHeader = headerName(options.signatureHeader, 'signatureHeader', DEFAULT_SIGNATURE_HEADER);
  return {
    dialects,
    signatureHeader: signatureHeader.toLowerCase(),
    signatureHeaderName: signatureHeader,
    algorithmHeader: headerName(options.algorithmHeader, 'algorithmHeader', DEFAULT_ALGORITHM_HEADER).toLowerCase(),
    maxBodyBytes: positive(options.maxBodyBytes, 'maxBodyBytes', DEFAULT_MAX_BODY_BYTES)!,
    maxAgeSeconds: positive(options.maxAgeSeconds, 'maxAgeSeconds', undefined),
    integers: assertIntegerMode(options.integers),
    maxDepth: options.maxDepth === undefined ? DEFAULT_MAX_DEPTH : resolveMaxDepth(options.maxDepth),
    now: options.now ?? Date.now,
  };
}

/** What is known before any crypto runs. */
export interface Prepared {
  doc: ParsedDocument;
  signature: Uint8Array;
  /** Indexes of the keys whose modulus matches the signature length. */
  keyIndexes: number[];
}

const HEX = /^[0-9a-fA-F]+$/;

function utf8Length(s: string): number {
  let n = s.length;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c >= 0x80) n += c < 0x800 || (c >= 0xd800 && c <= 0xdbff) ? 1 : 2;
  }
  return n;
}

/** Checks in DESIGN §4 order up to the crypto: size, JSON, signature header, algorithm, hex and length. */
export function prepare(body: string | Uint8Array, headers: HeadersInput, o: ResolvedOptions, modulusBytes: readonly number[]): Prepared {
  if (typeof body === 'string') {
    if (body.length > o.maxBodyBytes || (body.length * 3 > o.maxBodyBytes && utf8Length(body) > o.maxBodyBytes)) {
      throw new BodyTooLargeError(o.maxBodyBytes);
    }
  } else if (body instanceof Uint8Array) {
    if (body.byteLength > o.maxBodyBytes) throw new BodyTooLargeError(o.maxBodyBytes);
  } else {
    throw new TypeError('body must be the raw request body as a string or Uint8Array (not a parsed object)');
  }
  const doc = parseDocument(body, { maxDepth: o.maxDepth });

  const raw = getHeader(headers, o.signatureHeader);
  if (raw === undefined || raw.trim() === '') {
    throw new SignatureMissingError(`The ${o.signatureHeaderName} header is missing: the request was not signed by the gateway, or a proxy dropped the header.`);
  }
  const algorithm = getHeader(headers, o.algorithmHeader);
  if (algorithm !== undefined) {
    const a = algorithm.trim().toUpperCase();
    if (a !== 'SHA256' && a !== 'SHA-256') throw new AlgorithmUnsupportedError(`The hash algorithm header says ${JSON.stringify(algorithm)}; only SHA256 is supported.`);
  }
  return { doc, ...decodeSignature(raw, modulusBytes, o.signatureHeaderName) };
}

/**
 * Turns the signature header into bytes: hex only (either case; blanks at the ends
 * are not part of an HTTP value), and exactly 2 × the modulus size of at least one key.
 * Returns the signature and the indexes of the keys whose size matches.
 */
export function decodeSignature(raw: string, modulusBytes: readonly number[], headerName = DEFAULT_SIGNATURE_HEADER): { signature: Uint8Array; keyIndexes: number[] } {
  const hex = raw.replace(/^[ \t]+|[ \t]+$/g, '');
  if (!HEX.test(hex)) {
    throw new SignatureMalformedError(
      `The ${headerName} header is not a hex string (it contains ${/\s/.test(hex) ? 'whitespace' : 'non-hex characters'}): was it altered by a proxy, or is it several headers joined?`,
    );
  }
  const keyIndexes: number[] = [];
  for (let k = 0; k < modulusBytes.length; k++) if (modulusBytes[k]! * 2 === hex.length) keyIndexes.push(k);
  if (keyIndexes.length === 0) {
    const want = [...new Set(modulusBytes.map((m) => m * 2))].join(' or ');
    throw new SignatureMalformedError(`The signature has ${hex.length} hex digits but the key's modulus needs ${want}: it was truncated or padded, or signed with another key.`);
  }
  return { signature: hexToBytes(hex), keyIndexes };
}

const HEX_VALUE = new Int8Array(128).fill(-1);
for (let c = 0; c < 16; c++) {
  HEX_VALUE['0123456789abcdef'.charCodeAt(c)] = c;
  HEX_VALUE['0123456789ABCDEF'.charCodeAt(c)] = c;
}

/** Decodes a string already checked to be even-length hex. */
export function hexToBytes(hex: string): Uint8Array {
  const out = new Uint8Array(hex.length >> 1);
  for (let k = 0, i = 0; k < out.length; k++, i += 2) {
    out[k] = (HEX_VALUE[hex.charCodeAt(i)]! << 4) | HEX_VALUE[hex.charCodeAt(i + 1)]!;
  }
  return out;
}

/**
 * Canonical texts to try, in order, skipping dialects that cannot write the document
 * and byte-identical repeats. The parser's flags prove most repeats without
 * serializing them (an invalid signature would otherwise cost four serializations);
 * the rest are compared as text.
 */
export function* candidates(doc: ParsedDocument, dialects: readonly DialectName[]): Generator<{ dialect: DialectName; canonical: string }> {
  const tried: Array<{ dialect: DialectName; canonical: string }> = [];
  for (const dialect of dialects) {
    if (unrepresentableReason(doc, dialect) !== undefined) continue;
    if (tried.some((t) => provablySame(doc, t.dialect, dialect))) continue;
    const canonical = serializeDocument(doc, dialect);
    if (tried.some((t) => t.canonical === canonical)) continue;
    const candidate = { dialect, canonical };
    tried.push(candidate);
    yield candidate;
  }
}

export function noKeyVerifies(o: ResolvedOptions, tried: number): never {
  throw new SignatureInvalidError(
    tried === 0
      ? 'No dialect can represent this body, so it cannot carry a valid signature.'
      : `The signature does not verify with any key under ${tried === 1 ? 'the dialect' : `any of the ${tried} dialects`} tried. If the body was re-serialized before verification (parsed and stringified, pretty-printed by a logger), pass the raw bytes; otherwise check the public key.`,
  );
}

/** After the signature verified: validate the payload, check its age, build the result. */
export function finish(doc: ParsedDocument, o: ResolvedOptions, dialect: DialectName, keyIndex: number, canonicalSha256: string): VerifiedDelivery {
  const event = validateEvent(documentValue(doc, o.integers));
  if (o.maxAgeSeconds !== undefined) {
    const finished = typeof event.finished_at === 'string' ? Date.parse(event.finished_at) : NaN;
    if (Number.isNaN(finished)) throw new PayloadInvalidError('maxAgeSeconds is set but finished_at is missing or not an ISO 8601 date.');
    const age = (o.now() - finished) / 1000;
    if (age > o.maxAgeSeconds) {
      throw new EventTooOldError(`The event finished ${Math.round(age)} s ago, more than maxAgeSeconds (${o.maxAgeSeconds} s): a replay, or a clock out of step.`);
    }
  }
  return { event, jobId: event.job_id, dialect, keyIndex, canonicalSha256 };
}
