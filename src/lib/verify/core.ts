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
import type { DocumentFlags } from '../canonical/tree.js';
import { CanonicalTooLargeError, EventTooOldError, PayloadInvalidError, SignatureInvalidError } from '../errors.js';
import { validateEvent, type JobCompletedEvent, type JsonObjectValue } from '../event.js';
import type { ResolvedOptions } from './options.js';
import type { Opened } from './signature.js';

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

/** A parsed body, whichever engine parsed it. */
export interface ParsedBody {
  readonly flags: DocumentFlags;
  /** Streams the canonical form of `dialect`. */
  write(dialect: DialectName, sink: (chunk: CanonicalChunk) => void): void;
  /** The value of the canonical text of `dialect` (see documentValue). */
  value(integers: IntegerMode, dialect: DialectName): JsonValue;
  /** Frees engine memory. */
  dispose(): void;
}

function bodySize(body: string | Uint8Array): number {
  return typeof body === 'string' ? body.length : body.byteLength;
}

/**
 * Parses the body (BODY_MALFORMED with the byte offset) and refuses, before building
 * anything, a canonical form larger than `maxCanonicalBytes` (CANONICAL_TOO_LARGE).
 */
export function parseBody(body: string | Uint8Array, o: ResolvedOptions): ParsedBody {
  const doc = parseDocument(body, { maxDepth: o.maxDepth });
  if (bodySize(body) + doc.layoutBytes > o.maxCanonicalBytes) throw new CanonicalTooLargeError(o.maxCanonicalBytes);
  return {
    flags: doc,
    write: (dialect, sink) => writeDocument(doc, dialect, sink),
    value: (integers, dialect) => documentValue(doc, integers, dialect),
    dispose: () => undefined,
  };
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
export function boundedSink(limit: number, sink: (chunk: CanonicalChunk) => void): (chunk: CanonicalChunk) => void {
  let size = 0;
  return (chunk) => {
    size += typeof chunk === 'string' ? chunk.length : chunk.byteLength;
    if (size > limit) throw new CanonicalTooLargeError(limit);
    sink(chunk);
  };
}

/** The opened key whose hash equals `hash`, if any. */
export function matchOpened(opened: readonly Opened[], hash: Uint8Array, equal: (a: Uint8Array, b: Uint8Array) => boolean): Opened | undefined {
  return opened.find((o) => equal(o.hash, hash));
}

/** SIGNATURE_INVALID when a key opened the signature but no dialect's canonical form hashes to what it signed. */
export function noDialectMatches(body: ParsedBody, o: ResolvedOptions, opened: readonly Opened[], tried: number): SignatureInvalidError {
  const key = `Key ${opened[0]!.keyIndex} opens the signature (it is the gateway's)`;
  if (tried === 0) {
    const reasons = o.dialects.map((d) => unrepresentableReason(body.flags, d)).filter((r) => r !== undefined);
    return new SignatureInvalidError(`${key}, but no dialect tried can write this body (${reasons[0]}), so it is not what was signed.`);
  }
  return new SignatureInvalidError(
    `${key}, but the hash it carries matches the canonical form of this body in no dialect tried: the body was changed after signing, or re-serialized before verification (pass the raw bytes).`,
  );
}

/** After a dialect matched: validate the payload, check its age, build the result. */
export function finish(body: ParsedBody, o: ResolvedOptions, dialect: DialectName, keyIndex: number, canonicalSha256: string): VerifiedDelivery {
  const event = validateEvent(body.value(o.integers, dialect));
  if (o.maxAgeSeconds !== undefined) {
    const finished = typeof event.finished_at === 'string' ? Date.parse(event.finished_at) : NaN;
    if (Number.isNaN(finished)) throw new PayloadInvalidError('The replay window (maxAgeSeconds) needs finished_at, but it is missing or not an ISO 8601 date.');
    const age = (o.now() - finished) / 1000;
    if (age > o.maxAgeSeconds) {
      throw new EventTooOldError(`The event finished ${Math.round(age)} s ago, more than maxAgeSeconds (${o.maxAgeSeconds} s): a replay, or a clock out of step.`);
    }
  }
  return { event, payload: event as unknown as JsonObjectValue, jobId: event.job_id, dialect, keyIndex, canonicalSha256 };
}
