/**
 * The steps every verifier shares once the signature has opened: parse the body,
 * bound the canonical work, pick the dialects worth hashing, stream each canonical
 * form, and build the result from what verified. Runtime-neutral; the node and web
 * verifiers differ only in how they open signatures and hash.
 */
import type { DialectName } from '../canonical/dialects.js';
import { parseDocument } from '../canonical/parse.js';
import { provablySame, unrepresentableReason, writeDocument } from '../canonical/serialize.js';
import { documentValue, type IntegerMode, type JsonValue } from '../canonical/to-value.js';
import type { WasmDocument } from '../canonical/wasm/engine.js';
import { wasmEngine } from '../canonical/wasm/lazy.js';
import type { DocumentFlags, ParsedDocument } from '../canonical/tree.js';
import {
  CanonicalTooLargeError,
  EventFromFutureError,
  EventTooOldError,
  PayloadInvalidError,
  SignatureInvalidError,
} from '../../base/errors.js';
import { parseRfc3339, validateEvent, type JobCompletedEvent, type JsonObjectValue } from '../event.js';
import { constantTimeEqual } from '../crypto/pkcs1.js';
import type { HeadersInput } from './headers.js';
import type { ResolvedOptions } from './options.js';
import { checkBodySize, noKeyOpens, readSignature, type Opened } from './signature.js';
import { cut, escapeControls } from '../../base/text.js';

/** What a successful verification returns. */
export interface VerifiedDelivery {
  /** The verified payload, typed: narrow on `status` before reading `output` or `error`. */
  event: JobCompletedEvent;
  /** The same object as a plain JSON object, to reach fields the gateway added after this version. */
  payload: JsonObjectValue;
  /** `event.job_id`. */
  jobId: string;
  /** The dialect whose canonical bytes the signature covers. */
  dialect: DialectName;
  /** Index (in the order given) of the key that verified. */
  keyIndex: number;
  /** Lowercase hex SHA-256 of the canonical bytes (the string that was signed). */
  canonicalSha256: string;
}

/** A chunk of canonical text: a string (JS engine) or UTF-8 bytes. */
export type CanonicalChunk = string | Uint8Array;

/** Where canonical chunks go; `last` marks the final one (a one-chunk text can be hashed without a copy). */
export type CanonicalSink = (chunk: CanonicalChunk, last: boolean) => void;

/** A parsed body, whichever engine parsed it. */
export interface ParsedBody {
  readonly flags: DocumentFlags;
  /** Streams the canonical form of `dialect`. */
  write(dialect: DialectName, sink: CanonicalSink): void;
  /** The value of the canonical text of `dialect` (see documentValue). */
  value(integers: IntegerMode, dialect: DialectName): JsonValue;
  /** Frees engine memory. */
  dispose(): void;
}

function bodySize(body: string | Uint8Array): number {
  return typeof body === 'string' ? body.length : body.byteLength;
}

const decoder = new TextDecoder();

/**
 * Parses the body (BODY_MALFORMED with the byte offset) and refuses, before building
 * anything, a canonical form larger than `maxCanonicalBytes` (CANONICAL_TOO_LARGE).
 * The WebAssembly engine parses and writes where it loads; the JS engine elsewhere
 * (both give the same bytes, flags and errors: test/core/canonical/differential.test.ts).
 */
export function parseBody(body: string | Uint8Array, o: ResolvedOptions): ParsedBody {
  const wasm = wasmEngine();
  if (wasm === undefined) {
    const doc = parseDocument(body, { maxDepth: o.maxDepth });
    if (bodySize(body) + doc.layoutBytes > o.maxCanonicalBytes)
      throw new CanonicalTooLargeError(o.maxCanonicalBytes);
    return new JsBody(doc);
  }
  const doc = wasm.parse(body, { maxDepth: o.maxDepth });
  if (bodySize(body) + doc.flags.layoutBytes > o.maxCanonicalBytes) {
    doc.dispose();
    throw new CanonicalTooLargeError(o.maxCanonicalBytes);
  }
  return new WasmBody(doc, body, o.maxDepth);
}

/** A body parsed by the JS engine into its tree. */
class JsBody implements ParsedBody {
  constructor(readonly doc: ParsedDocument) {}
  get flags(): DocumentFlags {
    return this.doc;
  }
  write(dialect: DialectName, sink: CanonicalSink): void {
    writeDocument(this.doc, dialect, sink);
  }
  value(integers: IntegerMode, dialect: DialectName): JsonValue {
    return documentValue(this.doc, integers, dialect);
  }
  dispose(): void {}
}

