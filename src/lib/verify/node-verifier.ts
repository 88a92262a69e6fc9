import crypto from 'node:crypto';
import { importNodeKey, sha256Hex, sha256OfHex, type NodePublicKeyInput } from '../crypto/node.js';
import type { DialectName } from '../canonical/dialects.js';
import { boundedSink, drive, verification, type ParsedBody, type Step, type VerifiedDelivery } from './core.js';
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
  /** Verifies, and concludes with `conclude` instead of building the delivery (the worker pool). */
  verifyWith<T>(body: string | Uint8Array, headers: HeadersInput, conclude: (parsed: ParsedBody, dialect: DialectName, keyIndex: number, digest: string) => T): T;
}

const decodeHex = (hex: string): Uint8Array => Buffer.from(hex, 'hex');

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
    verifyWith: (body, headers, conclude) => drive(verification(body, headers, o, modulusBytes, decodeHex, conclude), perform),
  };
}
