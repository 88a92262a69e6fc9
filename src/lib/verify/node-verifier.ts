import { importNodeKey, sha256Hex, verifyRsaSha256, type NodePublicKeyInput } from '../crypto/node.js';
import { candidates, finish, noKeyVerifies, prepare, resolveOptions, type VerifiedDelivery, type VerifyOptionsBase } from './flow.js';
import type { HeadersInput } from './headers.js';
import { importKeys } from './key-list.js';

export interface VerifierOptions extends VerifyOptionsBase {
  /** The gateway's public key, or several during a rotation (valid if any verifies). */
  publicKey: NodePublicKeyInput | readonly NodePublicKeyInput[];
}

export interface Verifier {
  /** Verifies a raw body against its headers; returns the delivery or throws a WebhookError. */
  verify(body: string | Uint8Array, headers: HeadersInput): VerifiedDelivery;
}

export function createNodeVerifier(options: VerifierOptions): Verifier {
  if (typeof options !== 'object' || options === null) throw new TypeError('options must be an object with a publicKey');
  const keys = importKeys(options.publicKey, importNodeKey);
  const modulusBytes = keys.map((k) => k.modulusBytes);
  const o = resolveOptions(options);
  return {
    verify(body, headers) {
      const { doc, signature, keyIndexes } = prepare(body, headers, o, modulusBytes);
      let tried = 0;
      for (const { dialect, canonical } of candidates(doc, o.dialects)) {
        tried++;
        const digest = sha256Hex(canonical);
        const message = Buffer.from(digest, 'latin1');
        for (const k of keyIndexes) {
          if (verifyRsaSha256(keys[k]!.key, message, signature)) return finish(doc, o, dialect, k, digest);
        }
      }
      return noKeyVerifies(o, tried);
    },
  };
}
