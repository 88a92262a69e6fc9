import crypto from 'node:crypto';
import { importNodeKey, sha256Hex, sha256OfHex, type NodePublicKeyInput } from '../crypto/node.js';
import type { DialectName } from '../canonical/dialects.js';
import { boundedSink, drive, matching, opening, verification, type Conclude, type OpenedSignature, type Step, type VerifiedDelivery, type ParsedBody } from './core.js';
import type { HeadersInput } from './headers.js';
import { importKeys } from './key-list.js';
import { resolveOptions, type ResolvedOptions, type VerifyOptionsBase } from './options.js';

export interface VerifierOptions extends VerifyOptionsBase {
  /** The gateway's public key, or several during a rotation (valid if any verifies). */
  publicKey: NodePublicKeyInput | readonly NodePublicKeyInput[];
}

export interface Verifier {
  /** Verifies a raw body against its headers; returns the delivery or throws a WebhookError. */
  verify(body: string | Uint8Array, headers: HeadersInput): VerifiedDelivery;
}

/** The verifier with its resolved options, for the receivers built on it. */
export interface NodeVerifierCore extends Verifier {
  readonly options: ResolvedOptions;
  /** The first half, on the headers alone: a signature that opened, or a 401 WebhookError. */
  open(headers: HeadersInput): OpenedSignature;
  /** The second half: the body against a signature `open` returned (`conclude` replaces building the delivery: the worker pool). */
  verifyOpened<T = VerifiedDelivery>(body: string | Uint8Array, signature: OpenedSignature, conclude?: Conclude<T>): T;
}

/**
 * Buffer's hex decoding, for ASCII only: Buffer reads a character by its low byte (it
 * would decode "š", U+0161, as "a"), so anything else decodes to nothing (malformed).
 */
const decodeHex = (hex: string): Uint8Array => (Buffer.byteLength(hex, 'utf8') === hex.length ? Buffer.from(hex, 'hex') : new Uint8Array(0));

/** Lowercase hex SHA-256 of a canonical form, streamed: the text is never held whole. */
function hashCanonical(body: ParsedBody, dialect: DialectName, limit: number): string {
  let hex: string | undefined;
  let hash: crypto.Hash | undefined;
  body.write(
    dialect,
    boundedSink(limit, (chunk, last) => {
      // Most bodies are one chunk: a one-shot hash, no Hash object, no copy.
      if (last && hash === undefined) hex = sha256Hex(chunk);
      else {
        (hash ??= crypto.createHash('sha256')).update(chunk);
        if (last) hex = hash.digest('hex');
      }
    }),
  );
  return hex!;
}

export function createNodeVerifier(options: VerifierOptions): NodeVerifierCore {
  if (typeof options !== 'object' || options === null) throw new TypeError('options must be an object with a publicKey');
  const keys = importKeys(options.publicKey, importNodeKey);
  const modulusBytes = keys.map((k) => k.modulusBytes);
  const o = resolveOptions(options);
  const perform = (step: Step): unknown => {
    switch (step.op) {
      case 'open':
        return keys[step.keyIndex]!.open(step.signature);
      case 'digest':
        return hashCanonical(step.body, step.dialect, o.maxCanonicalBytes);
      case 'hashOfDigest':
        return sha256OfHex(step.digest);
    }
  };
  return {
    options: o,
    verify: (body, headers) => drive(verification(body, headers, o, modulusBytes, decodeHex), perform),
    open: (headers) => drive(opening(headers, o, modulusBytes, decodeHex), perform),
    verifyOpened: (body, signature, conclude) => drive(matching(body, signature, o, conclude), perform),
  };
}
