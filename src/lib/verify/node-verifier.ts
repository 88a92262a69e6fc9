import crypto from 'node:crypto';
import { importNodeKey, sha256Hex, sha256OfHex, type NodePublicKeyInput } from '../crypto/node.js';
import { boundedSink, candidateDialects, finish, matchOpened, noDialectMatches, parseBody, type CanonicalChunk, type ParsedBody, type VerifiedDelivery } from './core.js';
import type { HeadersInput } from './headers.js';
import { importKeys } from './key-list.js';
import { resolveOptions, type ResolvedOptions, type VerifyOptionsBase } from './options.js';
import { noKeyOpens, readSignature, type Opened } from './signature.js';

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
}

const decodeHex = (hex: string): Uint8Array => Buffer.from(hex, 'hex');
const equal = (a: Uint8Array, b: Uint8Array): boolean => a.length === b.length && crypto.timingSafeEqual(a, b);

/** Lowercase hex SHA-256 of a canonical form, streamed: the text is never held whole. */
function hashCanonical(body: ParsedBody, dialect: Parameters<ParsedBody['write']>[0], limit: number): string {
  let first: CanonicalChunk | undefined;
  let hash: crypto.Hash | undefined;
  body.write(
    dialect,
    boundedSink(limit, (chunk) => {
      if (hash !== undefined) hash.update(chunk);
      else if (first === undefined) first = chunk;
      else {
        hash = crypto.createHash('sha256').update(first).update(chunk);
        first = undefined;
      }
    }),
  );
  // Most bodies are one chunk: a one-shot hash saves creating a Hash object.
  return hash !== undefined ? hash.digest('hex') : sha256Hex(first ?? '');
}

export function createNodeVerifier(options: VerifierOptions): NodeVerifierCore {
  if (typeof options !== 'object' || options === null) throw new TypeError('options must be an object with a publicKey');
  const keys = importKeys(options.publicKey, importNodeKey);
  const modulusBytes = keys.map((k) => k.modulusBytes);
  const o = resolveOptions(options);
  return {
    options: o,
    verify(body, headers) {
      const { signature, keyIndexes } = readSignature(body, headers, o, modulusBytes, decodeHex);
      const opened: Opened[] = [];
      for (const k of keyIndexes) {
        const hash = keys[k]!.open(signature);
        if (hash !== undefined) opened.push({ keyIndex: k, hash });
      }
      if (opened.length === 0) throw noKeyOpens(keyIndexes.length);
      const parsed = parseBody(body, o);
      try {
        const digests: string[] = [];
        for (const dialect of candidateDialects(parsed.flags, o.dialects)) {
          const digest = hashCanonical(parsed, dialect, o.maxCanonicalBytes);
          if (digests.includes(digest)) continue;
          digests.push(digest);
          const match = matchOpened(opened, sha256OfHex(digest), equal);
          if (match !== undefined) return finish(parsed, o, dialect, match.keyIndex, digest);
        }
        throw noDialectMatches(parsed, o, opened, digests.length);
      } finally {
        parsed.dispose();
      }
    },
  };
}