/** A body parsed by the WebAssembly engine (its memory freed by dispose). */
class WasmBody implements ParsedBody {
  constructor(
    readonly doc: WasmDocument,
    readonly body: string | Uint8Array,
    readonly maxDepth: number,
  ) {}
  get flags(): DocumentFlags {
    return this.doc.flags;
  }
  write(dialect: DialectName, sink: CanonicalSink): void {
    this.doc.write(dialect, sink);
  }
  value(integers: IntegerMode, dialect: DialectName): JsonValue {
    // Native JSON.parse gives the canonical value unless an integer needs the tree (see
    // documentValue); then the JS engine parses again (rare: -0, big integers in exact modes).
    const { flags } = this.doc;
    if (!flags.negativeZero && (integers === 'number' || !flags.unsafeInteger)) {
      return JSON.parse(typeof this.body === 'string' ? this.body : decoder.decode(this.body)) as JsonValue;
    }
    return documentValue(parseDocument(this.body, { maxDepth: this.maxDepth }), integers, dialect);
  }
  dispose(): void {
    this.doc.dispose();
  }
}

/**
 * The dialects worth hashing, in order: those that can write the document, minus
 * those the flags prove byte-identical to an earlier one. Repeats the flags cannot
 * rule out are caught by comparing digests.
 */
export function candidateDialects(flags: DocumentFlags, dialects: readonly DialectName[]): DialectName[] {
  const out: DialectName[] = [];
  for (const d of dialects) {
    if (unrepresentableReason(flags, d) !== undefined) continue;
    if (out.some((t) => provablySame(flags, t, d))) continue;
    out.push(d);
  }
  return out;
}

/** Counts what passes to `sink` and stops past `limit` (the estimate can undercount escapes). */
export function boundedSink(limit: number, sink: CanonicalSink): CanonicalSink {
  let size = 0;
  return (chunk, last) => {
    size += typeof chunk === 'string' ? chunk.length : chunk.byteLength;
    if (size > limit) throw new CanonicalTooLargeError(limit);
    sink(chunk, last);
  };
}

/**
 * The steps of a verification that differ by runtime, performed by the verifier's
 * backend: open the signature with a key (→ the signed hash, or undefined), hash a
 * dialect's canonical form (→ lowercase hex), hash such a hex digest (→ bytes).
 */
export type Step =
  | { op: 'open'; keyIndex: number; signature: Uint8Array }
  | { op: 'digest'; body: ParsedBody; dialect: DialectName }
  | { op: 'hashOfDigest'; digest: string };

/** Concludes a verification from the parsed body and what matched (default: the delivery). */
export type Conclude<T> = (parsed: ParsedBody, dialect: DialectName, keyIndex: number, digest: string) => T;

/**
 * A signature that opened with at least one key, from `opening`: what the keys say was
 * signed. The body has not been read yet; `matching` compares it.
 */
export interface OpenedSignature {
  readonly opened: readonly Opened[];
  /** Its key among the signatures in flight and known (receive/guard.ts `digestKey`), made once. */
  key?: string;
}

/**
 * The first half of a verification, on the headers alone: the signature header's
 * checks, then one opening per key of the signature's size. No key opens it:
 * SIGNATURE_INVALID, and the body need not even be read.
 */
export function* opening(
  headers: HeadersInput,
  o: ResolvedOptions,
  modulusBytes: readonly number[],
  decodeHex?: (hex: string) => Uint8Array,
): Generator<Step, OpenedSignature, unknown> {
  const { signature, keyIndexes } = readSignature(headers, o, modulusBytes, decodeHex);
  const opened: Opened[] = [];
  for (const keyIndex of keyIndexes) {
    const hash = (yield { op: 'open', keyIndex, signature }) as Uint8Array | undefined;
    if (hash !== undefined) opened.push({ keyIndex, hash });
  }
  if (opened.length === 0) throw noKeyOpens(keyIndexes.length);
  return { opened };
}

/**
 * The second half, once a key opened the signature: the body (413 over the limit),
 * parsed, the dialects worth hashing, and the result from the first whose canonical
 * hash the signature carries.
 */
export function* matching<T = VerifiedDelivery>(
  body: string | Uint8Array,
  signature: OpenedSignature,
  o: ResolvedOptions,
  conclude: Conclude<T> = (p, d, k, h) => finish(p, o, d, k, h) as T,
  given?: ParsedBody,
): Generator<Step, T, unknown> {
  const { opened } = signature;
  // `given`: the body parsed already (by the cost estimate of the worker pool), disposed here as ours would be.
  let parsed = given;
  try {
    checkBodySize(body, o);
    parsed ??= parseBody(body, o);
    const digests: string[] = [];
    for (const dialect of candidateDialects(parsed.flags, o.dialects)) {
      const digest = (yield { op: 'digest', body: parsed, dialect }) as string;
      if (digests.includes(digest)) continue;
      digests.push(digest);
      const signed = (yield { op: 'hashOfDigest', digest }) as Uint8Array;
      const match = opened.find((k) => constantTimeEqual(k.hash, signed));
      if (match !== undefined) return conclude(parsed, dialect, match.keyIndex, digest);
    }
    throw noDialectMatches(parsed, o, opened, digests.length);
  } finally {
    parsed?.dispose();
  }
}

