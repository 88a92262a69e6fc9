import { prepareWebKey, sha256HexWeb, sha256OfHexWeb, type WebPublicKeyInput } from '../crypto/web.js';
import type { DialectName } from '../canonical/dialects.js';
import { concatBytes } from '../bytes.js';
import { boundedSink, driveAsync, matching, opening, verification, type CanonicalChunk, type OpenedSignature, type ParsedBody, type Step, type VerifiedDelivery } from './core.js';
import type { HeadersInput } from './headers.js';
import { importKeys } from './key-list.js';
import { resolveOptions, type ResolvedOptions, type VerifyOptionsBase } from './options.js';

export interface WebVerifierOptions extends VerifyOptionsBase {
  /** The gateway's public key, or several during a rotation (valid if any verifies). */
  publicKey: WebPublicKeyInput | readonly WebPublicKeyInput[];
}

export interface WebVerifier {
  /** Verifies a raw body against its headers with WebCrypto; resolves to the delivery or rejects with a WebhookError. */
  verify(body: string | Uint8Array, headers: HeadersInput): Promise<VerifiedDelivery>;
}

/** The verifier with its resolved options, for the receivers built on it. */
export interface WebVerifierCore extends WebVerifier {
  readonly options: ResolvedOptions;
  /** The first half, on the headers alone: a signature that opened, or a 401 WebhookError. */
  open(headers: HeadersInput): Promise<OpenedSignature>;
  /** The second half: the body against a signature `open` returned. */
  verifyOpened(body: string | Uint8Array, signature: OpenedSignature): Promise<VerifiedDelivery>;
}

const encoder = new TextEncoder();

/**
 * The canonical bytes of one dialect. WebCrypto has no incremental hash, so they are
 * held whole, one dialect at a time (bounded by maxCanonicalBytes).
 */
function canonicalBytes(body: ParsedBody, dialect: DialectName, limit: number): Uint8Array {
  const chunks: CanonicalChunk[] = [];
  body.write(
    dialect,
    boundedSink(limit, (chunk) => void chunks.push(typeof chunk === 'string' ? chunk : chunk.slice())),
  );
  if (chunks.every((c) => typeof c === 'string')) return encoder.encode((chunks as string[]).join(''));
  return concatBytes(chunks.map((c) => (typeof c === 'string' ? encoder.encode(c) : c)));
}

export function createWebVerifierCore(options: WebVerifierOptions): WebVerifierCore {
  if (typeof options !== 'object' || options === null) throw new TypeError('options must be an object with a publicKey');
  const keys = importKeys(options.publicKey, prepareWebKey);
  const modulusBytes = keys.map((k) => k.modulusBytes);
  const o = resolveOptions(options);
  const perform = (step: Step): unknown => {
    switch (step.op) {
      case 'open':
        return keys[step.keyIndex]!.open(step.signature);
      case 'digest':
        return sha256HexWeb(canonicalBytes(step.body, step.dialect, o.maxCanonicalBytes));
      case 'hashOfDigest':
        return sha256OfHexWeb(step.digest);
    }
  };
  return {
    options: o,
    verify: (body, headers) => driveAsync(verification(body, headers, o, modulusBytes), perform),
    open: (headers) => driveAsync(opening(headers, o, modulusBytes), perform),
    verifyOpened: (body, signature) => driveAsync(matching(body, signature, o), perform),
  };
}