/**
 * The whole verification as one flow, whatever the runtime: it yields the steps its
 * backend performs (synchronously on Node, with promises on WebCrypto). The body's
 * size (413), then `opening` (401 without parsing anything), then `matching`.
 */
export function* verification<T = VerifiedDelivery>(
  body: string | Uint8Array,
  headers: HeadersInput,
  o: ResolvedOptions,
  modulusBytes: readonly number[],
  decodeHex?: (hex: string) => Uint8Array,
  conclude?: Conclude<T>,
): Generator<Step, T, unknown> {
  checkBodySize(body, o);
  const signature = yield* opening(headers, o, modulusBytes, decodeHex);
  return yield* matching(body, signature, o, conclude);
}

/** Runs `flow`, performing each step synchronously. */
export function drive<T>(flow: Generator<Step, T, unknown>, perform: (step: Step) => unknown): T {
  let r = flow.next();
  while (!r.done) {
    let result: unknown;
    try {
      result = perform(r.value);
    } catch (err) {
      r = flow.throw(err);
      continue;
    }
    r = flow.next(result);
  }
  return r.value;
}

/** Runs `flow`, awaiting each step. */
export async function driveAsync<T>(
  flow: Generator<Step, T, unknown>,
  perform: (step: Step) => unknown,
): Promise<T> {
  let r = flow.next();
  while (!r.done) {
    let result: unknown;
    try {
      result = await perform(r.value);
    } catch (err) {
      r = flow.throw(err);
      continue;
    }
    r = flow.next(result);
  }
  return r.value;
}

/** SIGNATURE_INVALID when a key opened the signature but no dialect's canonical form hashes to what it signed. */
export function noDialectMatches(
  body: ParsedBody,
  o: ResolvedOptions,
  opened: readonly Opened[],
  tried: number,
): SignatureInvalidError {
  const key = `Key ${opened[0]!.keyIndex} opens the signature (it is the gateway's)`;
  if (tried === 0) {
    const reasons = o.dialects
      .map((d) => unrepresentableReason(body.flags, d))
      .filter((r) => r !== undefined);
    return new SignatureInvalidError(
      `${key}, but no dialect tried can write this body (${reasons[0]}), so it is not what was signed.`,
      'body-changed',
    );
  }
  return new SignatureInvalidError(
    `${key}, but the hash it carries matches the canonical form of this body in no dialect tried: the body was changed after signing, or re-serialized before verification (pass the raw bytes).`,
    'body-changed',
  );
}

/** After a dialect matched: build the value of what was signed, then the result. */
export function finish(
  body: ParsedBody,
  o: ResolvedOptions,
  dialect: DialectName,
  keyIndex: number,
  canonicalSha256: string,
): VerifiedDelivery {
  return deliveryFrom(body.value(o.integers, dialect), o, dialect, keyIndex, canonicalSha256);
}

/**
 * The result from the verified value: validate the payload, and with the replay window
 * on, its times (RFC 3339; `finished_at` required, neither too old nor too far ahead).
 */
export function deliveryFrom(
  value: JsonValue,
  o: ResolvedOptions,
  dialect: DialectName,
  keyIndex: number,
  canonicalSha256: string,
): VerifiedDelivery {
  const event = validateEvent(value);
  if (o.maxAgeSeconds !== undefined) {
    const finished = parseRfc3339(event.finished_at);
    if (finished === undefined) {
      throw new PayloadInvalidError(
        `The replay window (maxAgeSeconds) needs finished_at as an RFC 3339 date-time (such as 2026-11-21T10:00:05Z); got ${event.finished_at === undefined ? 'none' : escapeControls(cut(JSON.stringify(event.finished_at), 60))}.`,
      );
    }
    if (event.created_at !== undefined && parseRfc3339(event.created_at) === undefined) {
      throw new PayloadInvalidError(
        `created_at is not an RFC 3339 date-time: ${escapeControls(cut(JSON.stringify(event.created_at), 60))}.`,
      );
    }
    const age = (o.now() - finished) / 1000;
    if (age > o.maxAgeSeconds) {
      throw new EventTooOldError(
        `The event finished ${Math.round(age)} s ago, more than maxAgeSeconds (${o.maxAgeSeconds} s): a replay, or a clock out of step.`,
      );
    }
    if (-age > o.maxFutureSkewSeconds) {
      throw new EventFromFutureError(
        `The event says it finished ${Math.round(-age)} s from now, more than maxFutureSkewSeconds (${o.maxFutureSkewSeconds} s): the sender's clock (or this one) is off, or the event was made up.`,
      );
    }
  }
  return {
    event,
    payload: event as unknown as JsonObjectValue,
    jobId: event.job_id,
    dialect,
    keyIndex,
    canonicalSha256,
  };
}
